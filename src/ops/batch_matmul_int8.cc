#include "ops/batch_matmul_int8.h"

#include <stdexcept>

#include "ops/batch_matmul.h"
#include "ops/dense.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;

namespace {

struct Shape {
  int64_t B, Bb, M, N, K;
  int64_t words() const { return (K + 3) / 4; }
};

// 255 * 128 * K must stay below 2^31 for the int32 accumulator to be exact.
constexpr int64_t kMaxK = 65792;

class BatchMatmulInt8Template final : public OpTemplate {
 public:
  std::string name() const override { return "batch_matmul_int8.x86"; }

  // batch_matmul.x86's space and fallback over K's 4-byte words; int32
  // lanes are the ISA's float lanes, so the float rule's register tile fits.
  ConfigSpace space(const Workload& w) const override {
    Shape s = shape(w);
    return detail::batch_matmul_space(s.M, s.N, s.words(), true);
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Shape s = shape(w);
    return detail::batch_matmul_fallback(s.M, s.N, s.words(), isa, true);
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    return detail::dense_tile_fits(cfg.split("tile_y").back(), cfg.split("tile_x").back(), isa);
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Shape s = shape(w);
    auto shapes = input_shapes(w, cfg);
    int64_t bn = shapes[1][3];
    Tensor A = placeholder({s.B, s.M, s.K}, DataType::u8(), "A");
    std::vector<Expr> bshape(shapes[1].begin(), shapes[1].end());
    Tensor B = placeholder(bshape, DataType::i8(), "B_packed");
    IterVar ko = reduce_axis(s.words(), "ko");
    bool broadcast = s.Bb == 1;
    Tensor C = ir::compute(
        {s.B, s.M, s.N},
        [&](const std::vector<Var>& i) {
          Expr bi = broadcast ? Expr(0) : Expr(i[0]);
          std::vector<Expr> a, b;
          for (int j = 0; j < 4; ++j) {
            Expr k = ko->var * 4 + j;
            if (s.K % 4 == 0) {
              a.push_back(at(A, i[0], i[1], k));
            } else {
              // The last word's bytes past K are 0 (the packed B's are too);
              // the load reads a clamped, valid address.
              a.push_back(select(k < s.K, at(A, i[0], i[1], min(k, make_int(s.K - 1))),
                                 make_int(0, DataType::u8())));
            }
            b.push_back(at(B, bi, floordiv(i[2], bn), ko->var, floormod(i[2], bn), j));
          }
          return sum(dot4_u8i8(make_int(0, DataType::i32()), a, b), {ko});
        },
        "C");
    return {{A, B}, C};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // batch_matmul.x86's loop nest over the K words.
    detail::schedule_batch_matmul_tiles(sch, inst, output, cfg, name());
  }

  double flops(const Workload& w) const override {
    Shape s = shape(w);
    return 2.0 * s.B * s.M * s.N * s.K;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Shape s = shape(w);
    int64_t bn = cfg.split("tile_x").back();
    if (bn < 1 || bn > s.N) detail::bad_workload(w, "pack block " + std::to_string(bn));
    return {{s.B, s.M, s.K}, {s.Bb, (s.N + bn - 1) / bn, s.words(), bn, 4}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config&) const override {
    Shape s = shape(w);
    return {s.B, s.M, s.N};
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
    Shape s = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    int64_t bn = cfg.split("tile_x").back(), KO = s.words(), NB = (s.N + bn - 1) / bn;
    auto* A = static_cast<const uint8_t*>(in[0]);
    auto* B = static_cast<const int8_t*>(in[1]);
    auto* C = static_cast<int32_t*>(output);
    for (int64_t b = 0; b < s.B; ++b) {
      const int8_t* Bb = B + (s.Bb == 1 ? 0 : b) * NB * KO * bn * 4;
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          int64_t acc = 0;
          for (int64_t k = 0; k < s.K; ++k)
            acc += int64_t(A[(b * s.M + m) * s.K + k]) *
                   Bb[(((n / bn) * KO + k / 4) * bn + n % bn) * 4 + k % 4];
          C[(b * s.M + m) * s.N + n] = static_cast<int32_t>(acc);
        }
    }
  }

  Shape shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 a, int8 b)");
    const auto &a = w.get("a"), &b = w.get("b");
    if (a.size() != 3 || b.size() != 3 || a[2] != b[1])
      detail::bad_workload(w, "needs a=[B,M,K] and b=[Bb,K,N]");
    if (b[0] != 1 && b[0] != a[0]) detail::bad_workload(w, "b's batch must be 1 or a's batch");
    for (int64_t v : {a[0], a[1], a[2], b[2]})
      if (v < 1) detail::bad_workload(w, "sizes must be positive");
    if (a[2] > kMaxK)
      detail::bad_workload(w, "K > " + std::to_string(kMaxK) + " could overflow the int32 sum");
    return {a[0], b[0], a[1], b[2], a[2]};
  }
};

const BatchMatmulInt8Template& instance() {
  static const BatchMatmulInt8Template t;
  return t;
}

}  // namespace

const OpTemplate& batch_matmul_int8_template() { return instance(); }

Workload batch_matmul_int8_workload(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K) {
  return Workload{"batch_matmul_int8.x86", {{"a", {B, M, K}}, {"b", {Bb, K, N}}}, "uint8"};
}

std::vector<int8_t> pack_batch_matmul_int8(const int8_t* B, int64_t Bb, int64_t K, int64_t N,
                                           int64_t bn) {
  int64_t nb = (N + bn - 1) / bn, KO = (K + 3) / 4;
  int64_t per = nb * KO * bn * 4;
  std::vector<int8_t> out(static_cast<size_t>(Bb * per), 0);
  for (int64_t b = 0; b < Bb; ++b)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        out[static_cast<size_t>(b * per + (((n / bn) * KO + k / 4) * bn + n % bn) * 4 + k % 4)] =
            B[(b * K + k) * N + n];
  return out;
}

}  // namespace kiln::ops
