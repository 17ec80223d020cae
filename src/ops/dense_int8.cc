#include "ops/dense_int8.h"

#include <stdexcept>

#include "ops/dense.h"
#include "ops/int8_registers.h"
#include "ops/int8_weight_range.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;

namespace {

struct Shape {
  int64_t M, N, K;
  int64_t words() const { return (K + 3) / 4; }
};

// 255 * 128 * K must stay below 2^31 for the int32 accumulator to be exact.
constexpr int64_t kMaxK = 65792;

class DenseInt8Template final : public OpTemplate {
 public:
  std::string name() const override { return "dense_int8.x86"; }

  // dense_pack's space and fallback over K's 4-byte words (ops/dense.h).
  ConfigSpace space(const Workload& w) const override {
    Shape d = shape(w);
    return detail::packed_dense_space(d.M, d.N, d.words());
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Shape d = shape(w);
    // dense_pack's rule picks the column block first, from the lanes alone; the
    // rows then fit the accumulators the target's dot lowering leaves beside
    // that block's weight vectors (ops/int8_registers.h).
    Config first = detail::packed_dense_fallback(d.M, d.N, d.words(), isa);
    return detail::packed_dense_fallback(
        d.M, d.N, d.words(),
        detail::int8_tile_isa(isa, weight_vectors(first, isa), narrow_weights(w)));
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    shape(w);
    int64_t vectors = weight_vectors(cfg, isa);
    return detail::int8_tile_fits(isa, cfg.split("tile_y").back() * vectors, vectors,
                                  narrow_weights(w));
  }

  // With 7-bit weights the kernel is exact only for weights within [-64, 64]:
  // the tuner's and the tests' random weights are drawn from there.
  void fill_random_input(const Workload& w, size_t i, DataType t, void* data, int64_t n,
                         std::mt19937_64& rng) const override {
    shape(w);
    if (i == 1 && narrow_weights(w))
      fill_random_narrow(static_cast<int8_t*>(data), n, rng);
    else
      fill_random(t, data, n, rng);
  }

  // Vectors of int32 lanes across the register tile's columns.
  static int64_t weight_vectors(const Config& cfg, const Isa& isa) {
    return (cfg.split("tile_x").back() + isa.lanes() - 1) / isa.lanes();
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Shape d = shape(w);
    bool narrow = narrow_weights(w);
    auto shapes = input_shapes(w, cfg);
    int64_t bn = shapes[1][2];
    Tensor A = placeholder({d.M, d.K}, DataType::u8(), "A");
    std::vector<Expr> bshape(shapes[1].begin(), shapes[1].end());
    Tensor B = placeholder(bshape, DataType::i8(), "B_packed");
    IterVar ko = reduce_axis(d.words(), "ko");
    Tensor C = ir::compute(
        {d.M, d.N},
        [&](const std::vector<Var>& i) {
          std::vector<Expr> a, b;
          for (int j = 0; j < 4; ++j) {
            Expr k = ko->var * 4 + j;
            if (d.K % 4 == 0) {
              a.push_back(at(A, i[0], k));
            } else {
              // The last word's bytes past K are 0 (whatever the packed weight
              // holds there); the load reads a clamped, valid address.
              a.push_back(select(k < d.K, at(A, i[0], min(k, make_int(d.K - 1))),
                                 make_int(0, DataType::u8())));
            }
            b.push_back(at(B, floordiv(i[1], bn), ko->var, floormod(i[1], bn), j));
          }
          // 7-bit weights promise b in [-64, 64]: pmaddubsw without VNNI.
          Expr dot = narrow ? dot4_u8i8_narrow_b(make_int(0, DataType::i32()), a, b)
                            : dot4_u8i8(make_int(0, DataType::i32()), a, b);
          return sum(dot, {ko});
        },
        "C");
    return {{A, B}, C};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // The same loop nest as dense_pack: only the reduction is over 4-byte words.
    detail::schedule_dense_tiles(detail::prepare_anchor(sch, inst.anchor, output, name()), cfg);
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
    return {{d.M, d.K}, {(d.N + bn - 1) / bn, d.words(), bn, 4}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Shape d = shape(w);
    return {d.M, d.N};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    shape(w);
    return {DataType::u8(), DataType::i8()};
  }
  DataType output_dtype(const Workload& w) const override {
    shape(w);
    return DataType::i32();
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": an integer template has only reference_typed()");
  }

  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    Shape d = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    int64_t bn = cfg.split("tile_x").back(), KO = d.words();
    auto* A = static_cast<const uint8_t*>(in[0]);
    auto* B = static_cast<const int8_t*>(in[1]);
    auto* C = static_cast<int32_t*>(output);
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < d.K; ++k)
          acc += int64_t(A[m * d.K + k]) * B[(((n / bn) * KO + k / 4) * bn + n % bn) * 4 + k % 4];
        C[m * d.N + n] = static_cast<int32_t>(acc);
      }
  }

  Shape shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 data, int8 weight)");
    const auto &a = w.get("data"), &b = w.get("weight");
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0])
      detail::bad_workload(w, "needs data=[M,K] and weight=[K,N]");
    if (a[0] < 1 || a[1] < 1 || b[1] < 1) detail::bad_workload(w, "sizes must be positive");
    if (a[1] > kMaxK)
      detail::bad_workload(w, "K > " + std::to_string(kMaxK) + " could overflow the int32 sum");
    narrow_weights(w);  // a bad weight_range is refused here
    return {a[0], b[1], a[1]};
  }
};

const DenseInt8Template& instance() {
  static const DenseInt8Template t;
  return t;
}

}  // namespace

const OpTemplate& dense_int8_template() { return instance(); }

Workload dense_int8_workload(int64_t M, int64_t N, int64_t K, bool narrow) {
  Workload w{"dense_int8.x86", {{"data", {M, K}}, {"weight", {K, N}}}, "uint8"};
  return narrow ? with_narrow_weights(std::move(w)) : w;
}

std::vector<int8_t> pack_dense_int8_weight(const int8_t* B, int64_t K, int64_t N, int64_t bn) {
  int64_t nb = (N + bn - 1) / bn, KO = (K + 3) / 4;
  std::vector<int8_t> out(static_cast<size_t>(nb * KO * bn * 4), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      out[(((n / bn) * KO + k / 4) * bn + n % bn) * 4 + k % 4] = B[k * N + n];
  return out;
}

std::vector<int8_t> pack_dense_int8_weight(const Workload& w, const Config& cfg,
                                           const int8_t* B_KN) {
  const auto& d = w.get("data");
  instance().shape(w);
  return pack_dense_int8_weight(B_KN, d[1], w.get("weight")[1], cfg.split("tile_x").back());
}

}  // namespace kiln::ops
