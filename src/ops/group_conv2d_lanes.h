// group_conv2d_lanes_NCHWc.x86 (registered, see op_template.h): a grouped
// convolution whose groups are narrower than a channel block, computed with
// several whole groups in one vector (ResNeXt-50's 32 groups of 4 and 8
// channels, RegNet's groups of 8).
//
// Why: group_conv2d_NCHWc.x86 blocks channels within a group, so a group of
// 4 channels runs 4-lane vectors: a quarter of a zmm register (ResNeXt-50's
// first stage at 90 GFLOP/s on a Zen 5, 17 % of its peak).
//
// Workload params as group_conv2d_NCHWc.x86 (data=[N,C,H,W], kernel=[OC,Cg,
// KH,KW], strides, pads, dilation; float32), restricted to groups of equal
// input and output width Cg = C/G = OC/G (group_conv2d_lanes_applies()).
// Inputs: data [N, C/cb, H, W, cb] and weight [C/cb, Cg, KH, KW, cb] with
// w[co, j, kh, kw, l] = OIHW[co*cb + l, j, kh, kw]; output [N, C/cb, OH, OW,
// cb]: conv2d_NCHWc's layout on both sides, so neighbouring convolutions in
// the same block need no transform. A block holds cb / Cg whole groups.
// Lane l of block co sums over j < Cg, kh, kw its group's input lane
// (l / Cg) * Cg + j: for each j a fixed permutation of the pixel's block,
// which codegen emits as one vector load and a shuffle, not a gather
// (codegen_llvm.cc, emit_load).
// Schedule (depthwise_conv2d_NCHWc.x86's): the padding inlined (clamped reads
// selecting 0) or, with pad_copy, written once to a padded copy; the output's
// (n, block, oh) loops fused and parallel; ow split by tile_ow; a register
// tile of ow_tile x cb accumulators (ow unrolled, cb vectorized) at the
// ow-tile loop, reducing over kh, kw (unrolled if unroll_kw; below the
// columns with kw_inner, so that each shuffled input column serves its taps
// from a register) and the group's Cg channels (unrolled).
// Knobs: block (cb: multiples of 2 Cg dividing C, at most 64), tile_ow (2
// levels over OW, divisors and powers of two <= 32), unroll_kw (0/1),
// kw_inner and pad_copy (0/1: conv2d.h's define_lane_window_knobs).
// Fallback: cb = conv2d_NCHWc's block(C) (16 where 16 | C: the neighbours'
// block), ow_tile by conv2d_NCHWc's ow rule, unroll_kw = 1 if KW <= 5,
// kw_inner and pad_copy by lane_window_fallback_knobs (Cg multiplies per lane
// and tap).
#pragma once

#include <vector>

#include "ops/op_template.h"
#include "ops/reference.h"

namespace kiln::ops {

const OpTemplate& group_conv2d_lanes_nchwc_template();

// Whether the template computes a grouped convolution (groups > 1, not
// depthwise) of these attributes: equal group widths Cg on both sides, and
// conv2d_NCHWc's fallback block of C a multiple of 2 Cg (two groups or more
// per block, every block whole groups).
bool group_conv2d_lanes_applies(const reference::Conv2DAttrs& a);

// OIHW weight [C, Cg, KH, KW] -> [C/cb, Cg, KH, KW, cb]; throws
// std::invalid_argument unless cb divides C and is a multiple of Cg.
std::vector<float> group_conv2d_lanes_pack_weight(const float* w, int64_t channels, int64_t cg,
                                                  int64_t kh, int64_t kw, int64_t cb);

}  // namespace kiln::ops
