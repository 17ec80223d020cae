// Channel counts that no useful vector block divides are padded to one that
// is, inside the convolutions' chains: the padded channels hold zeros (their
// weights, biases and per-channel constants are zero or neutral), and a
// Slice drops them where an operator that mixes or moves channels (Concat,
// Reshape, Split, a graph output) reads the tensor.
//
// Why: the layout pass blocks channels by a divisor of the count (NCHW[x]c,
// ops::fallback_channel_block). ShuffleNetV2 1.0x splits 116 channels into
// branches of 58 = 2 x 29, whose largest divisor up to 16 is 2: its 1x1
// convolutions used 2 of 16 lanes and ran at 30 GFLOP/s, a third of the
// model's time (Intel Xeon, 2 threads). Padded to 64, they take blocks of 16.
// Vectors of 29 lanes were tried and compile badly (stop 59).
//
// Which channels: a class of values that share a channel axis (a Conv's or a
// depthwise Conv's output, the elementwise ops and pools that follow it, the
// depthwise convolutions that keep its channels, and the other operands of
// its Adds and Muls) is padded when it holds the output of a convolution and
// its block (fallback_channel_block) fills at most a quarter of a vector of
// `lanes` floats (58 channels: blocks of 2), to a multiple of `lanes` when
// that adds at most 1/8 of the channels, else of lanes / 2 when that adds at
// most 1/4.
//
// A padded channel must stay finite (a NaN times a zero weight is NaN):
// only operators that map finite values to finite values take padded inputs
// (Relu, Clip, Sigmoid, HardSwish, pools, Add, Mul, ...; Div only by a
// constant, padded with ones).
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of channel classes padded. `lanes`: float32 lanes of
// the target's vectors (16 with AVX-512, 8 with AVX2 and 4 with NEON).
int pad_channels(Graph& g, int64_t lanes);

// The channel count a class of `channels` is padded to, or `channels` when
// it stays as it is.
int64_t padded_channel_count(int64_t channels, int64_t lanes);

}  // namespace kiln::graph::passes
