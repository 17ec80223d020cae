#include "ops/dense_bf16_amx_template.h"

#include <stdexcept>

#include "ir/stmt.h"
#include "ops/amx_dense_template.h"
#include "ops/dense_bf16.h"
#include "ops/dense_int8_amx.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using schedule::Config;
using schedule::ConfigSpace;

namespace {

constexpr const char* kName = "dense_bf16_amx.x86";

struct Shape {
  int64_t M, N, K;
  int64_t pairs() const { return (K + 1) / 2; }
  int64_t blocks() const { return (N + kAmxBlockCols - 1) / kAmxBlockCols; }
};

class DenseBf16AmxTemplate final : public detail::AmxDenseTemplate {
 public:
  std::string name() const override { return kName; }
  detail::AmxDenseShape dims(const Workload& w) const override {
    Shape d = shape(w);
    return {d.M, d.N, d.K};
  }

  TemplateInstance compute(const Workload& w, const Config&) const override {
    Shape d = shape(w);
    return detail::dense_bf16_compute(d.M, d.N, d.K, kAmxBlockCols);
  }

  // A rounded to bf16 into a workspace (each element once, rows in
  // parallel), then the tile GEMM on it.
  Stmt build_loops(const Workload& w, const Config& cfg, const std::vector<Buffer>& args,
                   const TaskEpilogue& epilogue) const override {
    Shape d = shape(w);
    if (args.size() != (epilogue ? 2u : 3u))
      detail::bad_workload(w, epilogue ? "takes A and B_packed" : "takes A, B_packed and C");
    const int64_t K2 = 2 * d.pairs();
    Buffer Ab = make_buffer("A_bf16", DataType::bf16(), {make_int(d.M), make_int(K2)});
    Var m("m", DataType::i64()), k("k", DataType::i64());
    // Past an odd K a zero, the load clamped to a valid address.
    Expr value = d.K % 2 == 0
                     ? cast(DataType::bf16(), load(args[0], m * d.K + k))
                     : select(k < d.K,
                              cast(DataType::bf16(),
                                   load(args[0], m * d.K + min(Expr(k), make_int(d.K - 1)))),
                              make_float(0, DataType::bf16()));
    Stmt convert = make_for(
        m, make_int(0), make_int(d.M), ForKind::Parallel,
        make_for(k, make_int(0), make_int(K2), ForKind::Serial, make_store(Ab, value, m * K2 + k)));
    Stmt gemm = dense_bf16_amx_loops(Ab, args[1], epilogue ? Buffer() : args[2], d.M, d.N, K2,
                                     cfg.knob("panels_per_task"), epilogue);
    return make_stmt<AllocateNode>(Ab, make_int(d.M * K2), make_seq({convert, gemm}));
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w, const Config&) const override {
    Shape d = shape(w);
    return {{d.M, d.K}, {d.blocks(), d.pairs(), kAmxBlockCols, 2}};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    shape(w);
    return {DataType::f32(), DataType::bf16()};
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": a bf16 template has only reference_typed()");
  }

  // A rounded to bf16 as the kernel does, the products of bf16 values summed
  // in double.
  void reference_typed(const Workload& w, const Config&, const std::vector<const void*>& in,
                       void* output) const override {
    Shape d = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    const int64_t KO = d.pairs();
    auto* A = static_cast<const float*>(in[0]);
    auto* B = static_cast<const uint16_t*>(in[1]);
    auto* C = static_cast<float*>(output);
    for (int64_t m = 0; m < d.M; ++m)
      for (int64_t n = 0; n < d.N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < d.K; ++k) {
          float a = bf16_to_f32_value(f32_to_bf16_value(A[m * d.K + k]));
          float b = bf16_to_f32_value(
              B[(((n / kAmxBlockCols) * KO + k / 2) * kAmxBlockCols + n % kAmxBlockCols) * 2 +
                k % 2]);
          acc += double(a) * b;
        }
        C[m * d.N + n] = static_cast<float>(acc);
      }
  }

  Shape shape(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "bfloat16")
      detail::bad_workload(w, name() + " takes dtype bfloat16 (bf16 operands, float32 sums)");
    const auto &a = w.get("data"), &b = w.get("weight");
    if (a.size() != 2 || b.size() != 2 || a[1] != b[0])
      detail::bad_workload(w, "needs data=[M,K] and weight=[K,N]");
    if (a[0] < 1 || a[1] < 1 || b[1] < 1) detail::bad_workload(w, "sizes must be positive");
    return {a[0], b[1], a[1]};
  }
};

}  // namespace

const OpTemplate& dense_bf16_amx_template() {
  static const DenseBf16AmxTemplate t;
  return t;
}

Workload dense_bf16_amx_workload(int64_t M, int64_t N, int64_t K) {
  return Workload{kName, {{"data", {M, K}}, {"weight", {K, N}}}, "bfloat16"};
}

}  // namespace kiln::ops
