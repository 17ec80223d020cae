#include "graph/passes/pipeline.h"

#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fold_batch_norm.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/simplify.h"

namespace kiln::graph::passes {

void run_default_passes(Graph& g) {
  simplify(g);
  fold_constants(g);
  fold_batch_norm(g);
  fold_constants(g);
  eliminate_dead_code(g);
}

}  // namespace kiln::graph::passes
