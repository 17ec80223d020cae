#include "ops/dense_bf16.h"

#include <stdexcept>

#include "ops/dense.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;

namespace detail {

TemplateInstance dense_bf16_compute(int64_t M, int64_t N, int64_t K, int64_t bn) {
  const int64_t pairs = (K + 1) / 2;
  Tensor A = placeholder({M, K}, DataType::f32(), "A");
  Tensor B = placeholder({(N + bn - 1) / bn, pairs, bn, 2}, DataType::bf16(), "B_packed");
  // A in bf16, pairs padded with a zero past an odd K (the load reads a
  // valid address): a stage of the kernel, so each element is rounded once
  // and the register tile reads a pair as one 32-bit broadcast.
  Tensor Ab = ir::compute(
      {M, 2 * pairs},
      [&](const std::vector<Var>& i) {
        if (K % 2 == 0) return cast(DataType::bf16(), at(A, i[0], i[1]));
        return select(i[1] < K,
                      cast(DataType::bf16(), at(A, i[0], min(Expr(i[1]), make_int(K - 1)))),
                      make_float(0, DataType::bf16()));
      },
      "A_bf16");
  IterVar ko = reduce_axis(pairs, "ko");
  Tensor C = ir::compute(
      {M, N},
      [&](const std::vector<Var>& i) {
        Expr n_o = floordiv(i[1], bn), n_i = floormod(i[1], bn);
        return sum(
            dot2_bf16(make_float(0), at(Ab, i[0], ko->var * 2), at(Ab, i[0], ko->var * 2 + 1),
                      at(B, n_o, ko->var, n_i, 0), at(B, n_o, ko->var, n_i, 1)),
            {ko});
      },
      "C");
  return {{A, B}, C};
}

}  // namespace detail

namespace {

struct Shape {
  int64_t M, N, K;
  int64_t pairs() const { return (K + 1) / 2; }
};

class DenseBf16Template final : public OpTemplate {
 public:
  std::string name() const override { return "dense_bf16.x86"; }

  // dense_pack's space and fallback over K's pairs (ops/dense.h).
  ConfigSpace space(const Workload& w) const override {
    Shape d = shape(w);
    return detail::packed_dense_space(d.M, d.N, d.pairs());
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Shape d = shape(w);
    return detail::packed_dense_fallback(d.M, d.N, d.pairs(), isa);
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    return detail::dense_tile_fits(cfg.split("tile_y").back(), cfg.split("tile_x").back(), isa);
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Shape d = shape(w);
    return detail::dense_bf16_compute(d.M, d.N, d.K, input_shapes(w, cfg)[1][2]);
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // dense_pack's loop nest; only the reduction is over pairs.
    detail::schedule_dense_tiles(detail::prepare_anchor(sch, inst.anchor, output, name()), cfg);
    // The conversion stage at root: rows in parallel, the row vectorized by
    // the largest power of two <= 16 dividing its even length (no guarded
    // tail; LLVM 16's VectorCombine recursed without end on the 15-lane
    // vectors of a row of 30).
    for (const Tensor& t : input_tensors(inst.anchor)) {
      if (t->is_placeholder) continue;
      auto st = sch[t];
      st->parallel(st->axis(0));
      int64_t len = *as_const_int(st->axis(1)->dom.extent);
      int64_t lanes = 16;
      while (len % lanes) lanes /= 2;
      auto split = st->split(st->axis(1), lanes);
      st->vectorize(split.second);
    }
  }

  double flops(const Workload& w) const override {
    Shape d = shape(w);
    return 2.0 * d.M * d.N * d.K;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Shape d = shape(w);
    int64_t bn = cfg.split("tile_x").back();
    if (bn < 1 || bn > d.N) detail::bad_workload(w, "pack block " + std::to_string(bn));
    return {{d.M, d.K}, {(d.N + bn - 1) / bn, d.pairs(), bn, 2}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config&) const override {
    Shape d = shape(w);
    return {d.M, d.N};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    shape(w);
    return {DataType::f32(), DataType::bf16()};
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": a bfloat16 template has only reference_typed()");
  }

  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    Shape d = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    int64_t bn = cfg.split("tile_x").back(), KO = d.pairs();
    auto* A = static_cast<const float*>(in[0]);
    auto* B = static_cast<const uint16_t*>(in[1]);
    auto* C = static_cast<float*>(output);
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < d.K; ++k) {
          float a = bf16_to_f32_value(f32_to_bf16_value(A[m * d.K + k]));
          float b = bf16_to_f32_value(B[(((n / bn) * KO + k / 2) * bn + n % bn) * 2 + k % 2]);
          acc += double(a) * double(b);
        }
        C[m * d.N + n] = static_cast<float>(acc);
      }
  }

  Shape shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "bfloat16")
      detail::bad_workload(w, name() + " takes dtype bfloat16 (float32 data, bfloat16 weight)");
    const auto &a = w.get("data"), &b = w.get("weight");
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0])
      detail::bad_workload(w, "needs data=[M,K] and weight=[K,N]");
    if (a[0] < 1 || a[1] < 1 || b[1] < 1) detail::bad_workload(w, "sizes must be positive");
    return {a[0], b[1], a[1]};
  }
};

const DenseBf16Template& instance() {
  static const DenseBf16Template t;
  return t;
}

}  // namespace

const OpTemplate& dense_bf16_template() { return instance(); }

Workload dense_bf16_workload(int64_t M, int64_t N, int64_t K) {
  return Workload{"dense_bf16.x86", {{"data", {M, K}}, {"weight", {K, N}}}, "bfloat16"};
}

std::vector<uint16_t> pack_dense_bf16_weight(const float* B, int64_t K, int64_t N, int64_t bn) {
  int64_t nb = (N + bn - 1) / bn, KO = (K + 1) / 2;
  std::vector<uint16_t> out(static_cast<size_t>(nb * KO * bn * 2), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      out[(((n / bn) * KO + k / 2) * bn + n % bn) * 2 + k % 2] = f32_to_bf16_value(B[k * N + n]);
  return out;
}

std::vector<uint16_t> pack_dense_bf16_weight(const Workload& w, const Config& cfg,
                                             const float* B_KN) {
  instance().shape(w);
  return pack_dense_bf16_weight(B_KN, w.get("data")[1], w.get("weight")[1],
                                cfg.split("tile_x").back());
}

}  // namespace kiln::ops
