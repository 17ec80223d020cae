#include "ops/dense_int8_amx_template.h"

#include <algorithm>
#include <stdexcept>

#include "ops/amx_dense_template.h"
#include "ops/dense_int8_amx.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using schedule::Config;
using schedule::ConfigSpace;

namespace {

constexpr const char* kName = "dense_int8_amx.x86";

struct Shape {
  int64_t M, N, K;
  int64_t blocks() const { return (N + kAmxBlockCols - 1) / kAmxBlockCols; }
};

class DenseInt8AmxTemplate final : public detail::AmxDenseTemplate {
 public:
  std::string name() const override { return kName; }
  detail::AmxDenseShape dims(const Workload& w) const override {
    Shape d = shape(w);
    return {d.M, d.N, d.K};
  }

  TemplateInstance compute(const Workload& w, const Config&) const override {
    Shape d = shape(w);
    Tensor A = placeholder({d.M, d.K}, DataType::u8(), "A");
    Tensor B = placeholder({d.blocks(), d.K / 4, kAmxBlockCols, 4}, DataType::i8(), "B_packed");
    IterVar ko = reduce_axis(d.K / 4, "ko");
    Tensor C = ir::compute(
        {d.M, d.N},
        [&](const std::vector<Var>& i) {
          std::vector<Expr> a, b;
          for (int j = 0; j < 4; ++j) {
            a.push_back(at(A, i[0], ko->var * 4 + j));
            b.push_back(
                at(B, floordiv(i[1], kAmxBlockCols), ko->var, floormod(i[1], kAmxBlockCols), j));
          }
          return sum(dot4_u8i8(make_int(0, DataType::i32()), a, b), {ko});
        },
        "C");
    return {{A, B}, C};
  }

  Stmt build_loops(const Workload& w, const Config& cfg, const std::vector<Buffer>& args,
                   const TaskEpilogue& epilogue) const override {
    Shape d = shape(w);
    if (args.size() != (epilogue ? 2u : 3u))
      detail::bad_workload(w, epilogue ? "takes A and B_packed" : "takes A, B_packed and C");
    return dense_int8_amx_loops(args[0], args[1], epilogue ? Buffer() : args[2], d.M, d.N, d.K,
                                cfg.knob("panels_per_task"), epilogue);
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w, const Config&) const override {
    Shape d = shape(w);
    return {{d.M, d.K}, {d.blocks(), d.K / 4, kAmxBlockCols, 4}};
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

  void reference_typed(const Workload& w, const Config&, const std::vector<const void*>& in,
                       void* output) const override {
    Shape d = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    const int64_t KG = d.K / 4;
    auto* A = static_cast<const uint8_t*>(in[0]);
    auto* B = static_cast<const int8_t*>(in[1]);
    auto* C = static_cast<int32_t*>(output);
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < d.K; ++k)
          acc += int64_t(A[m * d.K + k]) *
                 B[(((n / kAmxBlockCols) * KG + k / 4) * kAmxBlockCols + n % kAmxBlockCols) * 4 +
                   k % 4];
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
    if (!dense_int8_amx_supports(a[0], b[1], a[1]))
      detail::bad_workload(w, "needs positive sizes and K a multiple of 4 within the int32 bound");
    return {a[0], b[1], a[1]};
  }
};

}  // namespace

const OpTemplate& dense_int8_amx_template() {
  static const DenseInt8AmxTemplate t;
  return t;
}

Workload dense_int8_amx_workload(int64_t M, int64_t N, int64_t K) {
  return Workload{kName, {{"data", {M, K}}, {"weight", {K, N}}}, "uint8"};
}

}  // namespace kiln::ops
