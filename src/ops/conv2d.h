// conv2d templates.
//
// conv2d_nchw: plain NCHW data and OIHW weights, any stride, padding and
// dilation; a padding stage that the config inlines, computes at root, or
// computes per input-channel tile.
//
// conv2d_NCHWc.x86: data [N, C/ic_bn, H, W, ic_bn], weights
// [OC/oc_bn, IC/ic_bn, KH, KW, ic_bn, oc_bn], output [N, OC/oc_bn, OH, OW, oc_bn]
// (NeoCPU's layout): a register tile of ow_tile x oc_bn accumulates over input
// channel blocks and kernel taps, the output-channel block vectorized.
#pragma once

#include "ops/kernel.h"
#include "ops/reference.h"
#include "schedule/config_space.h"

namespace kiln::ops {

using Conv2DParams = reference::Conv2DParams;

// Knobs: tile_oc, tile_oh, tile_ow (2 levels), tile_ic (2 levels), pad_mode
// (0 inline, 1 root, 2 at the input-channel tile), unroll_inner (0/1).
schedule::ConfigSpace conv2d_nchw_space(const Conv2DParams& p, schedule::SplitPolicy policy);
Kernel conv2d_nchw(const Conv2DParams& p, const schedule::Config& cfg);

// Knobs: tile_ic (2 levels over IC; ic_bn = inner), tile_oc (2 levels; oc_bn = inner),
// tile_ow (2 levels; the register tile width), unroll_kw (0/1).
schedule::ConfigSpace conv2d_nchwc_space(const Conv2DParams& p);
// Stride and dilation as in p; padding is a stage of the kernel.
Kernel conv2d_nchwc(const Conv2DParams& p, const schedule::Config& cfg);
int64_t conv2d_nchwc_ic_block(const schedule::Config& cfg);
int64_t conv2d_nchwc_oc_block(const schedule::Config& cfg);

// Host-side layout changes for tests and benchmarks.
std::vector<float> nchw_to_nchwc(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb);
std::vector<float> nchwc_to_nchw(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb);
std::vector<float> oihw_to_blocked(const float* w, int64_t oc, int64_t ic, int64_t kh, int64_t kw,
                                   int64_t icb, int64_t ocb);

}  // namespace kiln::ops
