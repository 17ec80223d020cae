// A BatchNormalization that fold_batch_norm could not fold into a
// convolution (DenseNet's pre-activation BN after a Concat, a BN on a graph
// input) becomes Mul(x, scale) -> Add(., shift), scale = gamma / sqrt(var +
// eps) and shift = beta - mean * scale computed once here as [C, 1, ..., 1]
// constants. Why: the BatchNormalization op computed the square root and the
// divide per element, and per-channel constants of elementwise ops are what
// propagate_layout re-lays out for NCHW[x]c, so the chain stays blocked.
// Only inference-mode BNs with float32 constant parameters of shape [C] on an
// input of rank >= 2; anything else is left to the BatchNormalization op.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of BatchNormalization nodes rewritten.
int decompose_batch_norm(Graph& g);

}  // namespace kiln::graph::passes
