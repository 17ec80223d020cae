// Constant folding: every node whose inputs are all constants (initializers)
// is evaluated on the host with the registry's evaluate and replaced by
// initializers that keep its output names. Shape nodes fold from value_info
// alone, so the Shape -> Gather -> Unsqueeze -> Concat -> Reshape subgraphs
// that exporters emit for ViT/BERT-style models vanish in one forward sweep
// (nodes are topologically sorted: a folded node's readers come later).
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace kiln::graph::passes {

struct FoldConstantsOptions {
  // A node that can run as a kernel (its OpDef has a compute) is left alone
  // when its output has more than this many elements AND more elements than all
  // its inputs together: folding an Expand/Tile of a small constant would only
  // bloat the weights. Operators without a compute (ConstantOfShape, Range, ...)
  // always fold, since nothing else could run them.
  int64_t max_broadcast_elements = int64_t{1} << 20;
};

struct FoldConstantsStats {
  int folded = 0;             // nodes replaced by initializers
  int skipped_too_large = 0;  // constant nodes left in place by max_broadcast_elements
};

// Throws std::runtime_error naming the node when its evaluation fails or
// disagrees with its value_info type.
FoldConstantsStats fold_constants(Graph& g, const FoldConstantsOptions& options = {});

}  // namespace kiln::graph::passes
