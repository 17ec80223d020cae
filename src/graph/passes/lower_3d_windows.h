// 3-D convolutions and pools (PyTorch's Conv3d, ConvTranspose3d, MaxPool3d,
// AvgPool3d, LPPool3d: ONNX Conv / ConvTranspose / MaxPool / AveragePool /
// LpPool on NCDHW) run as 2-D ones, the only rank kiln's templates and
// kernels take. The depth axis is taken apart tap by tap, each tap a strided
// Slice of the depth-padded input (LpPool: by a pool, below):
//
//  - Conv: depth goes to the batch ([N, Dp, C, H, W] after one Transpose),
//    each depth tap t a 2-D Conv of its slice, reshaped to [N * Dout, C, H,
//    W], with the weight W[:, :, t] (cut out at build time), the taps summed
//    by an Add chain (the first carries the bias), and one Transpose back.
//    Groups, strides, dilations and pads of H and W stay on the 2-D Conv.
//  - ConvTranspose: the same with the input upsampled along depth first
//    (stride - 1 zeros after each depth), where a transposed tap is a
//    plain one: 2-D ConvTransposes (lower_conv_transpose makes them
//    convolutions) per depth tap, summed. Half the slices of a stride-2
//    depth are zeros: simple, not the fastest (a phase split would not be).
//  - MaxPool / AveragePool: the window is separable, so the depth taps are
//    reduced first (Max, or Add then Div by the per-output-depth count of
//    counted taps), depth goes to the channels ([N, C * Dout, H, W], a plain
//    Reshape), and one 2-D pool does H and W with the node's own attributes.
//    AveragePool's divisor is the product of per-axis counts, in ONNX and in
//    the reference, so the split is exact for every count_include_pad,
//    ceil_mode, pads and auto_pad.
//  - LpPool: an LpPool over depth alone (a 2-D one on [N, C, D, H * W]),
//    then, depth folded into the channels, one over H and W: the first
//    pool's (sum of |x|^p)^(1/p) raised to p again in the second is the
//    depth sum, so the split is exact up to rounding.
//
// auto_pad is resolved to explicit pads first (op_util's window rules); a
// depth tap that reads only padding is dropped from a Conv.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of nodes rewritten.
int lower_3d_windows(Graph& g);

}  // namespace kiln::graph::passes
