// Removes nodes none of whose outputs reaches a graph output, and initializers
// no remaining node reads (unless the graph returns them), with their
// value_info. Graph inputs stay even when unused: they are the model's
// interface.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

struct DeadCodeStats {
  int nodes_removed = 0;
  int initializers_removed = 0;
};

DeadCodeStats eliminate_dead_code(Graph& g);

}  // namespace kiln::graph::passes
