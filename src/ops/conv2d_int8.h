// conv2d_NCHWc_int8.x86: a convolution of uint8 data with int8 weights into
// int32, exact, in NeoCPU's blocked layout (the integer core of ONNX's
// ConvInteger / QLinearConv; zero-point correction, bias and requantization
// are the graph's epilogue, see docs/architecture.md and DESIGN.md).
//
// Workload params, in order: data=[N,C,H,W] (logical), kernel=[OC,C,KH,KW],
// strides=[sh,sw], pads=[top,left,bottom,right], dilation=[dh,dw],
// pad_value=[v] (0..255: the value padded taps read; the graph passes the
// activation zero point zp_x, so that the correction -zp_x * sum(w) it folds
// into the bias stays exact at the borders too); optionally weight_range=[7]
// (every weight within [-64, 64]: the dot is pmaddubsw + pmaddwd on x86 without
// VNNI, ops/int8_weight_range.h; the tuner draws its random weights from that
// range); optionally fold_kw=[1] (below); dtype "uint8"; groups 1.
//
// Inputs: data uint8 [N, ceil(C/ic_bn), H, W, ic_bn] (ic_bn a multiple of 4;
// channels past C, if any, are read and meet zero weights), weight int8
// [ceil(OC/oc_bn), ceil(C/ic_bn), KH, KW, ic_bn/4, oc_bn, 4] (packed at build
// time by pack_conv2d_int8_weight; channels past C or OC are zero). Output
// int32 [N, ceil(OC/oc_bn), OH, OW, oc_bn] (channels past OC are 0).
// out = sum over input-channel blocks, kh, kw and the ic_bn/4 words of
// dot4_u8i8 (codegen/dot_product.h); padding is a stage of the kernel filled
// with pad_value (computed at root, rows in parallel; none when every pad is 0).
// The template's reference computes on the physical layouts: every channel of
// the padded blocks, so that it equals the kernel for any weight values.
//
// Knobs (the schedule is conv2d_NCHWc.x86's, ops/conv2d.h): ic_bn (4, 8, 16,
// 32, 64; at most C rounded up to 4), oc_bn (4, 8, 16, 32, 48, 64; at most OC
// rounded up to 4), tile_ow (2 levels over OW, divisors and powers of two <=
// 32, a partial last tile guarded), unroll_kw, oc_reg, oh_reg, kernel_outer;
// fits(): the accumulators within the registers the dot lowering leaves
// (detail::int8_tile_fits).
// Fallback for the ISA row (L int32 lanes = float lanes): ic_bn and oc_bn by
// detail::int8_fallback_channel_block (the largest of 16, 8, 4 dividing the
// channels rounded up to 4; one rule for both sides, so that chained convs
// need no transform);
// tile_ow = conv2d_NCHWc's rule with the int8 accumulator budget of
// ops/int8_registers.h (3/4 of the registers with a dot instruction; on AVX2
// 16 - (2 * weight vectors + 4), what the vpmaddwd lowering leaves);
// unroll_kw = KW <= 3; oc_reg = oh_reg = 1; kernel_outer = 1 if KH * KW > 1 (the
// window outside the input-channel blocks: the other order spilled the tile of
// 3x3 convolutions, see the fallback).
// The sum is exact in int32 for C * KH * KW <= 65792.
//
// fold_kw=[1], for C < 4 (a network's RGB or grayscale input): a 4-byte dot
// over 3 real channels and one padding channel wastes a quarter of every
// multiply (the ResNet stem ran at 75 % of the other convs' rate). Folded, the
// dot runs over (kw, c) pairs instead: a stage of the kernel gathers, per
// padded input row and output column, the C * KW bytes the window row reads,
// k = kw * C + c, padded to Kp = C * KW rounded up to 4 with pad_value; the
// conv is then KH x 1 over Kp channels (21 of 24 lanes used for 7x7 RGB).
// The data input is unchanged (NCHW[ic_bn]c, ic_bn = 4); the weight is
// [ceil(OC/oc_bn), 1, KH, 1, Kp/4, oc_bn, 4]
// (pack_conv2d_int8_weight_folded_kw). The graph sets it for every int8 conv
// with C < 4 and KW > 1 (graph/passes/strategy.cc); being a workload
// parameter, it keys its own tuning records.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& conv2d_nchwc_int8_template();

// The workload of "conv2d_NCHWc_int8.x86" for logical attributes (groups 1) and
// the padding value; narrow_weights appends weight_range=[7] (the caller has
// checked that every weight is within [-64, 64]).
Workload conv2d_int8_workload(const Conv2DAttrs& a, int64_t pad_value, bool narrow_weights = false);

// Whether w carries fold_kw=[1]; absent: false, any other value a bad workload.
bool conv2d_int8_folds_kw(const Workload& w);
// Whether fold_kw applies to a conv of these attributes: C < 4, KW > 1, groups 1.
bool conv2d_int8_can_fold_kw(const Conv2DAttrs& a);
// w with fold_kw=[1] appended.
Workload with_folded_kw(Workload w);

// OIHW int8 weight -> [ceil(OC/ocb), ceil(IC/icb), KH, KW, icb/4, ocb, 4], zero filled.
std::vector<int8_t> pack_conv2d_int8_weight(const int8_t* w, int64_t oc, int64_t ic, int64_t kh,
                                            int64_t kw, int64_t icb, int64_t ocb);
// OIHW int8 weight -> the folded form [ceil(OC/ocb), 1, KH, 1, Kp/4, ocb, 4],
// k = kw * IC + c, Kp = IC * KW rounded up to 4, zero filled.
std::vector<int8_t> pack_conv2d_int8_weight_folded_kw(const int8_t* w, int64_t oc, int64_t ic,
                                                      int64_t kh, int64_t kw, int64_t ocb);
// The weight packing of workload w under cfg: folded or not.
std::vector<int8_t> pack_conv2d_int8_weight(const int8_t* w, const Workload& wl,
                                            const schedule::Config& cfg);
// NCHW uint8 -> [N, ceil(C/cb), H, W, cb]; channels past C are `fill`.
std::vector<uint8_t> nchw_to_nchwc_u8(const uint8_t* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int64_t cb, uint8_t fill);

namespace detail {
// Spatial padding of NCHW[x]c uint8 data with `value`, the activation zero
// point and not 0: a padded tap must contribute (zp_x - zp_x) * w = 0 once
// the bias carries the zero-point correction. Returns data itself when every
// pad is 0. Shared by conv2d_NCHWc_int8 and depthwise_conv2d_NCHWc_int8.
ir::Tensor pad_u8_with_value(const ir::Tensor& data, const Conv2DAttrs& a, int64_t value);

// The fallback channel block of `channels` int8 channels, on either side of a
// conv and for the depthwise: the largest of 16, 8, 4 dividing `channels`
// rounded up to 4. One rule for inputs and outputs, so that a chain of int8
// convs agrees on its blocks: the graph moves a blocked activation from conv to
// conv only when its blocks hold no padding channels (beyond the rounding to 4
// of a network's input), and with the output side's old "16 if OC >= 16"
// MobileNetV2's 24-channel stage ran a Slice and layout transforms around each
// of its convs (16c out, 8c in), 10 % of its time (Zen 4).
int64_t int8_fallback_channel_block(int64_t channels);

// The channel-block knobs of the int8 convolutions (conv2d_NCHWc_int8.x86 and
// its Winograd sibling, so that their layouts agree): ic_bn of 4, 8, 16, 32,
// 64 and oc_bn of 4, 8, 16, 32, 48, 64, each at most its channels rounded up to 4.
void define_int8_channel_blocks(schedule::ConfigSpace& space, const Conv2DAttrs& a);
}  // namespace detail

}  // namespace kiln::ops
