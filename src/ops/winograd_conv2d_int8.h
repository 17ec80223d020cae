// conv2d_winograd_NCHWc_int8.x86 (registered, see op_template.h): the 3x3,
// stride-1 int8 convolution of conv2d_NCHWc_int8.x86 (uint8 data, int8
// weights, int32 sums) by Winograd's F(2x2, 3x3), exact in integers, for x86
// targets without a dot instruction (AVX2, AVX-512BW without VNNI).
//
// Why: there the direct template multiplies 16 byte pairs per instruction
// (pmaddubsw + pmaddwd: two instructions per 32), and ResNet's 3x3 layers ran
// at 460-514 of the 516 GOP/s that sequence allows (Zen 5, haswell code). The
// transformed tiles need 11 bits, so the GEMM multiplies int16 pairs with
// pmaddwd, also 16 products per instruction, but 16 per output 2x2 tile where
// the direct conv needs 36: 2.25x fewer. With a dot instruction (vpdpbusd,
// 64 byte products per instruction against vpdpwssd's 32 int16 ones) the
// direct template wins, so the graph offers this one only without one
// (graph/passes/strategy.cc).
//
// Exactness. With G2 = 2 G (entries 0, +-1, 2) the transformed weight
// U = G2 g G2^T is an integer, |U| <= 9 * 128 = 1152, and V = B^T d B of a
// uint8 tile has |V| <= 4 * 255 = 1020: both fit int16, and each pmaddwd pair
// sum fits int32. A^T (U .* V) A is then exactly 4 times the integer
// convolution; the sums wrap in int32 on the way, which is harmless because
// only adds, subtracts and multiplies come before the final value, and
// 4 * |conv| <= 4 * 9 * C * 255 * 128 < 2^31 for C <= 1827 (the template's
// bound), so the final floor division by 4 (an arithmetic shift) is exact.
// The result equals conv2d_NCHWc_int8.x86's bit for bit, so the graph's
// zero-point correction and requantizing epilogue are the same.
//
// Workload: conv2d_NCHWc_int8.x86's params (data, kernel, strides=[1,1],
// pads, dilation=[1,1], pad_value, optionally weight_range=[7], which changes
// nothing here), dtype uint8, under this template's name.
// Inputs: data uint8 [N, ceil(C/ic_bn), H, W, ic_bn] (the direct template's),
// U int16 [4, 4, ceil(OC/oc_bn), ceil(C/ic_bn), ic_bn/2, oc_bn, 2] (channel
// pairs innermost, as pmaddwd multiplies them; zero past C and OC), packed at
// build time by winograd_int8_pack_weight. Output int32
// [N, ceil(OC/oc_bn), OH, OW, oc_bn].
// Stages: those of conv2d_winograd_NCHWc.x86 (winograd_common.h): pad (with
// pad_value, extended so that every tile is in bounds), V int16, M int32 =
// sum over channel pairs of dot2_i16 (ir::Intrinsic::DotI16), Y = A^T M A / 4.
// Knobs: ic_bn (4, 8, 16, 32, 64) and oc_bn (4, 8, 16, 32, 48, 64), the direct
// template's, so that layouts agree with it; p_tile (GEMM register-tile rows);
// unroll_ci (0/1).
// Fallback for the ISA row (L int32 lanes, R registers): the blocks of
// detail::int8_fallback_channel_block; p_tile = the largest knob value with
// p_tile * ceil(oc_bn / L) accumulators <= R - ceil(oc_bn / L) - 2 (the weight
// vectors, the broadcast V pair and a product): AVX2 with 16 channels 6,
// AVX-512 16; unroll_ci = 0 (see fallback()).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& conv2d_winograd_nchwc_int8_template();

// Whether the template takes a conv of these attributes: 3x3, stride 1,
// dilation 1, groups 1, at most 1827 input channels (the exactness bound above).
bool winograd_int8_applies(const Conv2DAttrs& a);

// The template's workload for a conv2d_NCHWc_int8.x86 workload `direct`: its
// params (fold_kw dropped: it needs C < 4), this template's name.
Workload winograd_int8_workload(const Workload& direct);

// The OIHW int8 weight [OC, C, 3, 3] transformed (U = G2 g G2^T, exact) and
// laid out as the template's second input for `cfg`.
std::vector<int16_t> winograd_int8_pack_weight(const Workload& w, const schedule::Config& cfg,
                                               const int8_t* oihw);

}  // namespace kiln::ops
