// A convolution's kernel taps that read only padding, for every output
// position, multiply zeros: this pass drops them from the weight and the
// padding with them, so the convolution computes the same outputs with a
// smaller window.
//
// Why: DeepLabV3's ASPP runs 3x3 convolutions with dilations 12, 24 and 36
// (padding equal to the dilation) on a 14x14 map. At dilations 24 and 36 only
// the centre tap ever lands inside the input, yet the direct template padded
// the input to 62x62 and 86x86 (a 28 MB copy of 960 channels) and ran nine
// taps: 13 of the model's 33 ms (Intel Xeon, 2 threads), 2.1x ONNX Runtime.
// Trimmed, they are 1x1 convolutions. The same holds for a 3x3 convolution on
// a 1x1 map (pad 1), and for any window whose dilation outgrows the map.
//
// The taps of a spatial dim that are dead for every output form a prefix and
// a suffix of the kernel, or hide between live ones only when the stride skips
// over the whole input (those stay). The pass trims the prefix and suffix
// where the padding left over is non-negative (a crop would need a Slice of
// the input); a window with no live tap at all (the output is the bias) is
// left as it is.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Float32 Conv nodes with a constant weight and a known input shape. Returns
// the number of convolutions trimmed.
int trim_conv_taps(Graph& g);

}  // namespace kiln::graph::passes
