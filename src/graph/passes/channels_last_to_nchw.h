// Runs channels-last regions of a graph in NCHW, so that they join the blocked
// NCHW[x]c layout of the convolutions around them instead of costing a
// transpose out of it and one back (ConvNeXt: every block and every
// downsample layer).
//
// A region starts at a Transpose(perm 0,2,3,1) of a 4-D float32 NCHW value
// and ends at Transposes(perm 0,3,1,2) of its values. Between them every node
// must be one this pass understands, with every operand that is not a region
// value a constant:
//   LayerNormalization(axis -1, Scale [C], B [C])  -> kiln.ChannelNorm
//   MatMul(x, W const [C, C'])                      -> Conv 1x1, weight W^T as
//                                                      [C', C, 1, 1]
//   Add / Sub / Mul / Div with a per-channel ([C'] or [1, 1, 1, C']) or scalar
//     constant, or of two region values of one shape -> the same op, the
//                                                      constant as [C', 1, 1]
//   unary elementwise ops (Gelu, Relu, Sigmoid, ...) -> unchanged
// The Transposes become no-ops and go; fold_batch_norm then folds the
// Linear's bias Add and a following per-channel Mul (ConvNeXt's layer scale)
// into the 1x1 convolution, and the blocked-layout passes treat it as any
// other convolution.
//
// The graph is left unchanged for a region with any other node, an operand
// that is neither a region value nor such a constant, a region value that is
// a graph output, or no end Transpose: every value outside the region keeps
// its meaning, since only region values (all of whose readers are region
// nodes or end Transposes) change layout.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of regions rewritten.
int channels_last_to_nchw(Graph& g);

}  // namespace kiln::graph::passes
