#include "ops/batch_matmul_int8_amx.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ir/stmt.h"
#include "ops/amx_task_output.h"
#include "ops/dense_int8_amx.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using schedule::Config;
using schedule::ConfigSpace;

namespace {

constexpr const char* kName = "batch_matmul_int8_amx.x86";

// 255 * 128 * K must stay below 2^31 for the int32 accumulator to be exact
// (batch_matmul_int8.x86's bound).
constexpr int64_t kMaxK = 65792;

// The fallback wants at least this many parallel tasks (amx_panels_per_task's
// rule for dense, counted over all batches).
constexpr int64_t kMinTasks = 16;

struct Shape {
  int64_t B, Bb, M, N, K;
  int64_t blocks() const { return (N + kAmxBlockCols - 1) / kAmxBlockCols; }
  int64_t panels() const { return (M + 15) / 16; }
  // Bytes of one batch's packed B.
  int64_t b_stride() const { return blocks() * K * kAmxBlockCols; }
};

int64_t fallback_panels(const Shape& s) {
  int64_t p = 1;
  for (int64_t c : amx_panel_choices(s.M))
    if (s.B * ((s.panels() + c - 1) / c) >= kMinTasks) p = c;
  return p;
}

// The kernel: tasks (batch, row range of 16 * per_task rows) in parallel,
// each one amx_gemm on its batch's A rows, B and C rows. A batch's last row
// task may be shorter: a call of its own shape in the same loop.
// With an epilogue the tiles write the task's accumulator and the epilogue
// finishes the task's rows (row0 counts over all batches: [B * M, N]).
Stmt bmm_loops(const Shape& s, const Buffer& A, const Buffer& Bp, const Buffer& C, int64_t per_task,
               const OpTemplate::TaskEpilogue& epilogue) {
  const int64_t rows_per_task = 16 * per_task;
  AmxTaskOutput output(C, DataType::i32(), std::min(rows_per_task, s.M), s.N, epilogue);
  const int64_t full = s.M / rows_per_task, rest = s.M % rows_per_task;
  const int64_t per_batch = full + (rest > 0 ? 1 : 0);
  Var t("task", DataType::i64());
  Expr b = t / make_int(per_batch), j = t % make_int(per_batch);
  Expr row0 = b * make_int(s.M) + j * make_int(rows_per_task);  // row of A and C
  Expr b0 = s.Bb == 1 ? make_int(0) : b * make_int(s.b_stride());
  auto gemm = [&](int64_t rows) -> Stmt {
    return output.rows(row0, rows, [&](const Expr& c) {
      return make_stmt<EvaluateNode>(amx_gemm(AmxOp::DpbusdU8I8, c, load(A, row0 * make_int(s.K)),
                                              load(Bp, b0), rows, s.N, s.K, s.K, s.N));
    });
  };
  Stmt body = gemm(rows_per_task);
  if (rest > 0) body = full > 0 ? make_if(j < make_int(full), body, gemm(rest)) : gemm(rest);
  return make_for(t, make_int(0), make_int(s.B * per_batch), ForKind::Parallel,
                  output.task_body(body));
}

class BatchMatmulInt8AmxTemplate final : public OpTemplate {
 public:
  std::string name() const override { return kName; }

  ConfigSpace space(const Workload& w) const override {
    ConfigSpace space;
    space.define_knob("panels_per_task", amx_panel_choices(shape(w).M));
    return space;
  }

  Config fallback(const Workload& w, const Isa&) const override {
    return detail::KnobValues().knob("panels_per_task", fallback_panels(shape(w))).in(space(w));
  }

  // batch_matmul_int8.x86's reduction with 16-column blocks and no K tail:
  // what fused epilogues, the interpreter and the reference read.
  TemplateInstance compute(const Workload& w, const Config&) const override {
    Shape s = shape(w);
    Tensor A = placeholder({s.B, s.M, s.K}, DataType::u8(), "A");
    Tensor B =
        placeholder({s.Bb, s.blocks(), s.K / 4, kAmxBlockCols, 4}, DataType::i8(), "B_packed");
    IterVar ko = reduce_axis(s.K / 4, "ko");
    bool broadcast = s.Bb == 1;
    Tensor C = ir::compute(
        {s.B, s.M, s.N},
        [&](const std::vector<Var>& i) {
          Expr bi = broadcast ? Expr(0) : Expr(i[0]);
          std::vector<Expr> a, b;
          for (int j = 0; j < 4; ++j) {
            a.push_back(at(A, i[0], i[1], ko->var * 4 + j));
            b.push_back(at(B, bi, floordiv(i[2], kAmxBlockCols), ko->var,
                           floormod(i[2], kAmxBlockCols), j));
          }
          return sum(dot4_u8i8(make_int(0, DataType::i32()), a, b), {ko});
        },
        "C");
    return {{A, B}, C};
  }

  // A row of C per step, batches and rows in parallel: correct for any
  // shape, and not the code that runs (build_loops() is).
  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config&) const override {
    detail::TileStages st = detail::prepare_anchor(sch, inst.anchor, output, name());
    st.tile->compute_at(st.out, st.out->axis(1));
    st.out->parallel(st.out->axis(0));
  }

  bool builds_own_loops() const override { return true; }

  Stmt build_loops(const Workload& w, const Config& cfg, const std::vector<Buffer>& args,
                   const TaskEpilogue& epilogue) const override {
    Shape s = shape(w);
    if (args.size() != (epilogue ? 2u : 3u))
      detail::bad_workload(w, epilogue ? "takes A and B_packed" : "takes A, B_packed and C");
    int64_t per_task = cfg.knob("panels_per_task");
    if (per_task < 1) detail::bad_workload(w, "panels_per_task must be positive");
    return bmm_loops(s, args[0], args[1], epilogue ? Buffer() : args[2], per_task, epilogue);
  }

  double flops(const Workload& w) const override {
    Shape s = shape(w);
    return 2.0 * s.B * s.M * s.N * s.K;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w, const Config&) const override {
    Shape s = shape(w);
    return {{s.B, s.M, s.K}, {s.Bb, s.blocks(), s.K / 4, kAmxBlockCols, 4}};
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

  void reference_typed(const Workload& w, const Config&, const std::vector<const void*>& in,
                       void* output) const override {
    Shape s = shape(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs A and B_packed");
    const int64_t KG = s.K / 4;
    auto* A = static_cast<const uint8_t*>(in[0]);
    auto* B = static_cast<const int8_t*>(in[1]);
    auto* C = static_cast<int32_t*>(output);
    for (int64_t b = 0; b < s.B; ++b) {
      const int8_t* Bb = B + (s.Bb == 1 ? 0 : b) * s.b_stride();
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          int64_t acc = 0;
          for (int64_t k = 0; k < s.K; ++k)
            acc += int64_t(A[(b * s.M + m) * s.K + k]) *
                   Bb[(((n / kAmxBlockCols) * KG + k / 4) * kAmxBlockCols + n % kAmxBlockCols) * 4 +
                      k % 4];
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
    if (!batch_matmul_int8_amx_supports(a[0], b[0], a[1], b[2], a[2]))
      detail::bad_workload(w,
                           "needs positive sizes, b's batch 1 or a's, and K a multiple of 4 "
                           "within the int32 bound (" +
                               std::to_string(kMaxK) + ")");
    return {a[0], b[0], a[1], b[2], a[2]};
  }
};

}  // namespace

const OpTemplate& batch_matmul_int8_amx_template() {
  static const BatchMatmulInt8AmxTemplate t;
  return t;
}

Workload batch_matmul_int8_amx_workload(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K) {
  return Workload{kName, {{"a", {B, M, K}}, {"b", {Bb, K, N}}}, "uint8"};
}

bool batch_matmul_int8_amx_supports(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K) {
  return B >= 1 && M >= 1 && N >= 1 && K >= 4 && K % 4 == 0 && K <= kMaxK && (Bb == 1 || Bb == B);
}

}  // namespace kiln::ops
