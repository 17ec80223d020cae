#include "ops/conv2d.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace detail {

Tensor pad_spatial(const Tensor& data, int64_t top, int64_t left, int64_t bottom, int64_t right,
                   const std::string& name) {
  if (top == 0 && left == 0 && bottom == 0 && right == 0) return data;
  std::vector<Expr> shape = data->shape;
  int64_t H = *as_const_int(shape[2]), W = *as_const_int(shape[3]);
  shape[2] = make_int(H + top + bottom);
  shape[3] = make_int(W + left + right);
  return compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr h = i[2] - top, w = i[3] - left;
        Expr inside = logical_and(logical_and(h >= 0, h < H), logical_and(w >= 0, w < W));
        std::vector<Expr> idx(i.begin(), i.end());
        idx[2] = max(min(h, make_int(H - 1)), make_int(0));
        idx[3] = max(min(w, make_int(W - 1)), make_int(0));
        return select(inside, read(data, idx), make_float(0.0));
      },
      name);
}

int64_t fallback_channel_block(int64_t channels) {
  if (channels % 16 == 0) return 16;
  if (channels % 8 == 0) return 8;
  return largest_divisor_at_most(channels, 16);
}

int64_t fallback_ow_tile(int64_t out_width, int64_t channel_block, const Isa& isa) {
  int64_t vectors_per_column = (channel_block + isa.lanes() - 1) / isa.lanes();
  int64_t cap = std::max<int64_t>(
      1, std::min<int64_t>(out_width, isa.accumulator_budget() / vectors_per_column));
  int64_t d = largest_divisor_at_most(out_width, cap);
  if (d >= 8 || d == out_width) return d;
  int64_t p = 1;
  while (p * 2 <= cap) p *= 2;
  return std::max(p, d);
}

// The fewest tiles of at most `cap` columns that cover the width, and of
// those the narrowest width (the partial last tile as wide as it can be),
// among tile_ow's candidates (SplitPolicy::RegisterTile: up to 8, powers of
// two, divisors).
int64_t balanced_columns(int64_t out_width, int64_t cap) {
  int64_t best = 1, best_tiles = out_width;
  for (int64_t c = std::min(cap, out_width); c >= 1; --c) {
    bool candidate = c <= 8 || out_width % c == 0 || (c & (c - 1)) == 0;
    int64_t tiles = (out_width + c - 1) / c;
    if (candidate && tiles <= best_tiles) best = c, best_tiles = tiles;
  }
  return best;
}

// Whether a tile of r channel blocks x `columns` (`vectors` registers per
// block and column) leaves its operands a register each step: the
// accumulators, whichever of the weight vectors or the broadcast inputs stay
// live across the step (the other streams through one register), and one to
// spare. AVX2's 2 blocks x 3 columns of 16 channels (12 + 3 + 1 = 16 of 16)
// spill: in every step of a 3x3 window, where 1 block x 6 columns ran 13-18 %
// faster (ResNet's 3x3 convs, stride 1 and 2), and in a 1x1 window's unrolled
// channel loop too (a store and two reloads per 12 FMAs; conv_fallback_tile).
bool operands_fit(int64_t r, int64_t columns, int64_t vectors, const Isa& isa) {
  return r * vectors * columns + std::min(r * vectors, columns) + 1 < isa.vector_registers;
}

// The most channel blocks of oc_reg's values (4, 2, 1) that divide oc_blocks
// and keep a tile of `columns` within the accumulator budget and the registers.
int64_t blocks_within_budget(int64_t oc_blocks, int64_t columns, int64_t vectors, int64_t window,
                             const Isa& isa) {
  // A 1x1 window keeps a spilling tile here: its one alternative, fewer
  // blocks over the same columns, has fewer accumulators.
  for (int64_t r : {4, 2})
    if (oc_blocks % r == 0 && r * vectors * columns <= isa.accumulator_budget() &&
        (window == 1 || operands_fit(r, columns, vectors, isa)))
      return r;
  return 1;
}

std::vector<int64_t> conv_oc_reg_values(int64_t out_channels) {
  std::vector<int64_t> values{1, 2, 4};
  const int64_t blocks = out_channels / fallback_channel_block(out_channels);
  if (blocks % 2 == 1)
    for (int64_t r : {3, 5})
      if (blocks % r == 0) values.push_back(r);
  return values;
}

namespace {

double loads_per_fma(int64_t r, int64_t columns, int64_t vectors) {
  return double(r * vectors + columns) / double(r * vectors * columns);
}

// An odd block count leaves oc_reg's 2 and 4 at one block, whose column
// broadcasts one input per FMA: SqueezeNet's 512 -> 1000 classifier (125
// blocks of 8) ran 1 block x 7 columns, 8 loads a 7 FMAs, on AVX2. Its odd
// divisors (conv_oc_reg_values) share each broadcast over 3 or 5 blocks.
// Not where the wider tiles leave the threads too few rows of tiles to share
// (an SE block's 1x1 plane of 15 blocks: 5 tasks of 3). Only where the
// accumulators are whole vectors of 256 bits or less (AVX2, or blocks of 8
// channels under AVX-512): Zen 4 runs a zmm FMA in two halves, so a 1-block
// tile of zmm waits on its FMAs, not its loads (512 -> 144 on 14x14, 9
// blocks of 16: 3 blocks ran 0.90-0.98x its speed, against 1.03-1.05x as
// AVX2 code), and 3 blocks of 7 channels (21) ran 0.94x.
ConvFallbackTile with_odd_blocks(ConvFallbackTile tile, int64_t out_height, int64_t out_width,
                                 int64_t oc_blocks, int64_t ocb, const Isa& isa) {
  constexpr int64_t kMinTasks = 16;
  if (tile.oc_blocks != 1 || oc_blocks % 2 == 0) return tile;
  if (ocb % 8 != 0 || (isa.lanes() > 8 && ocb != 8)) return tile;
  const int64_t vectors = (ocb + isa.lanes() - 1) / isa.lanes();
  const int64_t budget = isa.accumulator_budget();
  double best_loads = loads_per_fma(1, tile.columns, vectors);
  const int64_t accumulators = vectors * tile.columns;
  for (int64_t r : {3, 5}) {
    if (oc_blocks % r || oc_blocks / r * out_height < kMinTasks) continue;
    const int64_t cap = budget / (r * vectors);
    if (cap < 2) continue;
    const int64_t columns = balanced_columns(out_width, cap);
    const double loads = loads_per_fma(r, columns, vectors);
    if (operands_fit(r, columns, vectors, isa) && r * vectors * columns >= accumulators &&
        loads < best_loads - 1e-9)
      tile = {r, columns}, best_loads = loads;
  }
  return tile;
}

// Loads per FMA over a whole row of out_width: its full tiles of r blocks x
// `columns` and the partial last one, which loads the same weight vectors
// for fewer columns.
double row_loads_per_fma(int64_t r, int64_t columns, int64_t vectors, int64_t out_width) {
  const int64_t full = out_width / columns, rest = out_width % columns;
  double loads = double(full * (r * vectors + columns));
  if (rest > 0) loads += double(r * vectors + rest);
  return loads / double(r * vectors * out_width);
}

// A row is narrow for a tile whose partial last tile holds a third of it or
// more (7 columns in 4 + 3; not 14 in 5 + 5 + 4).
bool narrow_row(int64_t out_width, int64_t columns) {
  constexpr int64_t kNarrowShare = 3;
  return (out_width % columns) * kNarrowShare >= out_width;
}

// Isa::fma_waits_on_loads: of 4 or 2 blocks (dividing oc_blocks) x 1 or 2
// rows (dividing out_height) x the columns the budget leaves, balanced over
// the width, the tile with the fewest loads per FMA over the row, partial
// tile counted (fewer rows on a tie). Each step loads the blocks' weight
// vectors and broadcasts one input per column and row. 14 columns: 4 x 3 x
// 2 rows (0.43 loads per FMA against 1 x 14's 1.07): 1024 -> 1024 on 14 x
// 14 ran 228-263 GFLOP/s against 149-190, 512 -> 512 on 28 x 28 (4 x 6)
// 224-243 against 149-158, 256 -> 256 on 56 x 56 (4 x 3 x 2) 221-250
// against 163-230 (2 threads of a Sapphire Rapids; ResNeXt-101's).
std::optional<ConvFallbackTile> load_sharing_tile(int64_t out_height, int64_t out_width,
                                                  int64_t oc_blocks, int64_t vectors,
                                                  const Isa& isa) {
  std::optional<ConvFallbackTile> best;
  double best_loads = 0;
  for (int64_t r : {4, 2}) {
    if (oc_blocks % r) continue;
    for (int64_t rows : {1, 2}) {
      if (out_height % rows) continue;
      const int64_t cap = isa.accumulator_budget() / (r * vectors * rows);
      if (cap < 2) continue;
      const int64_t columns = balanced_columns(out_width, cap);
      const double loads = row_loads_per_fma(r, columns * rows, vectors, out_width * rows);
      if (!best || loads < best_loads - 1e-9)
        best = ConvFallbackTile{r, columns, rows}, best_loads = loads;
    }
  }
  return best;
}

// The tile of 1, 2 or 4 blocks (oc_reg's first values) for rows of out_width.
// `chunked_blocks`: the block counts whose tile a reduction chunk would serve
// (fallback_window_chunk), for which a narrow row of a larger window may take
// a tile whose operands do not fit.
ConvFallbackTile row_fallback_tile(int64_t out_height, int64_t out_width, int64_t oc_blocks,
                                   int64_t vectors, int64_t window,
                                   const std::vector<int64_t>& chunked_blocks, const Isa& isa) {
  const int64_t budget = isa.accumulator_budget();
  int64_t d = largest_divisor_at_most(out_width, std::max<int64_t>(1, budget / vectors));
  // Where FMAs wait on loads, a 1x1 window's wide row shares each broadcast
  // over blocks and rows (load_sharing_tile).
  if (d >= 8 && window == 1 && isa.fma_waits_on_loads)
    if (std::optional<ConvFallbackTile> t =
            load_sharing_tile(out_height, out_width, oc_blocks, vectors, isa))
      return *t;
  // A narrow plane's whole row leaves most of the budget unused (7 columns
  // of 24 zmm): more channel blocks share each broadcast input (ResNet-50's
  // 7x7 1x1 convs and 14x14 stride-2 3x3, AVX-512: 2 blocks ran 15-18 %
  // faster than 1; 4 x 7 spills).
  if (d >= 8 || d == out_width)
    return {blocks_within_budget(oc_blocks, d, vectors, window, isa), d};
  // No divisor fills the budget (56 columns, 6 of 2 ymm each): any width
  // does, the partial last tile peeled off. Each step loads the tile's weight
  // vectors and broadcasts one input per column; of the tiles whose operands
  // fit the registers, the one that does the most multiplies per load wins
  // (AVX2, 1x1 window: 2 channel blocks x 3 columns, 7 loads a 12 FMAs, over
  // 1 x 4 columns; ResNeXt-50's 1x1 convs 14 % faster).
  struct Candidate {
    ConvFallbackTile tile;
    int64_t accumulators;
    bool fits;
    double loads;
  };
  std::vector<Candidate> candidates, narrow;
  for (int64_t r : {1, 2}) {
    if (oc_blocks % r) continue;
    int64_t cap = budget / (r * vectors);
    if (cap < 3) continue;
    int64_t columns = balanced_columns(out_width, cap);
    bool fits = operands_fit(r, columns, vectors, isa);
    if (!fits && window > 1) {
      if (std::count(chunked_blocks.begin(), chunked_blocks.end(), r))
        narrow.push_back({{r, columns},
                          r * vectors * columns,
                          fits,
                          row_loads_per_fma(r, columns, vectors, out_width)});
      continue;
    }
    candidates.push_back(
        {{r, columns}, r * vectors * columns, fits, loads_per_fma(r, columns, vectors)});
  }
  // A 1x1 window may spill (2 x 3 on AVX2, 12 + 3 + 1 registers) where no
  // tile that fits has as many accumulators: 7 output columns, where 1 block
  // takes 4 (8 accumulators) and ran 0.46-0.89x the spilling 2 x 3. Where one
  // has, it wins: 1 x 6 over 2 x 3 on 28 and 56 columns ran 1.02-1.07x faster
  // (ResNeXt-50's 1x1 convs, 1 thread, Zen 4 running AVX2 code).
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits)
      return a.accumulators != b.accumulators ? a.accumulators > b.accumulators : a.fits;
    return a.loads < b.loads - 1e-9;
  };
  const Candidate* chosen = nullptr;
  for (const Candidate& c : candidates)
    if (!chosen || better(c, *chosen)) chosen = &c;
  // A larger window's narrow row: the fitting tile's partial tile, a third
  // of the work or more, ran its unrolled window and channel loops with
  // spills (1 x 4 on 7 columns: 122 stores in its 3-column tile), and 2
  // blocks x 3 columns of a 7-wide row, reduction chunked, ran 2-10 %
  // faster than 1 x 4 (ResNet's and ConvNeXt's stride-2 convs onto 7 x 7,
  // one thread of a Zen 4 running AVX2 code). On 14 columns (1 x 5 leaves
  // 4) it ran 0.96-1.02x, on 28 (1 x 6 leaves 4) 0.95x. Row-level loads per
  // FMA decide, the partial tile counted.
  if (chosen && narrow_row(out_width, chosen->tile.columns)) {
    double chosen_loads =
        row_loads_per_fma(chosen->tile.oc_blocks, chosen->tile.columns, vectors, out_width);
    for (const Candidate& c : narrow)
      if (c.loads < chosen_loads - 1e-9) chosen = &c, chosen_loads = c.loads;
  }
  return chosen ? chosen->tile : ConvFallbackTile{1, d};
}

}  // namespace

ConvFallbackTile conv_fallback_tile(int64_t out_height, int64_t out_width, int64_t oc_blocks,
                                    int64_t ocb, int64_t window, int64_t in_channels,
                                    const Isa& isa) {
  const int64_t vectors = (ocb + isa.lanes() - 1) / isa.lanes();
  std::vector<int64_t> chunked_blocks;
  for (int64_t r : {1, 2})
    if (window > 1 && fallback_window_chunk(in_channels, window, r * ocb, isa) > 0)
      chunked_blocks.push_back(r);
  return with_odd_blocks(
      row_fallback_tile(out_height, out_width, oc_blocks, vectors, window, chunked_blocks, isa),
      out_height, out_width, oc_blocks, ocb, isa);
}

int64_t fallback_ic_chunk(int64_t in_channels, int64_t window, int64_t tile_channels,
                          const Isa& isa) {
  if (isa.l1d_bytes <= 0) return 0;
  const int64_t budget = isa.l1d_bytes / 2;  // the other half: the tile's inputs, the output
  const int64_t bytes_per_channel = window * tile_channels * int64_t(sizeof(float));
  if (in_channels * bytes_per_channel <= budget) return 0;
  for (int64_t channels : {256, 128, 64})  // ic_chunk's values, widest first
    if (channels < in_channels && channels * bytes_per_channel <= budget) return channels;
  return 0;
}

int64_t fallback_window_chunk(int64_t in_channels, int64_t window, int64_t tile_channels,
                              const Isa& isa) {
  if (isa.l2_bytes <= 0) return 0;
  const int64_t budget = isa.l2_bytes / 2;  // the other half: the input rows streaming by
  const int64_t bytes_per_channel = window * tile_channels * int64_t(sizeof(float));
  for (int64_t channels : {256, 128, 64})  // ic_chunk's values, widest first
    if (channels < in_channels && channels * bytes_per_channel <= budget) return channels;
  return 0;
}

bool chunked_row_spills(int64_t row_vectors, int64_t step_operands, const Isa& isa) {
  return row_vectors <= isa.vector_registers && row_vectors + step_operands > isa.vector_registers;
}

std::vector<int64_t> conv_oh_reg_values(int64_t out_height) {
  std::vector<int64_t> values = {1, 2, 4};
  for (int64_t rows = 7; rows >= 3; --rows)
    if (rows != 4 && out_height % rows == 0) {
      values.push_back(rows);
      break;
    }
  return values;
}

ConvRegisterTile conv_register_tile(int64_t oc_blocks, int64_t oh, int64_t ocb, const Config& cfg) {
  constexpr int64_t kMaxTileFloats = 512, kFloatsPerLine = 16;
  int64_t ow_tile = cfg.split("tile_ow").back();
  ConvRegisterTile rt{largest_divisor_at_most(oc_blocks, cfg.knob("oc_reg")),
                      largest_divisor_at_most(oh, cfg.knob("oh_reg"))};
  auto floats = [&] {
    return rt.oc * rt.oh * ow_tile * ((ocb + kFloatsPerLine - 1) / kFloatsPerLine) * kFloatsPerLine;
  };
  while (floats() > kMaxTileFloats && rt.oh > 1) rt.oh = largest_divisor_at_most(oh, rt.oh - 1);
  while (floats() > kMaxTileFloats && rt.oc > 1)
    rt.oc = largest_divisor_at_most(oc_blocks, rt.oc - 1);
  return rt;
}

bool conv_tile_fits(const ConvRegisterTile& rt, int64_t ow_tile, int64_t ocb, const Isa& isa) {
  int64_t vectors_per_column = (ocb + isa.lanes() - 1) / isa.lanes();
  return rt.oc * rt.oh * ow_tile * vectors_per_column <= isa.vector_registers;
}

int64_t ic_chunk_blocks(const Config& cfg, int64_t ic_blocks) {
  if (!cfg.has_knob("ic_chunk") || cfg.knob("ic_chunk") == 0) return 0;
  int64_t icb = cfg.split("tile_ic").back();
  int64_t chunk =
      largest_divisor_at_most(ic_blocks, std::max<int64_t>(1, cfg.knob("ic_chunk") / icb));
  return chunk < ic_blocks ? chunk : 0;
}

int64_t oc_tile_group(const Config& cfg, int64_t oc_tiles) {
  if (!cfg.has_knob("oc_group") || cfg.knob("oc_group") == 0) return 0;
  int64_t group = largest_divisor_at_most(oc_tiles, cfg.knob("oc_group"));
  return group > 1 ? group : 0;
}

int64_t fallback_oc_group(int64_t oc_tiles, int64_t tile_weight_bytes, int64_t input_bytes,
                          const Isa& isa) {
  if (isa.l2_bytes <= 0) return 0;
  const int64_t budget = isa.l2_bytes / 2;  // the other half: the rows streaming by
  if (input_bytes <= budget) return 0;      // the input stays in L2 across the tiles
  int64_t best = 0, best_group = 1;         // the smallest value of the largest group
  for (int64_t value : kOcGroupValues) {
    int64_t group = value > 0 ? largest_divisor_at_most(oc_tiles, value) : 1;
    if (group > best_group && group * tile_weight_bytes <= budget) best = value, best_group = group;
  }
  return best;
}

// Pixel tiles are offered for 1x1 stride-1 convs on planes of at most this
// many rows: the whole plane's accumulators live in the row buffer.
constexpr int64_t kMaxPixelTilePlane = 14;

bool pixel_tile_plane(const Conv2DAttrs& a) {
  return a.kernel_h == 1 && a.kernel_w == 1 && a.stride_h == 1 && a.stride_w == 1 &&
         a.out_height() <= kMaxPixelTilePlane;
}

bool pixel_tiles(const Config& cfg) {
  return cfg.has_knob("pixel_tiles") && cfg.knob("pixel_tiles") == 1;
}

bool plane_rows_plane(const Conv2DAttrs& a) {
  return !pixel_tile_plane(a) && a.out_height() <= kMaxPixelTilePlane;
}

bool plane_rows(const Config& cfg) {
  return cfg.has_knob("plane_rows") && cfg.knob("plane_rows") == 1;
}

bool rolled_reduction(const Config& cfg) {
  return cfg.has_knob("rolled_reduction") && cfg.knob("rolled_reduction") == 1;
}

bool pad_rows(const Config& cfg) { return cfg.has_knob("pad_rows") && cfg.knob("pad_rows") == 1; }

// Measured on 2 threads of a Zen 4 against the unrolled reduction, fallback
// builds, whole models (ab_packages.py): AVX2 code, RegNetY-400MF 0.94,
// MobileNetV2 and ShuffleNetV2 0.965, MNASNet 0.985, EfficientNet-B0 1.00;
// AVX-512 code 1.00-1.02 (its 32 registers hold what LICM hoists).
bool fallback_rolled_reduction(const Isa& isa) {
  constexpr int64_t kRegistersThatHoldHoistedWeights = 32;
  return isa.vector_registers < kRegistersThatHoldHoistedWeights;
}

namespace {

// A padding copy of an NCHW[x]c input, at root: (n, channel blocks, rows)
// in parallel, or (n, rows, channel blocks) when the input was written by
// rows (kInputSplitRows: each thread then copies the rows its core wrote).
void schedule_padding_copy(const schedule::Stage& sp, const TemplateInstance& inst) {
  if (has_fact(inst, kInputSplitRows)) {
    sp->reorder({sp->axis(2), sp->axis(1)});
    sp->parallel(sp->fuse({sp->axis(0), sp->axis(2), sp->axis(1)}));
  } else {
    sp->parallel(sp->fuse({sp->axis(0), sp->axis(1), sp->axis(2)}));
  }
  sp->vectorize(sp->axis(4));
}

}  // namespace

void schedule_conv_nchwc(schedule::Schedule& sch, const TemplateInstance& inst,
                         const Tensor& output, const Config& cfg, const std::string& name,
                         int64_t oc_blocks_per_tile) {
  auto [tile, out] = prepare_anchor(sch, inst.anchor, output, name);
  std::vector<Tensor> padded_inputs;
  for (auto& t : input_tensors(inst.anchor))
    if (!t->is_placeholder) padded_inputs.push_back(t);
  if (!pad_rows(cfg))
    for (auto& t : padded_inputs) schedule_padding_copy(sch[t], inst);
  const auto& anchor_out = out;  // a structured binding: lambdas capture a reference to it
  auto extent = [&](size_t d) { return *ir::as_const_int(anchor_out->axis(d)->dom.extent); };
  ConvRegisterTile rt = conv_register_tile(oc_blocks_per_tile > 0 ? oc_blocks_per_tile : extent(1),
                                           extent(2), extent(4), cfg);
  const bool plane = pixel_tiles(cfg);
  const int64_t ic_blocks = *ir::as_const_int(tile->reduce_axis(0)->dom.extent);
  int64_t chunk = ic_chunk_blocks(cfg, ic_blocks);
  if (plane && chunk == 0) chunk = ic_blocks;  // one chunk: the whole reduction
  const bool rows_in_chunks = chunk > 0 && plane_rows(cfg);
  // The whole plane: tiles run over its pixels, or its rows run inside each
  // chunk.
  if (plane || rows_in_chunks) rt.oh = extent(2);
  auto [oc_outer, oc_inner] = out->split(out->axis(1), rt.oc);
  auto [oh_outer, oh_inner] = out->split(out->axis(2), rt.oh);
  auto ow = apply_split(out, out->axis(3), cfg.split("tile_ow"));
  // A heavy epilogue (SiLU's sigmoid) per column, as in the lane-window
  // convs: unrolled over the register tile, LLVM ran each stage of it over
  // every column at once and spilled the tile's vectors, the temporaries
  // and the constants (EfficientNet-B0's 24 -> 144 SiLU expansion, AVX2
  // code: 35 spill stores and 85 reloads a tile of 1 x 4).
  if (detail::epilogue_is_heavy(inst.anchor, output)) out->keep_rolled(ow[1]);
  IterVar rows;
  if (int64_t group = oc_tile_group(cfg, extent(1) / rt.oc); group > 0) {
    // Output-channel tiles in groups, the rows inside each group: a group's
    // weights stay in L2 while the rows stream by, and the input is read
    // from beyond L2 once per group instead of once per tile.
    auto [group_outer, group_inner] = out->split(oc_outer, group);
    out->reorder({out->axis(0), group_outer, oh_outer, group_inner, ow[0], oc_inner, oh_inner,
                  ow[1], out->axis(4)});
    rows = out->fuse({out->axis(0), group_outer, oh_outer, group_inner});
  } else if (has_fact(inst, kSplitRows)) {
    // Row tiles outside the channel tiles: each thread writes whole rows of
    // every channel and reads only its rows of the input (and all weights).
    out->reorder(
        {out->axis(0), oh_outer, oc_outer, ow[0], oc_inner, oh_inner, ow[1], out->axis(4)});
    rows = out->fuse({out->axis(0), oh_outer, oc_outer});
  } else {
    out->reorder(
        {out->axis(0), oc_outer, oh_outer, ow[0], oc_inner, oh_inner, ow[1], out->axis(4)});
    rows = out->fuse({out->axis(0), oc_outer, oh_outer});
  }
  out->parallel(rows);
  out->vectorize(out->axis(4));
  if (pad_rows(cfg))
    for (auto& t : padded_inputs) {
      sch[t]->compute_at(out, rows);
      sch[t]->vectorize(sch[t]->axis(4));
    }

  if (chunk > 0) {
    // Reduction blocking: the tile covers whole rows, and the input-channel
    // blocks are split into chunks outside the ow tiles, so that one chunk's
    // weights (chunk x window x rt.oc x ocb floats) stay in L1 across every
    // ow tile of the rows, instead of the whole reduction's weights streaming
    // from L2 for each ow tile (MLAS's pointwise kernels batch 128 channels
    // the same way). The accumulators go through the row buffer between chunks.
    tile->compute_at(out, rows);
    // Pixel tiles: the plane's rows and columns fused, so that a tile of 3
    // columns covers 49 pixels in 16 full tiles and one of 1, where per row
    // (7 = 3 + 3 + 1) a seventh of the work ran in a 1-column tile.
    IterVar columns = plane ? tile->fuse(tile->axis(2), tile->axis(3)) : tile->axis(3);
    auto tw = apply_split(tile, columns, cfg.split("tile_ow"));
    auto [ico_o, ico_i] = tile->split(tile->reduce_axis(0), chunk);
    // Unrolled by LLVM, these loops put several tiles' accumulators, or a
    // whole chunk's weights, in registers at once: spills.
    for (const IterVar& loop : {ico_o, tw[0], ico_i}) tile->keep_rolled(loop);
    std::vector<IterVar> window = {ico_i, tile->reduce_axis(1), tile->reduce_axis(2)};
    if (cfg.knob("kernel_outer")) window = {tile->reduce_axis(1), tile->reduce_axis(2), ico_i};
    std::vector<IterVar> inner = {tile->axis(1)};
    if (!plane && !rows_in_chunks) inner.push_back(tile->axis(2));
    inner.push_back(tw[1]);
    // Rows inside the chunks: a chunk's weights serve every row of the plane
    // before the next chunk's are read, where row by row each row reads all
    // of the tile's weights again (from L3 once they outgrow L2).
    std::vector<IterVar> order = {ico_o};
    if (rows_in_chunks) {
      order.push_back(tile->axis(2));
      tile->keep_rolled(tile->axis(2));
    }
    for (const IterVar& loop : {tw[0], window[0], window[1], window[2], tile->reduce_axis(3)})
      order.push_back(loop);
    order.insert(order.end(), inner.begin(), inner.end());
    IterVar lanes = tile->axis(4);
    order.push_back(lanes);
    tile->reorder(order);
    if (cfg.knob("unroll_kw")) tile->unroll(tile->reduce_axis(2));
    for (const IterVar& v : inner) tile->unroll(v);
    tile->vectorize(lanes);
    return;
  }
  // The tile: one register tile of rt.oc x rt.oh x ow[1] vectors, reduced over
  // the input channels and the window.
  tile->compute_at(out, ow[0]);
  std::vector<IterVar> order = {tile->reduce_axis(0), tile->reduce_axis(1), tile->reduce_axis(2)};
  if (cfg.knob("kernel_outer"))
    order = {tile->reduce_axis(1), tile->reduce_axis(2), tile->reduce_axis(0)};
  tile->reorder({order[0], order[1], order[2], tile->reduce_axis(3), tile->axis(1), tile->axis(2),
                 tile->axis(3), tile->axis(4)});
  if (cfg.knob("unroll_kw")) tile->unroll(tile->reduce_axis(2));
  // A short reduction's loops, unrolled whole by LLVM, make every weight load
  // of the tile invariant in the column loop: LICM hoists them out of it and
  // the ones the registers cannot hold go to stack slots, each FMA reloading
  // one beside the output's stores (rolled_reduction).
  if (rolled_reduction(cfg))
    tile->keep_rolled(ic_blocks > 1 ? tile->reduce_axis(0) : tile->reduce_axis(3));
  tile->unroll(tile->axis(1));
  tile->unroll(tile->axis(2));
  tile->unroll(tile->axis(3));
  tile->vectorize(tile->axis(4));
}

void define_lane_window_knobs(ConfigSpace& space, const Conv2DAttrs& a) {
  if (a.kernel_w > 1) space.define_knob("kw_inner", {0, 1}, schedule::KnobOrigin::AddedLater);
  if (a.padded()) space.define_knob("pad_copy", {0, 1}, schedule::KnobOrigin::AddedLater);
}

// Measured on one thread of a Zen 4 (GFLOP/s, neither knob -> the fallback):
//  AVX-512 code, kw_inner alone: ConvNeXt-T's 7x7 depthwise 41-69 -> 94-118,
//   ResNeXt-50's 3x3 groups of 4 and 8 64-69 -> 93-97, MobileNetV2's 3x3
//   depthwise 91-99 -> 95-107; a copy as well cost 3-37 % there (the masked
//   loads of inlined padding are cheap with 32 registers and mask registers).
//  AVX2 code, both: ResNeXt-50's groups 74 -> 83-96 (kw_inner alone 71-73:
//   the inlined padding's selects and bounds still spill), ConvNeXt-T's 7x7
//   depthwise on 14x14 to 56x56 28-41 -> 85-91; but on 7x7 (a 13x13 copy)
//   97 -> 80. MobileNetV2's 3x3 depthwise: the copy alone where the column
//   tile leaves a partial one (4 of 14, of 7: 37-40 -> 51-60, where the
//   partial tile's selects cost most), neither where it divides the width
//   (28 to 112: 68 -> 61 with a copy), nor at stride 2 (33-66 -> 14-26).
void lane_window_fallback_knobs(KnobValues& knobs, const Conv2DAttrs& a, int64_t reduction_per_lane,
                                int64_t ow_tile, const Isa& isa) {
  const bool padded = a.padded();
  const bool taps_share_columns = a.kernel_w > 1 && a.stride_w == 1 && a.dilation_w == 1;
  bool kw_inner = taps_share_columns, pad_copy = false;
  if (isa.vector_registers < 32) {
    const int64_t reuse = a.kernel_h * a.kernel_w * reduction_per_lane;
    const int64_t padded_plane =
        (a.height + a.pad_top + a.pad_bottom) * (a.width + a.pad_left + a.pad_right);
    const bool small_copy = padded_plane * 2 <= a.height * a.width * 5;  // at most 2.5x
    const bool stride_1 = a.stride_h == 1 && a.stride_w == 1;
    const bool many_taps = reuse >= kPadCopyMinReuse;
    pad_copy = padded && stride_1 && small_copy && (many_taps || a.out_width() % ow_tile != 0);
    kw_inner = taps_share_columns && pad_copy && many_taps;
  }
  if (a.kernel_w > 1) knobs.knob("kw_inner", kw_inner);
  if (padded) knobs.knob("pad_copy", pad_copy);
}

void schedule_lane_window_conv(schedule::Schedule& sch, const TemplateInstance& inst,
                               const Tensor& output, const Config& cfg,
                               const std::string& template_name) {
  auto [tile, out] = prepare_anchor(sch, inst.anchor, output, template_name);
  auto on = [&](const char* knob) { return cfg.has_knob(knob) && cfg.knob(knob) == 1; };
  for (auto& t : input_tensors(inst.anchor)) {
    if (t->is_placeholder) continue;
    if (!on("pad_copy")) {
      sch[t]->compute_inline();
      continue;
    }
    schedule_padding_copy(sch[t], inst);
  }
  auto ow = apply_split(out, out->axis(3), cfg.split("tile_ow"));
  if (has_fact(inst, kSplitRows)) {
    // The rows in two halves outside the channel blocks, each half's rows
    // inside them: with two threads each writes (and reads) half of the rows
    // of every channel, and a channel block's window rows stay in L1 from
    // one output row to the next. With the rows outermost, all the channel
    // blocks ran between two rows of one block (84 blocks of a 5x5 window's
    // padded rows at 14x14: 480 KB, beyond L1).
    const int64_t height = *ir::as_const_int(out->axis(2)->dom.extent);
    auto [half, row] = out->split(out->axis(2), (height + 1) / 2);
    out->reorder({half, out->axis(1), row});
    out->parallel(out->fuse({out->axis(0), half, out->axis(1)}));
  } else {
    out->parallel(out->fuse({out->axis(0), out->axis(1), out->axis(2)}));
  }
  out->vectorize(out->axis(4));
  // A heavy epilogue (SiLU's sigmoid) per column: unrolled over the tile, its
  // constants and temporaries beside the tile's vectors spilled (EfficientNet-
  // B0's depthwise kernels as AVX2 code: 263 stack accesses a row).
  if (detail::epilogue_is_heavy(inst.anchor, output)) out->keep_rolled(ow[1]);
  tile->compute_at(out, ow[0]);
  std::vector<IterVar> order;
  const size_t reduce_axes = tile->op->reduce_axis.size();
  for (size_t r = 0; r < reduce_axes; ++r)
    if (r != 1 || !on("kw_inner")) order.push_back(tile->reduce_axis(r));
  order.push_back(tile->axis(3));
  if (on("kw_inner")) order.push_back(tile->reduce_axis(1));
  order.push_back(tile->axis(4));
  tile->reorder(order);
  if (cfg.knob("unroll_kw")) tile->unroll(tile->reduce_axis(1));
  for (size_t r = 2; r < reduce_axes; ++r) tile->unroll(tile->reduce_axis(r));
  tile->unroll(tile->axis(3));
  tile->vectorize(tile->axis(4));
}

}  // namespace detail

namespace {

void check(const Conv2DParams& p) {
  if (p.out_height() < 1 || p.out_width() < 1)
    throw std::invalid_argument("conv2d: empty output for these sizes");
}

std::vector<int64_t> expect_list(const Workload& w, const std::string& name, size_t n) {
  const auto& v = w.get(name);
  if (v.size() != n)
    detail::bad_workload(w, "'" + name + "' needs " + std::to_string(n) + " values");
  return v;
}

// conv2d_NCHWc.x86 (see conv2d.h).
class Conv2dNCHWc final : public OpTemplate {
 public:
  std::string name() const override { return "conv2d_NCHWc.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    ConfigSpace space;
    space.define_split("tile_ic", a.in_channels, 2, SplitPolicy::Factors, 64);
    space.define_split("tile_oc", a.out_channels, 2, SplitPolicy::Factors, 64);
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::RegisterTile, 32);
    space.define_knob("unroll_kw", {0, 1});
    // Register tile beyond the width: output-channel blocks and rows computed
    // together (more accumulators per weight and input load; what narrow
    // layers and 1x1 convs need). Neither changes the layout, so neighbouring
    // convolutions keep agreeing. Values that do not divide the extent use
    // its largest divisor below them (register_tile()).
    space.define_knob("oc_reg", detail::conv_oc_reg_values(a.out_channels));
    space.define_knob("oh_reg", detail::conv_oh_reg_values(a.out_height()));
    // Reduction order: input-channel blocks outermost (0) or the kernel
    // window outermost (1).
    space.define_knob("kernel_outer", {0, 1});
    // Reduction blocking, in input channels (0: none; schedule_conv_nchwc).
    space.define_knob("ic_chunk", {0, 64, 128, 256}, schedule::KnobOrigin::AddedLater);
    // 1: the register tile's columns run over the whole plane's pixels, rows
    // and columns fused (small planes: 7x7, 14x14), not row by row.
    if (detail::pixel_tile_plane(a))
      space.define_knob("pixel_tiles", {0, 1}, schedule::KnobOrigin::AddedLater);
    // 1: a chunked reduction runs each chunk over the whole plane's rows
    // (other small planes: 7x7 and 14x14 outputs of larger windows or
    // strides), not each row over every chunk.
    if (detail::plane_rows_plane(a))
      space.define_knob("plane_rows", {0, 1}, schedule::KnobOrigin::AddedLater);
    // Output-channel tiles per group of the parallel loop (0: none, every
    // tile's rows in turn; schedule_conv_nchwc).
    space.define_knob("oc_group", {detail::kOcGroupValues.begin(), detail::kOcGroupValues.end()},
                      schedule::KnobOrigin::AddedLater);
    // 1: an unchunked reduction's outer loop stays a loop (schedule_conv_nchwc).
    space.define_knob("rolled_reduction", {0, 1}, schedule::KnobOrigin::AddedLater);
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t icb = detail::fallback_channel_block(a.in_channels);
    int64_t ocb = detail::fallback_channel_block(a.out_channels);
    // A short reduction (EfficientNet's 16- to 112-channel expansions, whose
    // SiLU epilogue costs more than the dot) ran slower with the wider tile:
    // with the reduction rolled (rolled_reduction), the wide tile from 64
    // channels on ran ShuffleNetV2 1.03x and EfficientNet-B0 1.005x (1.02x
    // before its epilogue ran column by column), from 128 on 0.98-1.00x on
    // 11 models (RegNet, EfficientNet 0.98; ResNet-50, DenseNet, ConvNeXt
    // 0.99), 2 threads of a Zen 4 running AVX2 code;
    // a wide window's is not short however few its channels: the 7x7 stem
    // (3 channels, 147 products per output) took the budget-filling 6 columns
    // of 2 ymm over 4, 101 -> 110 GFLOP/s on one thread of a Zen 4 running
    // AVX2 code (its 3x3 stems, 27 products, measured no better).
    constexpr int64_t kMinReductionForWideTile = 128;
    constexpr int64_t kMinWindowForWideTile = 25;
    const int64_t window = a.kernel_h * a.kernel_w;
    int64_t reduction = a.in_channels * window;
    detail::ConvFallbackTile ft =
        reduction >= kMinReductionForWideTile || window >= kMinWindowForWideTile
            ? detail::conv_fallback_tile(a.out_height(), a.out_width(), a.out_channels / ocb, ocb,
                                         window, a.in_channels, isa)
            : detail::ConvFallbackTile{1, detail::fallback_ow_tile(a.out_width(), ocb, isa)};
    // Pixel tiles need this many channel tiles (whole-plane tasks) to split
    // evenly over the threads: with 16 or more, 2 threads differ by at most
    // one task in 16 (6 %).
    constexpr int64_t kMinPixelTileTasks = 16;
    // Channel tiles grouped where the input outgrows L2 (fallback_oc_group).
    const int64_t tile_channels = ft.oc_blocks * ocb;
    const int64_t oc_group = detail::fallback_oc_group(
        a.out_channels / tile_channels, tile_channels * a.in_channels * window * 4,
        a.batch * a.in_channels * a.height * a.width * 4, isa);
    // Columns that leave a partial tile in every row of a small plane (7 =
    // 3 + 3 + 1) run over its pixels instead (49 = 16 x 3 + 1), where the
    // plane's channel tiles are enough parallel tasks: a task is a whole
    // plane there, and LR-ASPP's 960 -> 160 on 14 x 14 (5 tiles of 2
    // blocks, one thread running 3) ran 0.33-0.45 ms against 0.27-0.37
    // over rows (70 tasks), 2 threads of a Zen 4 running AVX2 code.
    const int64_t plane_tasks = a.batch * (a.out_channels / tile_channels);
    const bool pixel_tiles = detail::pixel_tile_plane(a) && a.out_width() % ft.columns != 0 &&
                             plane_tasks >= kMinPixelTileTasks;
    bool rows_in_chunks = false;  // plane_rows: set with the window chunk below
    auto config = [&](int64_t ic_chunk) {
      detail::KnobValues knobs;
      knobs.split("tile_ic", a.in_channels, {icb})
          .split("tile_oc", a.out_channels, {ocb})
          .split("tile_ow", a.out_width(), {ft.columns})
          .knob("unroll_kw", a.kernel_w <= 3)
          .knob("oc_reg", ft.oc_blocks)
          .knob("oh_reg", ft.rows)
          .knob("kernel_outer", 0)
          .knob("ic_chunk", ic_chunk);
      if (detail::pixel_tile_plane(a)) knobs.knob("pixel_tiles", pixel_tiles);
      if (detail::plane_rows_plane(a)) knobs.knob("plane_rows", ic_chunk > 0 && rows_in_chunks);
      knobs.knob("oc_group", oc_group);
      knobs.knob("rolled_reduction", detail::fallback_rolled_reduction(isa));
      return knobs.in(space(w));
    };
    // Reduction chunks where the tile's weights outgrow L1 (fallback_ic_chunk),
    // unless the chunked tile's row buffer would not fit the worker's stack.
    int64_t chunk = detail::fallback_ic_chunk(a.in_channels, window, tile_channels, isa);
    // A larger window's tile whose operands do not fit (a narrow row's 2 x 3,
    // conv_fallback_tile) takes chunks sized to L2. Unchunked, its spill
    // stores made its speed depend on where the thread's stack lies in a
    // page (4K aliasing with the weight loads): over 16 stack offsets a 160
    // -> 320 conv onto 7 x 7 ran 0.55-3.05 ms on one thread, chunked
    // 0.47-0.54 (AVX2 code on a Zen 4).
    //
    // On a small plane its chunks run over the whole plane's rows
    // (plane_rows): row by row, every row read all of the tile's weights
    // again, from L3 once they outgrow L2. ResNet-50's 512 -> 512 stride-2
    // conv onto 7 x 7 under a simulated 512 KiB L2 (cache_misses.py): 398 K
    // L2 misses a call row by row, 88 K over the plane; 2.50 -> 2.42 ms on one
    // thread of a Zen 4.
    const int64_t vectors = (ocb + isa.lanes() - 1) / isa.lanes();
    if (chunk == 0 && window > 1 && !detail::operands_fit(ft.oc_blocks, ft.columns, vectors, isa)) {
      chunk = detail::fallback_window_chunk(a.in_channels, window, tile_channels, isa);
      rows_in_chunks = detail::plane_rows_plane(a) && plane_tasks >= kMinPixelTileTasks;
    }
    // Not where the chunked row would spill (ConvNeXt-T's 2x2 stride-2 384 ->
    // 768 on a 7-wide row, AVX2: 44 GFLOP/s chunked, 95 not, one thread). A
    // pixel-tiled plane keeps its chunk: its buffer is the whole plane. A
    // plane with too few channel tiles for pixel tiles runs rows, and its
    // rows spill like any other (GoogLeNet's 832 -> 48 on 7 x 7, 3 tiles:
    // 0.087 ms chunked, 0.040 not, one thread; 2 threads 0.098-0.157 against
    // 0.023).
    if (chunk > 0 && !pixel_tiles &&
        detail::chunked_row_spills(ft.oc_blocks * vectors * a.out_width(),
                                   ft.oc_blocks * vectors + 1, isa))
      chunk = 0;
    Config cfg = config(chunk);
    return chunk > 0 && !fits(w, cfg, isa) ? config(0) : cfg;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    int64_t ICo = a.in_channels / icb, OCo = a.out_channels / ocb;
    Tensor data = placeholder({a.batch, ICo, a.height, a.width, icb}, DataType::f32(), "data");
    Tensor weight =
        placeholder({OCo, ICo, a.kernel_h, a.kernel_w, icb, ocb}, DataType::f32(), "weight");
    Tensor pad =
        detail::pad_spatial(data, a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, "data_pad");
    IterVar ico = reduce_axis(ICo, "ico"), kh = reduce_axis(a.kernel_h, "kh"),
            kw = reduce_axis(a.kernel_w, "kw"), ici = reduce_axis(icb, "ici");
    Tensor out = ir::compute(
        {a.batch, OCo, a.out_height(), a.out_width(), ocb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          return sum(at(pad, i[0], ico->var, h, x, ici->var) *
                         at(weight, i[1], ico->var, kh->var, kw->var, ici->var, i[4]),
                     {ico, kh, kw, ici});
        },
        "conv");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    detail::schedule_conv_nchwc(sch, inst, output, cfg, name(), 0);
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    detail::ConvRegisterTile rt =
        detail::conv_register_tile(a.out_channels / ocb, a.out_height(), ocb, cfg);
    const auto& ow = cfg.split("tile_ow");
    // A chunked reduction's row buffer lives on the worker's stack.
    bool plane = detail::pixel_tiles(cfg);
    bool chunked = plane || detail::ic_chunk_blocks(cfg, a.in_channels / icb) > 0;
    int64_t pixels = a.out_height() * a.out_width();
    int64_t rows = chunked && detail::plane_rows(cfg) ? a.out_height() : rt.oh;
    int64_t buffer_floats = plane ? rt.oc * ((pixels + ow[1] - 1) / ow[1]) * ow[1] * ocb
                                  : rt.oc * rows * ow[0] * ow[1] * ocb;
    bool row_fits = !chunked || buffer_floats * 4 <= ir::kMaxLocalStackBytes;
    return row_fits && detail::conv_tile_fits(rt, ow.back(), ocb, isa);
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * a.in_channels *
           a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    return {{a.batch, a.in_channels / icb, a.height, a.width, icb},
            {a.out_channels / ocb, a.in_channels / icb, a.kernel_h, a.kernel_w, icb, ocb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    return {a.batch, a.out_channels / ocb, a.out_height(), a.out_width(), ocb};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    const float *data = inputs[0], *weight = inputs[1];
    int64_t ICo = a.in_channels / icb, OCo = a.out_channels / ocb;
    int64_t OH = a.out_height(), OW = a.out_width();
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oco = 0; oco < OCo; ++oco)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t oci = 0; oci < ocb; ++oci) {
              double acc = 0;
              for (int64_t ico = 0; ico < ICo; ++ico)
                for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                  for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                    int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                    int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                    if (ih < 0 || ih >= a.height || iw < 0 || iw >= a.width) continue;
                    const float* x =
                        data + (((n * ICo + ico) * a.height + ih) * a.width + iw) * icb;
                    const float* k =
                        weight +
                        (((oco * ICo + ico) * a.kernel_h + kh) * a.kernel_w + kw) * icb * ocb;
                    for (int64_t ici = 0; ici < icb; ++ici)
                      acc += double(x[ici]) * double(k[ici * ocb + oci]);
                  }
              output[(((n * OCo + oco) * OH + oh) * OW + ow) * ocb + oci] = static_cast<float>(acc);
            }
  }

 private:
  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    return conv2d_attrs(w, ConvKind::kDense);
  }
  std::pair<int64_t, int64_t> blocks(const Workload& w, const Conv2DAttrs& a,
                                     const Config& cfg) const {
    int64_t icb = conv2d_nchwc_ic_block(cfg), ocb = conv2d_nchwc_oc_block(cfg);
    if (icb < 1 || ocb < 1 || a.in_channels % icb || a.out_channels % ocb)
      detail::bad_workload(w, "channel blocks " + std::to_string(icb) + "/" + std::to_string(ocb) +
                                  " must divide the channels");
    return {icb, ocb};
  }
};

}  // namespace

const OpTemplate& conv2d_nchwc_template() {
  static const Conv2dNCHWc t;
  return t;
}

Workload conv2d_workload(const std::string& template_name, const Conv2DAttrs& a) {
  return Workload{template_name,
                  {{"data", {a.batch, a.in_channels, a.height, a.width}},
                   {"kernel", {a.out_channels, a.in_channels / a.groups, a.kernel_h, a.kernel_w}},
                   {"strides", {a.stride_h, a.stride_w}},
                   {"pads", {a.pad_top, a.pad_left, a.pad_bottom, a.pad_right}},
                   {"dilation", {a.dilation_h, a.dilation_w}}},
                  "float32"};
}

Conv2DAttrs conv2d_attrs(const Workload& w, ConvKind kind) {
  auto d = expect_list(w, "data", 4), k = expect_list(w, "kernel", 4),
       s = expect_list(w, "strides", 2), p = expect_list(w, "pads", 4),
       dl = expect_list(w, "dilation", 2);
  Conv2DAttrs a{d[0], d[1], d[2], d[3], k[0], k[2],  k[3],  s[0],
                s[1], p[0], p[1], p[2], p[3], dl[0], dl[1], 1};
  for (int64_t v : {d[0], d[1], d[2], d[3], k[0], k[1], k[2], k[3], s[0], s[1], dl[0], dl[1]})
    if (v < 1) detail::bad_workload(w, "sizes, strides and dilations must be positive");
  for (int64_t v : p)
    if (v < 0) detail::bad_workload(w, "pads must not be negative");
  if (kind == ConvKind::kDepthwise) {
    if (k[1] != 1 || k[0] != d[1])
      detail::bad_workload(w, "a depthwise kernel must be [C, 1, KH, KW] (multiplier 1)");
    a.groups = d[1];
  } else if (kind == ConvKind::kGrouped) {
    if (d[1] % k[1] != 0 || d[1] / k[1] < 2 || k[0] % (d[1] / k[1]) != 0)
      detail::bad_workload(w,
                           "a grouped kernel must be [OC, C/G, KH, KW] with groups G = C / "
                           "kernel[1] > 1 dividing C and OC");
    a.groups = d[1] / k[1];
  } else if (k[1] != d[1]) {
    detail::bad_workload(w, "kernel input channels must equal the data channels (groups = 1)");
  }
  if (a.out_height() < 1 || a.out_width() < 1) detail::bad_workload(w, "empty output");
  return a;
}

// ---- conv2d_nchw (baseline, not registered) ------------------------------------

ConfigSpace conv2d_nchw_space(const Conv2DParams& p, SplitPolicy policy) {
  check(p);
  ConfigSpace space;
  space.define_split("tile_oc", p.out_channels, 2, policy);
  space.define_split("tile_oh", p.out_height(), 2, policy);
  space.define_split("tile_ow", p.out_width(), 2, policy);
  space.define_split("tile_ic", p.in_channels, 2, policy);
  space.define_knob("pad_mode", {0, 1, 2});
  space.define_knob("unroll_inner", {0, 1});
  return space;
}

Kernel conv2d_nchw(const Conv2DParams& p, const Config& cfg) {
  check(p);
  Tensor data = placeholder({p.batch, p.in_channels, p.height, p.width}, DataType::f32(), "data");
  Tensor weight = placeholder({p.out_channels, p.in_channels, p.kernel_h, p.kernel_w},
                              DataType::f32(), "weight");
  Tensor pad = detail::pad_spatial(data, p.pad_h, p.pad_w, p.pad_h, p.pad_w, "data_pad");
  IterVar rc = reduce_axis(p.in_channels, "rc"), ry = reduce_axis(p.kernel_h, "ry"),
          rx = reduce_axis(p.kernel_w, "rx");
  Tensor out = compute(
      {p.batch, p.out_channels, p.out_height(), p.out_width()},
      [&](const std::vector<Var>& i) {
        Expr h = i[2] * p.stride_h + ry->var * p.dilation_h;
        Expr w = i[3] * p.stride_w + rx->var * p.dilation_w;
        return sum(at(pad, i[0], rc->var, h, w) * at(weight, i[1], rc->var, ry->var, rx->var),
                   {rc, ry, rx});
      },
      "conv");
  Kernel k{"conv2d_nchw", {data, weight, out}, schedule::create_schedule({out})};
  auto& sch = k.sch;
  Tensor CC = sch.cache_write(out, MemScope::Local);
  auto so = sch[out];
  auto oc = apply_split(so, so->axis(1), cfg.split("tile_oc"));
  auto oh = apply_split(so, so->axis(2), cfg.split("tile_oh"));
  auto ow = apply_split(so, so->axis(3), cfg.split("tile_ow"));
  so->reorder({so->axis(0), oc[0], oh[0], ow[0], oc[1], oh[1], ow[1]});
  so->parallel(so->fuse(so->axis(0), oc[0]));
  so->vectorize(ow[1]);

  auto sc = sch[CC];
  sc->compute_at(so, ow[0]);
  auto ic = apply_split(sc, sc->reduce_axis(0), cfg.split("tile_ic"));
  sc->reorder({ic[0], sc->reduce_axis(1), sc->reduce_axis(2), ic[1], sc->axis(1), sc->axis(2),
               sc->axis(3)});
  if (cfg.knob("unroll_inner")) sc->unroll(sc->axis(2));
  sc->vectorize(sc->axis(3));

  if (pad != data) {
    switch (cfg.knob("pad_mode")) {
      case 0: sch[pad]->compute_inline(); break;
      case 1: break;  // root: the whole padded input first
      default: sch[pad]->compute_at(sc, ic[0]); break;
    }
  }
  return k;
}

// ---- conv2d_NCHWc through the template ---------------------------------------------

namespace {
Workload nchwc_workload(const Conv2DParams& p) {
  check(p);
  return conv2d_workload("conv2d_NCHWc.x86",
                         Conv2DAttrs{p.batch, p.in_channels, p.height, p.width, p.out_channels,
                                     p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h,
                                     p.pad_w, p.pad_h, p.pad_w, p.dilation_h, p.dilation_w, 1});
}
}  // namespace

ConfigSpace conv2d_nchwc_space(const Conv2DParams& p) {
  return conv2d_nchwc_template().space(nchwc_workload(p));
}

Kernel conv2d_nchwc(const Conv2DParams& p, const Config& cfg) {
  Kernel k = make_kernel(conv2d_nchwc_template(), nchwc_workload(p), cfg);
  k.name = "conv2d_NCHWc";
  return k;
}

int64_t conv2d_nchwc_ic_block(const Config& cfg) { return cfg.split("tile_ic").back(); }
int64_t conv2d_nchwc_oc_block(const Config& cfg) { return cfg.split("tile_oc").back(); }

namespace {

// Calls f(plain offset, blocked offset) for every element of an NCHW tensor
// and its NCHW[cb]c counterpart.
template <typename F>
void for_each_nchwc_pair(int64_t n, int64_t c, int64_t h, int64_t w, int64_t cb, F f) {
  for (int64_t a = 0; a < n; ++a)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z)
          f(((a * c + ch) * h + y) * w + z,
            ((((a * (c / cb) + ch / cb) * h + y) * w + z) * cb) + ch % cb);
}

}  // namespace

std::vector<float> nchw_to_nchwc(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb) {
  std::vector<float> out(static_cast<size_t>(n * c * h * w));
  for_each_nchwc_pair(n, c, h, w, cb,
                      [&](int64_t plain, int64_t blocked) { out[blocked] = x[plain]; });
  return out;
}

std::vector<float> nchwc_to_nchw(const float* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                 int64_t cb) {
  std::vector<float> out(static_cast<size_t>(n * c * h * w));
  for_each_nchwc_pair(n, c, h, w, cb,
                      [&](int64_t plain, int64_t blocked) { out[plain] = x[blocked]; });
  return out;
}

std::vector<float> oihw_to_blocked(const float* wt, int64_t oc, int64_t ic, int64_t kh, int64_t kw,
                                   int64_t icb, int64_t ocb) {
  std::vector<float> out(static_cast<size_t>(oc * ic * kh * kw));
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t dst =
              (((((o / ocb) * (ic / icb) + i / icb) * kh + y) * kw + x) * icb + i % icb) * ocb +
              o % ocb;
          out[dst] = wt[((o * ic + i) * kh + y) * kw + x];
        }
  return out;
}

}  // namespace kiln::ops
