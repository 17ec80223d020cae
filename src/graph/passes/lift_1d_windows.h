// 1-D convolutions and pools (PyTorch's Conv1d, MaxPool1d, AvgPool1d,
// ConvTranspose1d, AdaptiveAvgPool1d(1): ONNX nodes on [N, C, L] tensors) run
// as their 2-D forms on [N, C, 1, L], the only rank kiln's templates and
// kernels take.
//
// A whole region is lifted, not one node at a time: every value a lifted node
// writes has a 4-D twin, and the nodes that read it stay 4-D when they can:
// BatchNormalization (per channel, any rank) and elementwise operators whose
// other inputs are lifted values, scalars or constants (a [C, 1] constant
// becomes [C, 1, 1]). So Conv1d -> BatchNorm1d -> ReLU -> MaxPool1d chains
// are one 2-D chain with no reshape between its kernels, and BatchNorm still
// folds into the Conv. A 3-D value is rebuilt by a Reshape only where a node
// that cannot be lifted, or a graph output, reads it.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of nodes lifted to 2-D.
int lift_1d_windows(Graph& g);

}  // namespace kiln::graph::passes
