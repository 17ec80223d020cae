// Placeholder registration (filled in by its owner).
#include "graph/op_registry.h"

namespace kiln::graph {
void register_nn_ops() {}
}  // namespace kiln::graph
