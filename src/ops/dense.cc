#include "ops/dense.h"

#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

ConfigSpace dense_space(const DenseWorkload& w, SplitPolicy policy) {
  ConfigSpace space;
  space.define_split("tile_y", w.M, 3, policy);
  space.define_split("tile_x", w.N, 3, policy);
  space.define_split("tile_k", w.K, 2, policy);
  // Order of the register tiles inside a parallel task: 0 walks a row block
  // across all column panels, 1 keeps one packed column panel hot in cache
  // while it walks the row blocks.
  space.define_knob("tile_order", {0, 1});
  return space;
}

// The schedule both templates share (the shape of TVM's dense_pack): C's
// outer tiles are fused and parallel, a register tile tile_y[2] x tile_x[2]
// accumulates in a local buffer over k, rows and the inner k unrolled,
// columns vectorized.
void schedule_dense(schedule::Schedule& sch, const Tensor& C, const Config& cfg) {
  Tensor CC = sch.cache_write(C, MemScope::Local);
  auto sc = sch[C];
  auto y = apply_split(sc, sc->axis(0), cfg.split("tile_y"));
  auto x = apply_split(sc, sc->axis(1), cfg.split("tile_x"));
  bool columns_outer = cfg.knob("tile_order") == 1;
  if (columns_outer)
    sc->reorder({y[0], x[0], x[1], y[1], y[2], x[2]});
  else
    sc->reorder({y[0], x[0], y[1], x[1], y[2], x[2]});
  auto outer = sc->fuse(y[0], x[0]);
  sc->parallel(outer);
  auto tile = columns_outer ? sc->fuse(x[1], y[1]) : sc->fuse(y[1], x[1]);
  sc->unroll(y[2]);
  sc->vectorize(x[2]);

  auto scc = sch[CC];
  scc->compute_at(sc, tile);
  auto k = apply_split(scc, scc->reduce_axis(0), cfg.split("tile_k"));
  IterVar cy = scc->axis(0), cx = scc->axis(1);
  scc->reorder({k[0], k[1], cy, cx});
  scc->unroll(k[1]);
  scc->unroll(cy);
  scc->vectorize(cx);
}

}  // namespace

ConfigSpace dense_nopack_space(const DenseWorkload& w, SplitPolicy policy) {
  return dense_space(w, policy);
}

Kernel dense_nopack(const DenseWorkload& w, const Config& cfg) {
  Tensor A = placeholder({w.M, w.K}, DataType::f32(), "A");
  Tensor B = placeholder({w.K, w.N}, DataType::f32(), "B");
  IterVar k = reduce_axis(w.K, "k");
  Tensor C = compute(
      {w.M, w.N},
      [&](const std::vector<Var>& i) {
        return sum(at(A, i[0], k->var) * at(B, k->var, i[1]), {k});
      },
      "C");
  Kernel kern{"dense_nopack", {A, B, C}, schedule::create_schedule({C})};
  schedule_dense(kern.sch, C, cfg);
  return kern;
}

ConfigSpace dense_pack_space(const DenseWorkload& w, SplitPolicy policy) {
  return dense_space(w, policy);
}

int64_t dense_pack_block(const Config& cfg) { return cfg.split("tile_x").back(); }

Kernel dense_pack(const DenseWorkload& w, const Config& cfg, bool pack_in_kernel) {
  int64_t bn = dense_pack_block(cfg);
  int64_t nb = (w.N + bn - 1) / bn;
  Tensor A = placeholder({w.M, w.K}, DataType::f32(), "A");
  Tensor B, Bp;
  if (pack_in_kernel) {
    B = placeholder({w.K, w.N}, DataType::f32(), "B");
    // Columns past N read a clamped (valid) address and are zeroed.
    Bp = compute(
        {nb, w.K, bn},
        [&](const std::vector<Var>& i) {
          Expr n = i[0] * bn + i[2];
          return select(n < w.N, at(B, i[1], min(n, make_int(w.N - 1))), make_float(0.0));
        },
        "B_packed");
  } else {
    Bp = placeholder({nb, w.K, bn}, DataType::f32(), "B_packed");
  }
  IterVar k = reduce_axis(w.K, "k");
  Tensor C = compute(
      {w.M, w.N},
      [&](const std::vector<Var>& i) {
        return sum(at(A, i[0], k->var) * at(Bp, floordiv(i[1], bn), k->var, floormod(i[1], bn)),
                   {k});
      },
      "C");
  Kernel kern{"dense_pack", {A, pack_in_kernel ? B : Bp, C}, schedule::create_schedule({C})};
  if (pack_in_kernel) {
    auto sp = kern.sch[Bp];
    sp->parallel(sp->axis(0));
    if (bn > 1) sp->vectorize(sp->axis(2));
  }
  schedule_dense(kern.sch, C, cfg);
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
