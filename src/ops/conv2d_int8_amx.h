// conv2d_NCHWc_int8_amx.x86: conv2d_NCHWc_int8.x86's convolution (uint8 data
// x int8 weight -> exact int32, padded taps read pad_value = the activation
// zero point) on Intel AMX tiles (tdpbusd), for targets whose Isa row has
// amx_int8 (amx-tile and amx-int8: Sapphire Rapids and later).
//
// The convolution as one tile GEMM per task (ir::amx_gemm, docs/amx.md):
// rows are output pixels, columns output channels, the reduction runs over
// (kh, kw, ic). Hence the layouts: one channel block holding every channel,
// so that a pixel's channels are one contiguous row (NCHW[C]c is NHWC for
// batch 1), and consecutive AMX convolutions agree on it without a layout
// transform between them.
//
// Workload params (conv2d_NCHWc_int8.x86's, in order): data=[N,C,H,W]
// (logical), kernel=[OC,C,KH,KW], strides=[sh,sw], pads=[top,left,bottom,
// right], dilation=[dh,dw], pad_value=[v] (0..255); dtype "uint8"; groups 1;
// KH * KW * Cb <= 65792 (the int32 sum's bound).
// With Cb = C rounded up to 4 (a tile row holds whole 4-byte groups),
// OCb = OC rounded up to 4 (the next AMX convolution's Cb), K = KH * KW * Cb,
// M = N * OH * OW:
//   data   uint8 [N, 1, H, W, Cb] (channels past C are read and meet zero
//          weights);
//   weight int8 [ceil(OCb / 16), K / 4, 16, 4]: amx_gemm's packing of the
//          [K, OCb] matrix B[(kh * KW + kw) * Cb + ic][oc] = w[oc][ic][kh][kw]
//          (zero for ic >= C or oc >= OC), pack_conv2d_int8_amx_weight;
//   output int32 [N, 1, OH, OW, OCb] (channels past OC are 0).
//
// Kernel (build_loops; the schedule language cannot produce tile
// instructions): a parallel loop over tasks of 16 * panels_per_task output
// pixels. A 1x1, stride-1, unpadded convolution is one amx_gemm per task on
// the data itself (A = the task's pixels, lda = Cb). Any other convolution
// first copies the task's patches into a per-task workspace A[rows][K]
// (im2col; a tap outside the image is pad_value in every channel), then runs
// the amx_gemm on it. The workspace is per task so that it stays in L2
// between the copy and the tiles.
//
// Knob: panels_per_task (1, 2, 4, ... up to M's panels, at most 32; the AMX
// dense templates' knob). Fallback: the largest of them within
// amx_panels_per_task(M) (at least 16 tasks once M has 16 panels) whose
// workspace (16 * panels * K bytes) stays within 256 KiB (codegen's limit
// for a stack allocation; an eighth of a Sapphire Rapids core's 2 MiB L2,
// leaving room for the weight panel the tiles stream beside it). Every
// config fits every ISA row: tiles are not vector registers.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& conv2d_nchwc_int8_amx_template();

// The workload of "conv2d_NCHWc_int8_amx.x86" for logical attributes (groups
// 1) and the padding value.
Workload conv2d_int8_amx_workload(const Conv2DAttrs& a, int64_t pad_value);

// Whether the template takes a convolution of these attributes: groups 1 and
// the reduction within the int32 bound.
bool conv2d_int8_amx_supports(const Conv2DAttrs& a);

// OIHW int8 weight [OC, C, KH, KW] -> the template's packed weight (above).
std::vector<int8_t> pack_conv2d_int8_amx_weight(const int8_t* w, int64_t oc, int64_t ic, int64_t kh,
                                                int64_t kw);

}  // namespace kiln::ops
