// InstanceNormalization(x, scale, B) on [N, C, spatial...] becomes
// LayerNormalization(x, 1, axis = 2) (each (n, c) plane normalized over its
// spatial dims: the same statistics) followed by x * scale[c] + B[c] as a
// Mul and an Add by [C, 1, ...] constants. The LayerNorm kernel is kiln's
// vectorized row normalization, and the Mul and Add fuse into it; PyTorch
// also exports GroupNorm this way (Reshape, InstanceNormalization with unit
// scale, Reshape, Mul, Add), so GroupNorm models take the same path.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Float32 InstanceNormalization nodes of rank >= 3; returns the number rewritten.
int instance_norm_as_layer_norm(Graph& g);

}  // namespace kiln::graph::passes
