#include "ops/batch_matmul.h"

#include "ops/dense.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

schedule::ConfigSpace detail::batch_matmul_space(int64_t M, int64_t N, int64_t k_steps,
                                                 bool exact_columns) {
  auto innermost_at_most = [](int64_t cap) {
    return [cap](const std::vector<int64_t>& f) { return f.back() <= cap; };
  };
  ConfigSpace space;
  space.define_split("tile_y", M, 3, SplitPolicy::RegisterTile, 0, innermost_at_most(kMaxTileRows));
  // Column tiles need not divide N: a partial one runs predicated vectors
  // (vectorize_loops), and version_guarded_loops gives every whole tile a
  // version without the test (ViT's attention scores have 197 columns: exact
  // factors left 1 or 197).
  // The int8 template keeps exact factors (its b's K-quad packing).
  space.define_split("tile_x", N, 3, exact_columns ? SplitPolicy::Factors : SplitPolicy::All, 0,
                     innermost_at_most(kMaxTileCols));
  space.define_split("tile_k", k_steps, 2, SplitPolicy::Factors, 0, innermost_at_most(kMaxTileK));
  return space;
}

schedule::Config detail::batch_matmul_fallback(int64_t M, int64_t N, int64_t k_steps,
                                               const Isa& isa, bool exact_columns) {
  KnobValues knobs;
  dense_fallback_knobs(M, N, k_steps, exact_columns, isa, knobs);
  return knobs.in(batch_matmul_space(M, N, k_steps, exact_columns));
}

void detail::schedule_batch_matmul_tiles(schedule::Schedule& sch, const TemplateInstance& inst,
                                         const Tensor& output, const Config& cfg,
                                         const std::string& template_name) {
  auto [tile, out] = prepare_anchor(sch, inst.anchor, output, template_name);
  auto y = apply_split(out, out->axis(1), cfg.split("tile_y"));
  auto x = apply_split(out, out->axis(2), cfg.split("tile_x"));
  out->reorder({y[0], x[0], y[1], x[1], y[2], x[2]});
  out->parallel(out->fuse({out->axis(0), y[0], x[0]}));
  auto t = out->fuse(y[1], x[1]);
  out->unroll(y[2]);
  out->vectorize(x[2]);

  tile->compute_at(out, t);
  auto k = apply_split(tile, tile->reduce_axis(0), cfg.split("tile_k"));
  IterVar cy = tile->axis(1), cx = tile->axis(2);
  tile->reorder({k[0], k[1], cy, cx});
  tile->unroll(k[1]);
  tile->unroll(cy);
  tile->vectorize(cx);
}

namespace {

struct BatchMatmulShape {
  int64_t B, Bb, M, N, K;
};

// batch_matmul.x86 (see batch_matmul.h).
class BatchMatmul final : public OpTemplate {
 public:
  std::string name() const override { return "batch_matmul.x86"; }

  ConfigSpace space(const Workload& w) const override {
    BatchMatmulShape s = shape(w);
    return detail::batch_matmul_space(s.M, s.N, s.K, false);
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    BatchMatmulShape s = shape(w);
    return detail::batch_matmul_fallback(s.M, s.N, s.K, isa, false);
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    return detail::dense_tile_fits(cfg.split("tile_y").back(), cfg.split("tile_x").back(), isa);
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    BatchMatmulShape s = shape(w);
    Tensor a = placeholder({s.B, s.M, s.K}, DataType::f32(), "a");
    Tensor b = placeholder({s.Bb, s.K, s.N}, DataType::f32(), "b");
    IterVar k = reduce_axis(s.K, "k");
    bool broadcast = s.Bb == 1;
    Tensor c = ir::compute(
        {s.B, s.M, s.N},
        [&](const std::vector<Var>& i) {
          Expr bi = broadcast ? Expr(0) : Expr(i[0]);
          return sum(at(a, i[0], i[1], k->var) * at(b, bi, k->var, i[2]), {k});
        },
        "batch_matmul");
    return {{a, b}, c};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    detail::schedule_batch_matmul_tiles(sch, inst, output, cfg, name());
  }

  double flops(const Workload& w) const override {
    BatchMatmulShape s = shape(w);
    return 2.0 * s.B * s.M * s.N * s.K;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    BatchMatmulShape s = shape(w);
    return {{s.B, s.M, s.K}, {s.Bb, s.K, s.N}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    BatchMatmulShape s = shape(w);
    return {s.B, s.M, s.N};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    BatchMatmulShape s = shape(w);
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs a and b");
    for (int64_t bi = 0; bi < s.B; ++bi) {
      const float* a = inputs[0] + bi * s.M * s.K;
      const float* b = inputs[1] + (s.Bb == 1 ? 0 : bi) * s.K * s.N;
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < s.K; ++k) acc += double(a[m * s.K + k]) * double(b[k * s.N + n]);
          output[(bi * s.M + m) * s.N + n] = static_cast<float>(acc);
        }
    }
  }

 private:
  BatchMatmulShape shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    const auto &a = w.get("a"), &b = w.get("b");
    if (a.size() != 3 || b.size() != 3 || a[2] != b[1])
      detail::bad_workload(w, "needs a=[B,M,K] and b=[Bb,K,N]");
    if (b[0] != 1 && b[0] != a[0]) detail::bad_workload(w, "b's batch must be 1 or a's batch");
    for (int64_t v : {a[0], a[1], a[2], b[2]})
      if (v < 1) detail::bad_workload(w, "sizes must be positive");
    return {a[0], b[0], a[1], b[2], a[2]};
  }
};

}  // namespace

const OpTemplate& batch_matmul_template() {
  static const BatchMatmul t;
  return t;
}

}  // namespace kiln::ops
