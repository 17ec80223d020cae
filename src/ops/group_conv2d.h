// group_conv2d_NCHWc.x86 (registered, see op_template.h): a grouped
// convolution (1 < groups, not depthwise: ResNeXt's 32 groups of 4..32
// channels, RegNet's groups) in NCHW[x]c.
//
// Workload params, in order (those of conv2d_NCHWc.x86): data=[N,C,H,W]
// (logical), kernel=[OC,C/G,KH,KW] (ONNX's grouped weight; G = C / kernel[1],
// which must be > 1 and divide OC), strides=[sh,sw], pads=[top,left,bottom,
// right], dilation=[dh,dw]; float32. ICg = C/G and OCg = OC/G are the channels
// per group.
// Inputs: data [N, C/ic_bn, H, W, ic_bn] with ic_bn | ICg, so that no block
// straddles two groups (unpadded: padding is a stage of the kernel, computed at
// root in parallel, or inside each parallel task for the rows it reads with
// pad_rows; none when all pads are 0), and weight
// [OC/oc_bn, ICg/ic_bn, KH, KW, ic_bn, oc_bn] with oc_bn | OCg: conv2d_NCHWc's
// weight layout with ICg in place of C, which is the same memory as
// [G, OCg/oc_bn, ICg/ic_bn, KH, KW, ic_bn, oc_bn] (output block ob belongs to
// group ob / (OCg/oc_bn)); group_conv2d_pack_weight() packs it from OIHW.
// Output [N, OC/oc_bn, OH, OW, oc_bn]: output block ob of group g reads the
// data blocks g*ICg/ic_bn .. (g+1)*ICg/ic_bn - 1.
// Schedule (conv2d_NCHWc.x86's): the output's (n, oc block (groups x blocks per
// group), oh) loops fused and parallel; ow split by tile_ow; a register tile of
// oc_reg x oh_reg x ow_tile x oc_bn accumulators (unrolled, oc_bn vectorized)
// computed at the ow-tile loop, reducing over the group's ic blocks, kh, kw
// (unrolled if unroll_kw) and ic_bn; an epilogue output reads the hot tile.
// Knobs: tile_ic (2 levels over ICg, exact factors <= 64; ic_bn = inner),
// tile_oc (2 levels over OCg, exact factors <= 64; oc_bn = inner), tile_ow (2
// levels over OW, divisors, powers of two and any width up to 8, <= 32, a
// partial last tile peeled), unroll_kw (0/1), oc_reg (1/2/4 oc blocks of one
// group, brought down to a divisor of OCg/oc_bn), oh_reg (1/2/4 rows),
// kernel_outer (0/1), rolled_reduction (0/1, added later: conv2d_NCHWc's),
// pad_rows (0/1, added later, padded workloads only: detail::pad_rows; a tile
// of some but not all of a group's blocks with it does not fit).
// Fallback rule, for the target's ISA row: ic_bn = block(ICg), oc_bn =
// block(OCg) with conv2d_NCHWc's block rule (16 if 16 | X, else 8 if 8 | X,
// else the largest divisor of X <= 16: the same on every ISA); ow_tile =
// conv2d_NCHWc's ow rule (detail::fallback_ow_tile: accumulators within 3/4
// of the ISA's vector registers, ceil(oc_bn / lanes) vectors per column) and
// oc_reg = 1, except where FMAs wait on loads (Isa::fma_waits_on_loads): there
// oc_reg = the group's OCg/oc_bn blocks when 2 or 4, over the columns the
// accumulator budget leaves, balanced over the row (a row under 8 columns
// whole where its accumulators and one weight vector a block fit the
// registers); pad_rows = 1 where the tile spans its group's blocks;
// unroll_kw = 1 if KW <= 3; oh_reg = 1; kernel_outer = 1 where a
// group has two input blocks or more and the ISA 16 vector registers, else 0;
// rolled_reduction = conv2d_NCHWc's (ISAs of fewer than 32 vector registers).
#pragma once

#include <vector>

#include "ops/op_template.h"
#include "ops/reference.h"

namespace kiln::ops {

const OpTemplate& group_conv2d_nchwc_template();

// OIHW weight [OC, ICg, KH, KW] of a grouped conv -> the template's
// [OC/ocb, ICg/icb, KH, KW, icb, ocb] (= [G, OCg/ocb, ICg/icb, KH, KW, icb, ocb]);
// throws std::invalid_argument unless ocb divides OC / groups and icb divides ICg.
std::vector<float> group_conv2d_pack_weight(const float* w, int64_t groups, int64_t oc, int64_t icg,
                                            int64_t kh, int64_t kw, int64_t icb, int64_t ocb);

}  // namespace kiln::ops
