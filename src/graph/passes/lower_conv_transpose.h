// A float32 2-D ConvTranspose with a constant weight becomes one Conv over its
// input, whose output channels hold every stride phase of every output
// channel, and a pixel shuffle (Reshape, Transpose, Reshape) that interleaves
// the phases into the upsampled map, then a Slice to the output's size.
//
// Why: output pixel o of a transposed convolution with stride S receives input
// i through tap k when o + pad = i * S + k, so the outputs of one phase
// r = o mod S all use the taps k = (r + pad) mod S + t * S, on consecutive
// input pixels: an ordinary convolution. Stacking the S x S phases as output
// channels (taps a phase does not use get zero weights) runs the whole
// operator on the conv templates. The direct ConvTranspose kernel ran a
// U-Net's 128 -> 64, 2x2 stride-2 upsampling at 1.3 GFLOP/s (50 of its 72 ms,
// 4.4x ONNX Runtime, Intel Xeon); as a 1x1 Conv to 256 channels it is one of
// the cheapest kernels of the model.
//
// The phase convolution's window covers the union of the phases' taps: a 2x2
// stride-2 kernel gives a 1x1 conv (no zero taps), 3x3 stride 2 pad 1 a 2x2
// (7 of 16 taps zero), 4x4 stride 2 pad 1 a 3x3 (20 of 36). Dilated
// transposed convolutions keep the direct kernel.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of ConvTranspose nodes rewritten.
int lower_conv_transpose(Graph& g);

}  // namespace kiln::graph::passes
