// conv2d_NCHWc_bf16.x86: a convolution of float32 data with bfloat16 weights
// into float32, in NeoCPU's blocked layout: the bf16 variant of
// conv2d_NCHWc.x86 (kiln build --precision bf16; docs/quantization.md).
//
// Workload params, in order: those of conv2d_NCHWc.x86 (data=[N,C,H,W]
// logical, kernel=[OC,C,KH,KW], strides, pads=[top,left,bottom,right],
// dilation); dtype "bfloat16"; groups 1.
//
// Inputs: data float32 [N, C/ic_bn, H, W, ic_bn] (conv2d_NCHWc.x86's layout, so
// that its neighbours, layout transforms and epilogues are the float path's),
// weight bfloat16 [OC/oc_bn, C/ic_bn, KH, KW, ceil(ic_bn/2), oc_bn, 2] (packed
// at build time by pack_conv2d_bf16_weight: rounded to nearest even, input
// channels in pairs, the pair element past an odd ic_bn zero). Output float32
// [N, OC/oc_bn, OH, OW, oc_bn].
//
// The kernel first converts its data to bf16 in a stage of its own, computed
// at root with rows in parallel: [N, C/ic_bn, H + pads, W + pads,
// 2 ceil(ic_bn/2)], zero at the padding and past an odd ic_bn (this stage
// replaces conv2d_NCHWc's padding stage and exists even without padding).
// Each input element is converted once instead of once per output-channel
// block and kernel tap, and the register tile reads each channel pair as one
// 32-bit broadcast, which is what vdpbf16ps takes. Then
// out = sum over ic blocks, kh, kw and the channel pairs of dot2_bf16
// (codegen/bf16_dot.h: vdpbf16ps with avx512bf16, exact generic elsewhere).
//
// Knobs, fallback, fits and the schedule are conv2d_NCHWc.x86's (ops/conv2d.h;
// space(), fallback() and fits() ask that template for the same shapes, and
// schedule() is detail::schedule_conv_nchwc): the accumulators are float32,
// so the register tile that suits the float template suits this one.
//
// Reference (reference_typed): on the physical layouts, data rounded to bf16
// as the kernel does, products of bf16 values summed in double. The kernel's
// products are exact in float32, so it differs from the reference only by
// its float32 accumulation, as conv2d_NCHWc.x86 does from its own: the same
// rtol holds.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& conv2d_nchwc_bf16_template();

// The workload of "conv2d_NCHWc_bf16.x86" for logical attributes (groups 1).
Workload conv2d_bf16_workload(const Conv2DAttrs& a);

// OIHW float32 weight -> bf16 [OC/ocb, IC/icb, KH, KW, ceil(icb/2), ocb, 2]
// (nearest even; the element past an odd icb is 0). icb | IC and ocb | OC.
std::vector<uint16_t> pack_conv2d_bf16_weight(const float* w, int64_t oc, int64_t ic, int64_t kh,
                                              int64_t kw, int64_t icb, int64_t ocb);

}  // namespace kiln::ops
