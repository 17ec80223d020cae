// depthwise_conv2d_NCHWc.x86 (registered, see op_template.h): a depthwise
// convolution (channel multiplier 1) in NCHW[cb]c.
//
// Workload params, in order: data=[N,C,H,W] (logical), kernel=[C,1,KH,KW],
// strides=[sh,sw], pads=[top,left,bottom,right], dilation=[dh,dw]; float32.
// Inputs: data [N, C/cb, H, W, cb] (unpadded: padding is inlined into the taps,
// a clamped load and a select per tap, or with pad_copy written once to a
// padded copy; none when all pads are 0) and weight [C/cb, 1, KH, KW, 1, cb]
// (ops::oihw_to_blocked(w, C, 1, KH, KW, 1, cb)). Output [N, C/cb, OH, OW, cb].
//
// Schedule: the output's (n, channel block, oh) loops fused and parallel; ow
// split by tile_ow; a register tile of ow_tile x cb accumulators (ow unrolled,
// cb vectorized) computed at the ow-tile loop, reducing over kh and kw
// (unrolled if unroll_kw) outside it, or kw inside it with kw_inner; an
// epilogue output reads the hot tile.
// Knobs: tile_c (2 levels over C, exact factors <= 64; cb = inner), tile_ow
// (2 levels over OW, divisors and powers of two <= 32; a partial last tile is
// guarded), unroll_kw (0/1), kw_inner (0/1, windows wider than 1) and pad_copy
// (0/1, padded workloads): conv2d.h's define_lane_window_knobs.
//
// Fallback rule (AVX-512 float32, 16 lanes): cb = the conv channel block rule
// (16 if 16 | C, else 8 if 8 | C, else the largest divisor of C <= 16);
// ow_tile = the conv ow rule (cap = min(OW, 24 / ceil(cb / 16)); the largest
// divisor d of OW <= cap if d >= 8 or d == OW, else the largest power of two
// <= cap); unroll_kw = 1 if KW <= 5 else 0; kw_inner and pad_copy by
// conv2d.h's lane_window_fallback_knobs (1 multiply per lane and tap).
#pragma once

#include "ops/op_template.h"
#include "ops/reference.h"

namespace kiln::ops {

const OpTemplate& depthwise_conv2d_nchwc_template();

// The channel block cb: input and output blocks are the same (for the layout pass).
int64_t depthwise_conv2d_nchwc_ic_block(const schedule::Config& cfg);
int64_t depthwise_conv2d_nchwc_oc_block(const schedule::Config& cfg);

}  // namespace kiln::ops
