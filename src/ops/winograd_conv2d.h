// conv2d_winograd_NCHWc.x86 (registered, see op_template.h): a 3x3 stride-1
// convolution by Winograd's minimal filtering F(m x m, 3 x 3)
// (Lavin & Gray 2015), the second implementation of such convolutions beside
// conv2d_NCHWc.x86. The output is cut into m x m tiles; each tile reads an
// alpha x alpha input tile (alpha = m + 2) and costs alpha^2 multiplies per
// input/output channel pair instead of 9 m^2 (F(4x4): 36 against 144, F(2x2):
// 16 against 36), at the price of the input and output transforms and of a
// weight alpha^2 / 9 times larger. Which one wins depends on the shape (many
// tiles and channels: Winograd; 7x7 maps with 512 channels: often direct), so
// both are tuning tasks of a 3x3 stride-1 Conv and the build takes the faster
// measured one (graph/passes/select_templates.h).
//
// Workload params: those of conv2d_NCHWc.x86 (data=[N,C,H,W], kernel=[OC,C,3,3],
// strides=[1,1], pads=[top,left,bottom,right], dilation=[dh,dw]); float32.
//
// Dilation (FCN's and DeepLab's atrous convolutions) costs nothing extra: the
// output rows oh with the same oh % dh (a "phase") read only the input rows
// oh + k dh of that phase, so a dilated convolution is dh x dw ordinary 3x3
// convolutions on subsampled planes. Each phase is tiled like a map of its
// own (ceil(OH / dh) x ceil(OW / dw), the largest phase's size), the tiles of
// all phases form the GEMMs' rows, and the input transform reads its tile's
// window with stride dh x dw: no copy per phase, the same epilogue.
// flops() is the direct convolution's count, so that GFLOP/s of the two
// implementations of one convolution compare (an "effective" rate).
//
// Inputs (config-dependent: m, ic_bn, oc_bn):
//   data [N, C/ic_bn, H, W, ic_bn] (NCHW[x]c, unpadded), and
//   U [alpha, alpha, OC/oc_bn, C/ic_bn, ic_bn, oc_bn]: the weight transformed
//   at build time, U = G g G^T per (oc, c) (winograd_pack_weight()).
// Output [N, OC/oc_bn, OH, OW, oc_bn]: conv2d_NCHWc's.
//
// Stages, each at root, outer loops parallel:
//   pad  zero padding, extended at the bottom and right so that every tile's
//        alpha x alpha window is in bounds (OH, OW need not divide by m);
//   V    [alpha, alpha, C/ic_bn, P_pad, ic_bn] = B^T d B per tile (P tiles over
//        N x dh x dw x ceil(OH/dh/m) x ceil(OW/dw/m), padded to a multiple of p_tile; the
//        padding rows repeat the last tile), the alpha x alpha tile unrolled
//        and the channel block vectorized: the transform's constants fold into
//        adds and a few multiplies;
//   M    [alpha, alpha, OC/oc_bn, P_pad, oc_bn] = sum over c of V * U: alpha^2
//        independent GEMMs [P x C] x [C x OC], each on the register micro-kernel
//        of the dense templates (p_tile rows x oc_bn columns accumulated in
//        registers, V broadcast, U loaded as vectors);
//   Y    the anchor, A^T M A per tile, inlined into the epilogue output whose
//        loops walk (n, oc block, tile row) in parallel, then the tile's m x m
//        outputs unrolled, oc_bn vectorized; a partial last tile is guarded.
// Knobs: tile_ic, tile_oc (2 levels, exact factors <= 64; the channel blocks,
// as in conv2d_NCHWc.x86, so layouts agree with neighbours), wino_m (2 or 4),
// p_tile (register-tile rows of the GEMM), unroll_ci (0/1: the GEMM's inner
// channel loop unrolled), transform_passes (1: each tile's V and Y one
// unrolled expression; 2: V from a row pass and, without dilation, Y from a
// column pass, each per tile into a local buffer, so that no pass holds a
// whole tile in registers; records stored before the knob read as 1).
// Fallback rule, for the target's ISA row (L lanes, R registers): ic_bn,
// oc_bn = conv2d_NCHWc's block rule (16 where it divides); wino_m = 4 if a
// channel block is at most 2 vectors (so not on 4-lane NEON with 16 channels:
// F(4x4)'s unrolled tiles would pass the compile budget) and either both sides
// of a phase (the output, without dilation) are >= 8 or, dilated, F(4x4)'s
// GEMM rows padded to p_tile cost no more than F(2x2)'s (36 against 16 products
// a row; FCN's 16 phases of 7 x 7), else 2; p_tile = the largest knob value <= min(16,
// (3R/4) / ceil(oc_bn / L)) (oc_bn 16: AVX-512 16, AVX2 6); unroll_ci = 1;
// transform_passes = 2 where alpha^2 ceil(block / L) > 2R (F(4x4) on AVX2).
#pragma once

#include <vector>

#include "ops/conv2d.h"
#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& conv2d_winograd_nchwc_template();

// Whether conv2d_winograd_NCHWc.x86 accepts a convolution with these
// attributes: 3x3 kernel, stride 1, groups 1, any dilation.
bool winograd_applies(const Conv2DAttrs& a);

// Whether Winograd can beat the direct convolution's 9 products per output
// channel pair: always without dilation; dilated, where the phases are large
// enough for whole tiles, F(2x2) or F(4x4) at most 6 products per output
// counting the tiles' overhang (FCN's dilations 2 and 4 on 28 x 28: 2.9). A
// dilation near the map's size (DeepLab's ASPP: 12 to 36 on 28 x 28) leaves
// phases of 1-3 rows, or none: 7-26 products per output.
bool winograd_pays(const Conv2DAttrs& a);

// Whether an untuned build takes Winograd's fallback config over the direct
// template's: unless its GEMM, the tiles padded to the fallback's register
// tile (p_tile rows), does more products than the direct convolution. On
// small maps the padding eats the saving: Inception-v3's 448 -> 384 3x3 on
// 5 x 5 has 9 F(2x2) tiles padded to 16 rows with AVX-512, 256 products per
// channel pair against the direct 225, and ran at 215 against the direct
// fallback's 314 GFLOP/s (Intel Xeon, 2 threads). ResNet's 7 x 7 maps (16
// tiles, 256 against 441) stay Winograd, and so do 8 x 8 maps (4 F(4x4)
// tiles padded to 16 rows: 576 against 576; not measured either way).
bool winograd_fallback_pays(const Workload& w, const Isa& isa);

// The OIHW weight [OC, C, 3, 3] transformed and laid out as the template's
// second input for `cfg` (see above); accumulated in double.
std::vector<float> winograd_pack_weight(const Workload& w, const schedule::Config& cfg,
                                        const float* oihw);

// The tile size m of a config (2 or 4).
int64_t winograd_tile(const schedule::Config& cfg);

}  // namespace kiln::ops
