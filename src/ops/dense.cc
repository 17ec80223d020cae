#include "ops/dense.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace detail {

int64_t row_tiles_per_task(int64_t M, int64_t rows, int64_t cap) {
  const int64_t tiles = (M + rows - 1) / rows;
  int64_t best = 1;
  double best_use = 0;
  for (int64_t y1 = std::min(cap, tiles); y1 >= std::max<int64_t>(1, cap / 4); --y1) {
    // The split's inner factors are divisors of M or powers of two.
    bool candidate = M % y1 == 0 || (y1 & (y1 - 1)) == 0;
    if (!candidate || y1 * rows > M) continue;
    double use = double(tiles) / double((tiles + y1 - 1) / y1 * y1);
    if (use > best_use + 1e-9) best = y1, best_use = use;
  }
  return best;
}

DenseTile dense_fallback_tile(int64_t M, int64_t N, bool exact_columns, const Isa& isa) {
  // Column blocks in vectors of the ISA that divide N. With several rows and
  // a partial last block allowed: 2 or 3 whole vectors (32, 48 with AVX-512;
  // 16, 24 with AVX2), else 2 and a partial last block. Part of a vector per
  // row leaves LLVM splitting and shuffling each row's accumulators, and with
  // several rows they spill: an 8 x 1280 x 1000 dense (a classifier at batch
  // 8) took 0.83 ms in 40-column blocks and 0.10 ms in 32 as AVX-512 code,
  // 0.64 ms in 20 and 0.14-0.17 ms in 16 as AVX2 code (0.15-0.23 in 8; Zen
  // 4). One row has registers to spare, and where blocks must divide N there
  // is no partial block: 2, 3, 2.5, 1.5 or 1 vectors (as AVX2 code, 1 x 1280
  // x 1000 ran 0.057 ms in 20 columns, 0.066 in 16, 0.089 in 8).
  const int64_t L = isa.lanes();
  const bool whole_vectors = M > 1 && !exact_columns;
  const std::vector<int64_t> widths =
      whole_vectors ? std::vector<int64_t>{2 * L, 3 * L}
                    : std::vector<int64_t>{2 * L, 3 * L, 5 * L / 2, 3 * L / 2, L};
  int64_t bn = 0;
  for (int64_t c : widths)
    if (c > 0 && N % c == 0) {
      bn = c;
      break;
    }
  if (!bn)
    bn = exact_columns ? largest_divisor_at_most(N, 4 * L) : N >= 2 * L ? 2 * L : N >= L ? L : N;
  // Rows of the register tile: at most 8, and the accumulators (rows x
  // vectors per row) within the register budget, so that nothing spills.
  int64_t vectors_per_row = (bn + L - 1) / L;
  int64_t cap =
      std::min<int64_t>(8, std::max<int64_t>(1, isa.accumulator_budget() / vectors_per_row));
  // A divisor of M of at least half the cap first (ConvNeXt's 196 rows: 7),
  // then the cap itself: the partial last tile it leaves gets a guard-free
  // version for the others (version_guarded_loops), and the row split takes
  // any count up to 8 (SplitPolicy::RegisterTile). ViT's 197 rows as AVX2
  // code: 6-row tiles (12 accumulators) where a power of two gave 4 (8).
  int64_t rows = M;
  if (M > cap) {
    rows = largest_divisor_at_most(M, cap);
    if (2 * rows < cap) rows = cap;
  }
  return {rows, bn};
}

namespace {

int64_t pow2_at_most(int64_t limit) {
  int64_t p = 1;
  while (p * 2 <= limit) p *= 2;
  return p;
}

}  // namespace

void dense_fallback_knobs(int64_t M, int64_t N, int64_t K, bool exact_columns, const Isa& isa,
                          KnobValues& knobs) {
  const auto [rows, bn] = dense_fallback_tile(M, N, exact_columns, isa);
  int64_t x1 = 1;
  if (M > 1)
    x1 = N % bn == 0 ? largest_divisor_at_most(N / bn, std::max<int64_t>(1, 256 / bn))
                     : pow2_at_most(std::min<int64_t>(N, 256) / bn);
  // Row tiles per parallel task: the count, between a quarter of the cap and
  // the cap, that wastes the fewest task slots, the larger on a tie, so that
  // the static split across threads gets tasks of equal work. ConvNeXt's and
  // ViT's 196 rows (49 tiles of 4) in tasks of 16 tiles made 16 + 16 + 16 +
  // 1: one thread had 32 tiles, the other 17; tasks of 7 tiles divide 49.
  int64_t y1 = row_tiles_per_task(M, rows, std::max<int64_t>(1, std::min<int64_t>(M, 64) / rows));
  int64_t kk = largest_divisor_at_most(K, M == 1 ? 16 : 4);
  knobs.split("tile_y", M, {y1, rows}).split("tile_x", N, {x1, bn}).split("tile_k", K, {kk});
}

namespace {

// The k steps of a block of about `target` steps: a multiple of the unrolled
// kk that divides K, at most `target` (at least kk).
int64_t k_block_steps(int64_t K, int64_t kk, int64_t target) {
  return kk * largest_divisor_at_most(K / kk, std::max<int64_t>(1, target / kk));
}

}  // namespace

bool dense_blocked_fallback_knobs(int64_t M, int64_t N, int64_t K, const Isa& isa,
                                  KnobValues& knobs) {
  const auto [rows, bn] = dense_fallback_tile(M, N, false, isa);
  const int64_t kk = largest_divisor_at_most(K, 4);
  const int64_t block = k_block_steps(K, kk, kFallbackKBlock);
  // One row tile reuses nothing across rows; a short or indivisible
  // reduction has no block worth the task buffer's traffic; weights that fit
  // a core's L2 are not streamed from further away in the first place (a
  // 128 x 1024 x 256 encoder layer ran 6 % slower blocked).
  const bool weights_beyond_l2 = K * N * 4 > kBlockedWeightBytes;
  if (M <= rows || block < kFallbackKBlock / 4 || block >= K || !weights_beyond_l2) return false;
  // A task of up to 8 row tiles (AVX2: 48 rows; 48 x 256 floats of A, 48 KiB)
  // by up to 128 columns (its accumulators: 24 KiB).
  const int64_t y1 = std::min<int64_t>(8, (M + rows - 1) / rows);
  const int64_t x1 = N % bn == 0 ? largest_divisor_at_most(N / bn, std::max<int64_t>(1, 128 / bn))
                                 : pow2_at_most(std::min<int64_t>(N, 128) / bn);
  knobs.split("tile_y", M, {y1, rows})
      .split("tile_x", N, {x1, bn})
      .split("tile_k", K, {kk})
      .knob("tile_order", 0)
      .knob("k_block", kFallbackKBlock);
  return true;
}

int64_t dense_k_block(const Config& cfg, int64_t K) {
  if (!cfg.has_knob("k_block") || cfg.knob("k_block") == 0) return 0;
  const int64_t block = k_block_steps(K, cfg.split("tile_k").back(), cfg.knob("k_block"));
  return block < K ? block : 0;
}

namespace {

// Reduction blocking (k_block): the accumulators of a whole parallel task
// (tile_y[1] x tile_x[1] register tiles) live in a task buffer, and k runs in
// blocks outside the register tiles, so that one block of a packed column
// panel (block x bn floats, 16 KiB for 256 x 16) stays in L1 across every row
// tile of the task and one block of the task's rows of A stays in L2, where
// the unblocked tile streams the whole panel (K x bn) from L2 or L3 for each
// row tile. Between blocks each register tile's accumulators go through the
// task buffer (LLVM keeps them in registers across the block's k loop, as in
// conv2d's ic_chunk), as MLAS's kernels do through C every 256 k. The tasks
// are fused columns first: consecutive tasks of a thread share a column
// block, whose panels are then still in cache, and a partial last row block
// (197 = 4 x 48 + 5) is spread over both threads instead of one thread
// getting every short task.
void schedule_dense_blocked(const TileStages& st, const Config& cfg, int64_t block) {
  auto& sc = st.out;
  auto y = apply_split(sc, sc->axis(0), cfg.split("tile_y"));
  auto x = apply_split(sc, sc->axis(1), cfg.split("tile_x"));
  bool columns_outer = cfg.knob("tile_order") == 1;
  sc->reorder({x[0], y[0], y[1], x[1], y[2], x[2]});
  IterVar task = sc->fuse(x[0], y[0]);
  sc->parallel(task);
  sc->vectorize(x[2]);

  auto& scc = st.tile;
  scc->compute_at(sc, task);
  const int64_t rows = cfg.split("tile_y").back(), cols = cfg.split("tile_x").back();
  auto [cyo, cyi] = scc->split(scc->axis(0), rows);
  auto [cxo, cxi] = scc->split(scc->axis(1), cols);
  auto k = apply_split(scc, scc->reduce_axis(0), cfg.split("tile_k"));
  auto [kb, ki] = scc->split(k[0], block / cfg.split("tile_k").back());
  if (columns_outer)
    scc->reorder({kb, cxo, cyo, ki, k[1], cyi, cxi});
  else
    scc->reorder({kb, cyo, cxo, ki, k[1], cyi, cxi});
  // Unrolled by LLVM, these would put several tiles' accumulators in
  // registers at once: spills.
  for (const IterVar& loop : {kb, cyo, cxo, ki}) scc->keep_rolled(loop);
  scc->unroll(k[1]);
  scc->unroll(cyi);
  scc->vectorize(cxi);
}

}  // namespace

// out's outer tiles fused and parallel, the register tile tile_y[2] x
// tile_x[2] of `tile` computed at out's tile loop, accumulating over k.
void schedule_dense_tiles(const TileStages& st, const Config& cfg) {
  const int64_t K = *ir::as_const_int(st.tile->reduce_axis(0)->dom.extent);
  if (int64_t block = dense_k_block(cfg, K)) return schedule_dense_blocked(st, cfg, block);
  auto& sc = st.out;
  auto y = apply_split(sc, sc->axis(0), cfg.split("tile_y"));
  auto x = apply_split(sc, sc->axis(1), cfg.split("tile_x"));
  bool columns_outer = cfg.knob("tile_order") == 1;
  if (columns_outer)
    sc->reorder({y[0], x[0], x[1], y[1], y[2], x[2]});
  else
    sc->reorder({y[0], x[0], y[1], x[1], y[2], x[2]});
  sc->parallel(sc->fuse(y[0], x[0]));
  auto tile = columns_outer ? sc->fuse(x[1], y[1]) : sc->fuse(y[1], x[1]);
  sc->unroll(y[2]);
  sc->vectorize(x[2]);

  auto& scc = st.tile;
  scc->compute_at(sc, tile);
  auto k = apply_split(scc, scc->reduce_axis(0), cfg.split("tile_k"));
  IterVar cy = scc->axis(0), cx = scc->axis(1);
  scc->reorder({k[0], k[1], cy, cx});
  scc->unroll(k[1]);
  scc->unroll(cy);
  scc->vectorize(cx);
}

}  // namespace detail

namespace {

// The knobs of both dense templates. `limit` (the registered templates):
// bounded register tiles, exact k splits, and exact column splits unless B is
// packed (zero-padded, so a partial column tile reads in bounds and needs no
// guard inside the register tile). Otherwise (the legacy spaces) the policy
// alone.
ConfigSpace dense_space(const DenseWorkload& w, SplitPolicy policy, bool limit, bool packed,
                        bool k_blocks) {
  using detail::kMaxTileCols, detail::kMaxTileK, detail::kMaxTileRows;
  auto innermost_at_most = [limit](int64_t cap) -> schedule::SplitFilter {
    if (!limit) return {};
    return [cap](const std::vector<int64_t>& f) { return f.back() <= cap; };
  };
  ConfigSpace space;
  // Row tiles of any count up to 8 (the registered spaces): a partial last
  // one is versioned (version_guarded_loops).
  space.define_split("tile_y", w.M, 3, limit ? SplitPolicy::RegisterTile : policy, 0,
                     innermost_at_most(kMaxTileRows));
  SplitPolicy exact = limit ? SplitPolicy::Factors : policy;
  space.define_split("tile_x", w.N, 3, packed ? policy : exact, 0, innermost_at_most(kMaxTileCols));
  space.define_split("tile_k", w.K, 2, exact, 0, innermost_at_most(kMaxTileK));
  // Order of the register tiles inside a parallel task: 0 walks a row block
  // across all column panels, 1 keeps one packed column panel hot in cache
  // while it walks the row blocks.
  space.define_knob("tile_order", {0, 1});
  // Reduction blocking in k steps (0: none; schedule_dense_blocked). The
  // float templates only: dense_int8 and dense_bf16 share their space
  // without it (packed_dense_space).
  if (k_blocks) space.define_knob("k_block", {0, 128, 256, 512}, schedule::KnobOrigin::AddedLater);
  return space;
}

Tensor dense_compute(const DenseWorkload& w, const Tensor& A, const Tensor& B, int64_t bn) {
  IterVar k = reduce_axis(w.K, "k");
  return compute(
      {w.M, w.N},
      [&](const std::vector<Var>& i) {
        Expr b = bn ? at(B, floordiv(i[1], bn), k->var, floormod(i[1], bn)) : at(B, k->var, i[1]);
        return sum(at(A, i[0], k->var) * b, {k});
      },
      "C");
}

}  // namespace

schedule::ConfigSpace detail::packed_dense_space(int64_t M, int64_t N, int64_t k_steps) {
  return dense_space(DenseWorkload{M, N, k_steps}, SplitPolicy::All, true, true, false);
}

schedule::Config detail::packed_dense_fallback(int64_t M, int64_t N, int64_t k_steps,
                                               const Isa& isa) {
  KnobValues knobs;
  dense_fallback_knobs(M, N, k_steps, false, isa, knobs);
  return knobs.knob("tile_order", 1).in(packed_dense_space(M, N, k_steps));
}

namespace {

// dense_pack.x86 and dense_nopack.x86 (see dense.h).
class DenseTemplate final : public OpTemplate {
 public:
  explicit DenseTemplate(bool pack) : pack_(pack) {}
  std::string name() const override { return pack_ ? "dense_pack.x86" : "dense_nopack.x86"; }

  ConfigSpace space(const Workload& w) const override {
    return dense_space(shape(w), SplitPolicy::All, true, pack_, true);
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    DenseWorkload d = shape(w);
    detail::KnobValues knobs;
    if (pack_ && detail::dense_blocked_fallback_knobs(d.M, d.N, d.K, isa, knobs))
      return knobs.in(space(w));
    detail::dense_fallback_knobs(d.M, d.N, d.K, !pack_, isa, knobs);
    return knobs.knob("tile_order", 1).in(space(w));
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    const auto &ty = cfg.split("tile_y"), &tx = cfg.split("tile_x");
    // A blocked task's accumulators live on the worker's stack.
    bool buffer_fits = !detail::dense_k_block(cfg, shape(w).K) ||
                       ty[1] * ty[2] * tx[1] * tx[2] * 4 <= ir::kMaxLocalStackBytes;
    return buffer_fits && detail::dense_tile_fits(ty.back(), tx.back(), isa);
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    DenseWorkload d = shape(w);
    auto shapes = input_shapes(w, cfg);
    Tensor A = placeholder({shapes[0][0], shapes[0][1]}, DataType::f32(), "A");
    std::vector<Expr> bshape(shapes[1].begin(), shapes[1].end());
    Tensor B = placeholder(bshape, DataType::f32(), pack_ ? "B_packed" : "B");
    return {{A, B}, dense_compute(d, A, B, pack_ ? dense_pack_block(cfg) : 0)};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    detail::schedule_dense_tiles(detail::prepare_anchor(sch, inst.anchor, output, name()), cfg);
  }

  double flops(const Workload& w) const override {
    DenseWorkload d = shape(w);
    return 2.0 * d.M * d.N * d.K;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    DenseWorkload d = shape(w);
    if (!pack_) return {{d.M, d.K}, {d.K, d.N}};
    int64_t bn = dense_pack_block(cfg);
    if (bn < 1 || bn > d.N) detail::bad_workload(w, "pack block " + std::to_string(bn));
    return {{d.M, d.K}, {(d.N + bn - 1) / bn, d.K, bn}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    DenseWorkload d = shape(w);
    return {d.M, d.N};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    DenseWorkload d = shape(w);
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs A and B");
    int64_t bn = pack_ ? dense_pack_block(cfg) : 0;
    const float *A = inputs[0], *B = inputs[1];
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < d.K; ++k) {
          float b = bn ? B[((n / bn) * d.K + k) * bn + n % bn] : B[k * d.N + n];
          acc += double(A[m * d.K + k]) * double(b);
        }
        output[m * d.N + n] = static_cast<float>(acc);
      }
  }

  DenseWorkload shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    const auto &a = w.get("data"), &b = w.get("weight");
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0])
      detail::bad_workload(w, "needs data=[M,K] and weight=[K,N]");
    if (a[0] < 1 || a[1] < 1 || b[1] < 1) detail::bad_workload(w, "sizes must be positive");
    return {a[0], b[1], a[1]};
  }

 private:
  bool pack_;
};

const DenseTemplate& dense_template(bool pack) {
  static const DenseTemplate packed(true), plain(false);
  return pack ? packed : plain;
}

}  // namespace

const OpTemplate& dense_pack_template() { return dense_template(true); }
const OpTemplate& dense_nopack_template() { return dense_template(false); }

Workload dense_workload(const std::string& template_name, const DenseWorkload& d) {
  return Workload{template_name, {{"data", {d.M, d.K}}, {"weight", {d.K, d.N}}}, "float32"};
}

std::vector<float> pack_weight(const Workload& w, const Config& cfg, const float* B_KN) {
  DenseWorkload d = dense_template(true).shape(w);
  return pack_dense_weight(B_KN, d.K, d.N, dense_pack_block(cfg));
}

ConfigSpace dense_nopack_space(const DenseWorkload& w, SplitPolicy policy) {
  return dense_space(w, policy, false, false, false);
}

Kernel dense_nopack(const DenseWorkload& w, const Config& cfg) {
  Kernel k = make_kernel(dense_nopack_template(), dense_workload("dense_nopack.x86", w), cfg);
  k.name = "dense_nopack";
  return k;
}

ConfigSpace dense_pack_space(const DenseWorkload& w, SplitPolicy policy) {
  return dense_space(w, policy, false, false, false);
}

int64_t dense_pack_block(const Config& cfg) { return cfg.split("tile_x").back(); }

Kernel dense_pack(const DenseWorkload& w, const Config& cfg, bool pack_in_kernel) {
  if (!pack_in_kernel) {
    Kernel k = make_kernel(dense_pack_template(), dense_workload("dense_pack.x86", w), cfg);
    k.name = "dense_pack";
    return k;
  }
  int64_t bn = dense_pack_block(cfg);
  int64_t nb = (w.N + bn - 1) / bn;
  Tensor A = placeholder({w.M, w.K}, DataType::f32(), "A");
  Tensor B = placeholder({w.K, w.N}, DataType::f32(), "B");
  // Columns past N read a clamped (valid) address and are zeroed.
  Tensor Bp = compute(
      {nb, w.K, bn},
      [&](const std::vector<Var>& i) {
        Expr n = i[0] * bn + i[2];
        return select(n < w.N, at(B, i[1], min(n, make_int(w.N - 1))), make_float(0.0));
      },
      "B_packed");
  Tensor C = dense_compute(w, A, Bp, bn);
  Kernel kern{"dense_pack", {A, B, C}, schedule::create_schedule({C})};
  auto sp = kern.sch[Bp];
  sp->parallel(sp->axis(0));
  if (bn > 1) sp->vectorize(sp->axis(2));
  Tensor CC = kern.sch.cache_write(C, MemScope::Local);
  detail::schedule_dense_tiles({kern.sch[CC], kern.sch[C]}, cfg);
  return kern;
}

std::vector<float> pack_dense_weight(const float* B, int64_t K, int64_t N, int64_t bn) {
  int64_t nb = (N + bn - 1) / bn;
  std::vector<float> out(static_cast<size_t>(nb * K * bn), 0.0f);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < bn; ++j) {
        int64_t n = b * bn + j;
        if (n < N) out[(b * K + k) * bn + j] = B[k * N + n];
      }
  return out;
}

}  // namespace kiln::ops
