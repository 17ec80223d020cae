// conv2d templates.
//
// conv2d_nchw: plain NCHW data and OIHW weights, any stride, padding and
// dilation; a padding stage that the config inlines, computes at root, or
// computes per input-channel tile. (Not in the registry: a baseline.)
//
// conv2d_NCHWc.x86 (registered, see op_template.h): NeoCPU's layout.
//   Workload params, in order: data=[N,C,H,W] (logical), kernel=[OC,C,KH,KW],
//   strides=[sh,sw], pads=[top,left,bottom,right], dilation=[dh,dw]; float32, groups 1.
//   Inputs: data [N, C/ic_bn, H, W, ic_bn] (unpadded: padding is a stage of the
//   kernel, computed at root in parallel; none when all pads are 0) and weight
//   [OC/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]. Output [N, OC/oc_bn, OH, OW, oc_bn].
//   Schedule: the output's (n, oc block, oh) loops fused and parallel; ow split
//   by tile_ow; a register tile of ow_tile x oc_bn accumulators (ow unrolled,
//   oc_bn vectorized) computed at the ow-tile loop, reducing over ic blocks,
//   kh, kw (unrolled if unroll_kw) and ic_bn outside it. An epilogue output
//   reads that tile while it is hot.
//   Knobs: tile_ic (2 levels, exact factors <= 64; ic_bn = inner), tile_oc (2
//   levels, exact factors <= 64; oc_bn = inner), tile_ow (2 levels over OW,
//   SplitPolicy::RegisterTile: divisors, powers of two and 1..8, <= 32; a
//   partial last tile is peeled off, schedule/peel_tail_loops.h), unroll_kw
//   (0/1), oc_reg and oh_reg (channel blocks and rows in the register tile:
//   1, 2, 4; oc_reg also 3 and 5 where they divide an odd count of the
//   fallback's channel blocks, conv_oc_reg_values; oh_reg also the largest
//   divisor of OH from 3 to 7, conv_oh_reg_values),
//   kernel_outer (window loops outside the ic blocks), ic_chunk (0, 64, 128,
//   256 input channels: the reduction split into chunks outside the ow tiles,
//   whole rows' accumulators kept between chunks, so that a chunk's weights
//   stay in L1; added later, so stored configs without it mean 0), oc_group
//   (0, 2, 4, 8, 16, 32 output-channel tiles: the parallel loop runs each
//   group's rows before the next group, so that the group's weights stay in
//   L2 and the input streams from beyond it once per group; added later),
//   pixel_tiles (small 1x1 stride-1 planes: tiles over the fused pixels),
//   plane_rows (other planes of at most 14 rows: a chunked reduction runs
//   each chunk over all of the plane's rows) and rolled_reduction (0/1: an
//   unchunked reduction's outer loop kept rolled; all three added later).
//   Fallback rule, for the target's ISA row (L float32 lanes, R vector
//   registers; AVX-512 16 and 32, AVX2 8 and 16, NEON 4 and 32):
//     block(X) = 16 if 16 | X, else 8 if 8 | X, else the largest divisor of X <= 16
//     (C = 3 -> 3, OC = 1000 -> 8, OC = 24 -> 8, OC = 20 -> 10), the same on
//     every ISA (16 is a multiple of every L), so layouts agree across targets;
//     ic_bn = block(C), oc_bn = block(OC);
//     cap = min(OW, (3R/4) / ceil(oc_bn / L)) accumulators (24 zmm with AVX-512,
//     12 ymm with AVX2: 2 per column of 16 channels, so 6 columns);
//     ow_tile = the largest divisor d of OW with d <= cap if d >= 8 or d == OW,
//     with oc_reg = the most of 4, 2 channel blocks dividing OC / oc_bn whose
//     d columns stay within the 3R/4 accumulators (AVX-512, 7 columns: 2);
//     else, for a reduction C*KH*KW >= 128, conv_fallback_tile's 1 or 2 channel
//     blocks (oc_reg) and balanced columns, whichever loads least per FMA of
//     the tiles whose operands fit the registers (accumulators + min(weight
//     vectors, columns) + 1 < R, for windows larger than 1x1) (AVX2, 56
//     columns: 2 blocks x 3 for a 1x1 window, 1 x 6 for 3x3; a narrow row,
//     whose fitting tile leaves a third of it in a partial tile, takes a
//     tile that does not fit where it loads less per FMA over the whole row
//     and fallback_window_chunk chunks it, plane_rows where the plane's
//     channel tiles make 16 tasks: AVX2, 7 columns of a 3x3 window, 2 x 3
//     over 1 x 4), and for a
//     shorter one the largest power of two <= cap (a partial last tile); a
//     1-block tile of an odd block count takes 3 or 5 blocks (oc_reg) where
//     its accumulators are whole vectors of <= 256 bits, the wider tile loads
//     less per FMA, and 16 tasks remain (SqueezeNet's 1000-channel classifier:
//     AVX2 5 x 2, AVX-512 5 x 4);
//     ic_chunk = fallback_ic_chunk(C, KH * KW, oc_reg * oc_bn): 0 while the
//     tile's weights for the whole reduction fit half of L1, else the widest
//     of 256, 128, 64 channels whose weights do (AVX2 on a 32 KiB L1: a 1x1
//     conv of 512 channels and 1 block of 16 takes 256), and none where the
//     chunked row would spill (chunked_row_spills); a larger window's tile
//     that does not fit takes fallback_window_chunk's (half of L2) instead;
//     pixel_tiles (1x1 stride-1 convs on planes of at most 14 rows) = 1 when
//     ow_tile does not divide OW: a 7x7 plane in tiles of 3 runs 16 full
//     tiles and one of 1 pixel, not a 1-column tile in every row;
//     oc_group = fallback_oc_group(OC / (oc_reg * oc_bn), the tile's weights,
//     the input's bytes): 0 while the input fits half of L2, else the largest
//     group of tiles whose weights fit that half (Zen 3's 512 KiB L2, a 1x1
//     conv of 256 to 128 channels on 56x56: all 4 tiles of 32 channels);
//     unroll_kw = 1 if KW <= 3 else 0;
//     rolled_reduction = 1 where the ISA has fewer than 32 vector registers.
#pragma once

#include <array>

#include "ops/kernel.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/config_space.h"

namespace kiln::ops {

using Conv2DParams = reference::Conv2DParams;
using Conv2DAttrs = reference::Conv2DAttrs;

const OpTemplate& conv2d_nchwc_template();

// The workload of a conv template ("conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86" or
// "group_conv2d_NCHWc.x86")
// for logical attributes: data=[N,C,H,W], kernel=[OC,C/groups,KH,KW], strides, pads,
// dilation.
Workload conv2d_workload(const std::string& template_name, const Conv2DAttrs& a);
// Which convolution a conv template computes: it decides the weight shape a
// workload must have and the groups of its attributes.
enum class ConvKind {
  kDense,      // groups = 1: kernel [OC, C, KH, KW]
  kDepthwise,  // groups = C, multiplier 1: kernel [C, 1, KH, KW]
  kGrouped,    // groups G = C / kernel[1] > 1 dividing C and OC: kernel [OC, C/G, KH, KW]
};
// The attributes of such a workload, checked (positive sizes, a non-empty output,
// the kernel shape of `kind`); throws std::invalid_argument.
Conv2DAttrs conv2d_attrs(const Workload& w, ConvKind kind);

// Knobs: tile_oc, tile_oh, tile_ow (2 levels), tile_ic (2 levels), pad_mode
// (0 inline, 1 root, 2 at the input-channel tile), unroll_inner (0/1).
schedule::ConfigSpace conv2d_nchw_space(const Conv2DParams& p, schedule::SplitPolicy policy);
Kernel conv2d_nchw(const Conv2DParams& p, const schedule::Config& cfg);

// conv2d_NCHWc.x86 for symmetric padding, through the template (space, and the
// kernel with output = anchor).
schedule::ConfigSpace conv2d_nchwc_space(const Conv2DParams& p);
Kernel conv2d_nchwc(const Conv2DParams& p, const schedule::Config& cfg);
int64_t conv2d_nchwc_ic_block(const schedule::Config& cfg);
int64_t conv2d_nchwc_oc_block(const schedule::Config& cfg);

// Host-side layout changes for tests and benchmarks.
std::vector<float> nchw_to_nchwc(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb);
std::vector<float> nchwc_to_nchw(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb);
// OIHW -> [OC/ocb, IC/icb, KH, KW, icb, ocb]. A depthwise weight [C,1,KH,KW] with
// ic = icb = 1, ocb = cb gives the depthwise layout [C/cb, 1, KH, KW, 1, cb].
std::vector<float> oihw_to_blocked(const float* w, int64_t oc, int64_t ic, int64_t kh, int64_t kw,
                                   int64_t icb, int64_t ocb);

namespace detail {
// Zero padding of dims 2 and 3 (H, W in NCHW and NCHW[x]c); data itself when
// every pad is 0. Out-of-range coordinates are clamped so that the
// (unselected) load stays in bounds.
ir::Tensor pad_spatial(const ir::Tensor& data, int64_t top, int64_t left, int64_t bottom,
                       int64_t right, const std::string& name);
// The channel block rule of the conv fallbacks (see above).
int64_t fallback_channel_block(int64_t channels);
// The ow register-tile rule of the conv fallbacks (see above).
int64_t fallback_ow_tile(int64_t out_width, int64_t channel_block, const Isa& isa);
// conv2d_NCHWc's oc_reg values: 1, 2 and 4 channel blocks, and where the
// fallback's blocks of out_channels are an odd count, its divisors 3 and 5
// (1000 channels: 125 blocks of 8, which 2 and 4 leave at one block a tile).
std::vector<int64_t> conv_oc_reg_values(int64_t out_channels);
// conv2d_NCHWc's oh_reg values: 1, 2 and 4 rows, and the largest divisor of
// out_height from 3 to 7 beside them, if any (a 7-row plane: 7; 14, 28, 56
// rows: 7; 6 rows: 6). A 3x3 conv on a 7x7 plane otherwise has only tiles of
// one row (1, 2 and 4 come down to 1), whose weight vectors each serve at
// most 4-7 columns: 7 rows x 4 columns x 1 block of 16 reads a weight vector
// per 28 FMAs where 1 row x 4 columns x 4 blocks reads one per 4 (AVX-512,
// ResNet-50's 512-channel 3x3 on 7x7, against the best 1-row tile: one
// thread 12-25 % faster, two 6 %, weights from memory 5-10 %; inside the
// model no measurable change).
std::vector<int64_t> conv_oh_reg_values(int64_t out_height);

// The register tile of the conv templates (conv2d, group_conv2d) beyond the
// width: output-channel blocks and rows computed together. The knobs oc_reg
// and oh_reg, brought down to divisors of the extents (oc_blocks blocks of
// ocb channels that may share a tile, oh rows), then (rows first) until the
// tile holds at most 512 accumulator floats counted in 64-byte lines: a
// compile-time guard, the same on every ISA (no config unrolls into a kernel
// LLVM takes minutes over). What fits an ISA's registers is conv_tile_fits.
struct ConvRegisterTile {
  int64_t oc = 1, oh = 1;
};
// The fewest tiles of at most `cap` columns that cover out_width, and of those
// the narrowest (the partial last tile as wide as it can be), among tile_ow's
// candidates.
int64_t balanced_columns(int64_t out_width, int64_t cap);
// conv2d_NCHWc's fallback register tile: output-channel blocks (oc_reg) and
// columns (tile_ow) within the ISA's accumulator budget. The widest divisor
// of the width when it has 8 columns or more (or is the width), with as many
// blocks as the budget leaves room for, else the
// tile of 1 or 2 blocks, its columns balanced over the width, that loads the
// least per multiply. `window` (KH * KW) > 1: only tiles whose operands fit
// the vector registers with one to spare (operands_fit), except on a narrow
// row (the fitting tile's partial tile a third of it or more: 7 columns in
// 4 + 3) where a tile that fallback_window_chunk can chunk (in_channels)
// loads less per multiply over the whole row, partial tiles counted. An odd
// block count (conv_oc_reg_values) takes 3 or 5 blocks where the 1-block tile
// loads more per multiply and holds no more accumulators, and where its rows
// of tiles (out_height x tiles of blocks) still make 16 parallel tasks.
// On a target whose FMAs wait on loads (Isa::fma_waits_on_loads), a 1x1
// window's row of 8 columns or more takes 4 (else 2) blocks and 1 or 2 rows
// (oh_reg) beside the columns: the tile that fills the accumulator budget
// with the fewest loads per multiply over the row.
struct ConvFallbackTile {
  int64_t oc_blocks = 1, columns = 1, rows = 1;
};
ConvFallbackTile conv_fallback_tile(int64_t out_height, int64_t out_width, int64_t oc_blocks,
                                    int64_t ocb, int64_t window, int64_t in_channels,
                                    const Isa& isa);
// Whether a tile of r channel blocks x `columns` (`vectors` registers per
// block and column) leaves its operands a register each step beside its
// accumulators, with one to spare (AVX2's 2 x 3 of 16 channels: 12 + 3 + 1
// of 16 does not).
bool operands_fit(int64_t r, int64_t columns, int64_t vectors, const Isa& isa);
ConvRegisterTile conv_register_tile(int64_t oc_blocks, int64_t oh, int64_t ocb,
                                    const schedule::Config& cfg);
// conv2d_NCHWc's fallback reduction chunk, in input channels (0: none). A
// register tile of `tile_channels` output channels reads its weights for the
// whole reduction (in_channels x window x tile_channels floats) once per ow
// tile; beyond half of the target's L1 (Isa::l1d_bytes; unknown: no chunks)
// they stream from L2 for every tile. The chunk is the widest of ic_chunk's
// values (256, 128, 64) below in_channels whose weights fit that half; none
// fits a 3x3 window of 16 channels in 32 KiB, and those keep one chunk.
int64_t fallback_ic_chunk(int64_t in_channels, int64_t window, int64_t tile_channels,
                          const Isa& isa);
// The reduction chunk, in input channels (0: none), of a larger window's
// tile whose operands do not fit the registers (operands_fit): the widest of
// ic_chunk's values below in_channels whose weights (chunk x window x
// tile_channels floats) fit half of the target's L2 (Isa::l2_bytes;
// unknown: none). Zen 3's 512 KiB and a 3x3 window of 32 channels: 128.
int64_t fallback_window_chunk(int64_t in_channels, int64_t window, int64_t tile_channels,
                              const Isa& isa);
// Whether chunking a row of `row_vectors` accumulators (channel blocks x
// output columns x vectors per block) spills, with `step_operands` more
// registers per reduction step (the tile's weight vectors, a broadcast): a
// row buffer of at most R vectors is kept in registers across the chunks by
// LLVM (promoted from memory), and then the step's operands must fit beside
// it. AVX2, 1 block x 4 columns of a 7-wide row: 14 + 3 of 16 ymm.
bool chunked_row_spills(int64_t row_vectors, int64_t step_operands, const Isa& isa);
// conv2d_NCHWc's oc_group values: output-channel tiles per group (0: none).
inline constexpr std::array<int64_t, 6> kOcGroupValues = {0, 2, 4, 8, 16, 32};
// The output-channel tiles of one group of the parallel loop (the config's
// oc_group, brought down to a divisor of oc_tiles), or 0 for none: no such
// knob, 0, or a group of one tile. A group's rows run before the next group's.
int64_t oc_tile_group(const schedule::Config& cfg, int64_t oc_tiles);
// conv2d_NCHWc's fallback oc_group. Without groups each register tile of
// output channels sweeps every row of the input; an input beyond half of the
// target's L2 (Isa::l2_bytes; unknown: no groups) then streams from L3 once
// per tile (ResNet-50's 56x56 layers: 8 times). A group of tiles whose
// weights (tile_weight_bytes each) fit that half reads it once per group: the
// largest such group of oc_group's values; 0 when the input fits, or no
// group of two tiles' weights does.
int64_t fallback_oc_group(int64_t oc_tiles, int64_t tile_weight_bytes, int64_t input_bytes,
                          const Isa& isa);
// Whether the tile (oc x oh x ow_tile columns of ocb channels) fits the ISA's
// vector registers, counted in the ISA's vectors.
bool conv_tile_fits(const ConvRegisterTile& rt, int64_t ow_tile, int64_t ocb, const Isa& isa);
// The input-channel blocks of one reduction chunk (the config's ic_chunk
// channels, brought down to a divisor of ic_blocks), or 0 for none: no such
// knob, 0, or a chunk that would hold every block.
int64_t ic_chunk_blocks(const schedule::Config& cfg, int64_t ic_blocks);
// Whether the config's register tiles run over the plane's pixels (the knob
// pixel_tiles, offered for small 1x1 stride-1 convs): the tile stage covers
// every row, fuses rows and columns and splits the pixels by tile_ow.
bool pixel_tiles(const schedule::Config& cfg);
// Whether a conv offers pixel tiles: 1x1, stride 1, a plane of at most
// kMaxPixelTilePlane rows.
bool pixel_tile_plane(const Conv2DAttrs& a);
// Whether conv2d_NCHWc offers plane_rows for the workload (a plane of at most
// 14 rows that pixel_tile_plane does not cover: larger windows, strides), and
// whether the config takes it: a chunked reduction runs each chunk over all
// of the plane's rows (rolled), the plane's accumulators in the buffer.
bool plane_rows_plane(const Conv2DAttrs& a);
bool plane_rows(const schedule::Config& cfg);
// Whether an unchunked reduction keeps its outer loop rolled (the knob
// rolled_reduction): the input-channel blocks, or where there is one block
// the channels within it. Unrolled, a short reduction (2 or 3 blocks of a 1x1
// conv) puts all of the tile's weights in the column loop's preheader, and
// with 16 registers most of them in stack slots (AVX2, MobileNetV2's 24 ->
// 144 on 56 x 56, 1 block x 6 columns: 48 weight vectors spilled, every FMA
// reading one back).
bool rolled_reduction(const schedule::Config& cfg);
// The fallback's rolled_reduction: on ISAs of fewer than 32 vector registers.
bool fallback_rolled_reduction(const Isa& isa);
// Whether each parallel task pads the input rows it reads itself (the knob
// pad_rows, "added later"), instead of one padding copy of the whole input
// before the convolution. Worth it where a task reads only a few of the input's
// channel blocks (a grouped conv's group): the task's padded rows stay in L1,
// where the whole padded copy is written to and read back from beyond L2.
bool pad_rows(const schedule::Config& cfg);
// The schedule of the blocked conv templates (conv2d, group_conv2d): the
// padding stage by rows in parallel (or inside each task: pad_rows); the
// output by batch x oc blocks x rows in parallel, its register tile
// (conv_register_tile over `oc_blocks_per_tile` oc blocks, 0 = all of them;
// group_conv2d passes the blocks of one group) x the ow tile, reduced over the input-channel blocks
// and the window in the config's order, unrolled and vectorized over the
// channel block. With reduction chunks (ic_chunk_blocks), the tile stage
// covers the register tile's rows whole and loops chunk, ow tile, then the
// chunk's reduction.
void schedule_conv_nchwc(schedule::Schedule& sch, const TemplateInstance& inst,
                         const ir::Tensor& output, const schedule::Config& cfg,
                         const std::string& name, int64_t oc_blocks_per_tile);
// The per-lane window templates' knobs beyond their tiles, read by
// schedule_lane_window_conv (both "added later": a record without them
// means 0, the schedule before them).
//  kw_inner (windows wider than 1): the window's columns innermost, below the
//    register tile's columns, so that a loaded (for a group, also shuffled)
//    input column serves the KW taps that read it while it is still in a
//    register (with kw outermost, LLVM kept every column's value live across
//    the whole kw loop and spilled them).
//  pad_copy (padded workloads): the padded input written once at root, rows
//    in parallel, and read without a bounds select per tap.
void define_lane_window_knobs(schedule::ConfigSpace& space, const Conv2DAttrs& a);
// Their fallback (measurements in conv2d.cc). With 32 vector registers or
// more: kw_inner where the taps share columns (stride and dilation 1), no
// copy. With fewer (AVX2), at stride 1 and a padded plane at most 2.5x the
// input's: the copy where each input element feeds kPadCopyMinReuse
// multiplies or more per lane (taps x `reduction_per_lane`: the copy's pass
// is paid back), then with kw_inner, or where `ow_tile` leaves a partial
// column tile (whose inlined selects cost most); else neither.
inline constexpr int64_t kPadCopyMinReuse = 32;
void lane_window_fallback_knobs(KnobValues& knobs, const Conv2DAttrs& a, int64_t reduction_per_lane,
                                int64_t ow_tile, const Isa& isa);

// The schedule of the per-lane window templates (depthwise_conv2d_NCHWc.x86,
// group_conv2d_lanes_NCHWc.x86): the padding stage inlined (each tap reads a
// clamped address and selects 0 outside the image, instead of a padded copy
// written and read back first: a memory-bound layer's traffic doubled,
// MobileNetV2's 96-channel 112x112 stride-2 depthwise, depthwise_conv2d_int8.h)
// unless pad_copy; the output's (n, block, oh) loops fused and parallel; ow
// split by tile_ow; a register tile of ow_tile x block accumulators at the
// ow-tile loop, reducing over the anchor's reduce axes in order (kh, kw, then
// any others, which are unrolled: a group's channels), kw innermost, below
// the columns, with kw_inner; kw unrolled if unroll_kw, the columns
// unrolled, the block vectorized.
void schedule_lane_window_conv(schedule::Schedule& sch, const TemplateInstance& inst,
                               const ir::Tensor& output, const schedule::Config& cfg,
                               const std::string& template_name);
}  // namespace detail

}  // namespace kiln::ops
