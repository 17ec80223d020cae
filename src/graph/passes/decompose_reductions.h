// The reductions kiln has no kernel of their own for, as ones it has:
//   ReduceL1(x)        = ReduceSum(Abs(x))
//   ReduceL2(x)        = Sqrt(ReduceSum(x * x))     (F.normalize's norm)
//   ReduceSumSquare(x) = ReduceSum(x * x)
//   ReduceMin(x)       = Neg(ReduceMax(Neg(x)))
// with the node's axes (attribute or input), keepdims and
// noop_with_empty_axes. The elementwise parts fuse into the reduction's
// kernel. Float32 nodes only; integer ones fold from constants.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of reductions rewritten.
int decompose_reductions(Graph& g);

}  // namespace kiln::graph::passes
