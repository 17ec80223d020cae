// depthwise_conv2d_NCHWc_int8.x86: a depthwise convolution (groups = C = OC,
// channel multiplier 1) of uint8 data with int8 weights into int32, exact, in
// NeoCPU's blocked layout: the integer core of a depthwise QLinearConv (the
// zero-point correction, bias and requantization are the graph's epilogue,
// kiln.Requantize fused into the register tile, as for conv2d_NCHWc_int8.x86).
//
// Workload params, in order: data=[N,C,H,W] (logical), kernel=[C,1,KH,KW],
// strides=[sh,sw], pads=[top,left,bottom,right], dilation=[dh,dw],
// pad_value=[v] (0..255: the value padded taps read; the graph passes the
// activation zero point zp_x so that the correction -zp_x * sum(w[c]) it folds
// into the bias is exact at the borders too); dtype "uint8".
//
// Inputs: data uint8 [N, ceil(C/cb), H, W, cb] (channels past C, if any, are
// read and meet zero weights), weight int8 [ceil(C/cb), 1, KH, KW, 1, cb]
// (pack_depthwise_int8_weight; channels past C are zero). Output int32
// [N, ceil(C/cb), OH, OW, cb] (channels past C are 0). The input and output
// channel blocks are the same cb: the layout between int8 convolutions passes
// through unchanged when the neighbours' blocks agree.
//
// There is no reduction over channels, so dot4_u8i8 does not apply: each tap
// widens the cb uint8 data and int8 weights to int32 lanes and multiplies and
// adds them over the channel block (products are below 2^15 in magnitude, so
// LLVM may use vpmaddwd with zero high halves, or vpmulld); the weights of a
// tap are loaded once per register tile and reused along ow.
//
// Schedule: depthwise_conv2d_NCHWc.x86's (ops/depthwise_conv2d.h): the
// output's (n, channel block, oh) fused and parallel, ow split by tile_ow, a
// register tile of ow_tile x cb int32 accumulators (ow unrolled, cb
// vectorized) reducing over kh and kw (kw unrolled if unroll_kw) outside it,
// the epilogue reading the hot tile. The padding (none when every pad is 0)
// by pad_mode: 0 a stage at root, rows in parallel (one more pass over
// memory); 1 per output row, in the parallel loop (the KH rows it reads: KH /
// stride times the padding work); 2 inline, each tap a select between the
// clamped load and the zero point (no pass, a compare per tap).
// Knobs: c_bn (4, 8, 16, 32, 64; at most C rounded up to 4), tile_ow (2 levels
// over OW, divisors and powers of two <= 32, a partial last tile guarded),
// unroll_kw (0/1), pad_mode (0/1/2).
// Fallback (the same blocks on every ISA row, so layouts agree): cb = 16 if
// C >= 16, else 8 if C > 4, else 4 (conv2d_NCHWc_int8's oc_bn rule, so that a
// pointwise convolution's output feeds it without a transform); ow_tile =
// conv2d_NCHWc's rule (detail::fallback_ow_tile, int32 lanes = float lanes);
// unroll_kw = 1 if KW <= 5; pad_mode = 2 (kiln_bench_int8 on Zen 4, 2 threads,
// MobileNetV2's 144 channels 56x56 3x3: inline 86 GOP/s, root 64, per row 39,
// unpadded 69-106 in the same runs; 96 channels 112x112 stride 2: 35 vs 27-31).
// The sum is exact in int32 for KH * KW <= 65792.
//
// Whole-channel block (the optional param whole_channels=[1], after
// pad_value; strategy.cc's row on targets with AMX): one block of every
// channel, cb = C rounded up to 4, the layout of conv2d_NCHWc_int8_amx.x86
// (NCHW[C]c, NHWC for batch 1), so that a depthwise between AMX
// convolutions needs no layout transform. The layout block and the vector
// are decoupled: the output's block axis is split by c_vec, the register
// tile is ow_tile x c_vec int32 accumulators (c_vec vectorized), and the
// chunks are a loop outside it, a partial last chunk guarded (it then runs
// scalar): with c_parallel 1 fused into the parallel loop ((n, oh, chunk):
// as many iterations as the 16-channel block's (n, block, oh)), with 0
// inside each ow tile (the parallel loop over (n, oh) only). Knobs: c_bn
// (only C rounded up to 4), c_vec (4, 8, 16; at most the block), c_parallel
// (0/1), tile_ow, unroll_kw, pad_mode as above. Fallback: c_vec = the
// largest of 16, 8, 4 that divides the block and is at most the ISA's int32
// lanes (so no chunk is partial: 16 on AVX-512 for MobileNetV2's 32..960
// channels, 8 for 24 or 40); c_parallel = 1 when N * OH < 64 (rows alone
// would idle a many-core machine's cores); ow_tile = conv2d_NCHWc's rule
// for a c_vec-wide column; the rest as above. The blocks are the same on
// every ISA row. On Zen 5 (kiln_bench_int8 --depthwise-blocks, MobileNetV2's
// ten depthwise shapes, medians) the whole-channel fallback runs at 0.90-1.21x
// the 16-channel block's speed on 1 thread and 0.88-1.32x on 2 (stride 2
// faster, stride-1 layers 0.88-1.04x); on 2
// threads c_parallel 1 beats 0 by 8-14 % on the 7-row layers.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& depthwise_conv2d_nchwc_int8_template();

// The workload of "depthwise_conv2d_NCHWc_int8.x86" for logical attributes
// (groups = in_channels = out_channels) and the padding value.
// With whole_channels, the workload of the whole-channel block (the param
// whole_channels=[1]; see above).
Workload depthwise_conv2d_int8_workload(const Conv2DAttrs& a, int64_t pad_value,
                                        bool whole_channels = false);

// [C, 1, KH, KW] int8 weight -> [ceil(C/cb), 1, KH, KW, 1, cb], zero filled.
std::vector<int8_t> pack_depthwise_int8_weight(const int8_t* w, int64_t c, int64_t kh, int64_t kw,
                                               int64_t cb);

}  // namespace kiln::ops
