#include "ops/dense_int8_amx.h"

#include <algorithm>
#include <stdexcept>

#include "ir/stmt.h"
#include "ops/amx_task_output.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

namespace {

// 255 * 128 * K must stay below 2^31 for the int32 accumulator to be exact
// (dense_int8.x86's bound).
constexpr int64_t kMaxK = 65792;

// The packed layout shared by both element types: Bp[nb][K / g][16][g].
template <typename T>
std::vector<T> pack_blocks(const T* B, int64_t K, int64_t N, int64_t g) {
  int64_t nb = (N + kAmxBlockCols - 1) / kAmxBlockCols, KG = K / g;
  std::vector<T> out(static_cast<size_t>(nb * KG * kAmxBlockCols * g), T(0));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      out[(((n / kAmxBlockCols) * KG + k / g) * kAmxBlockCols + n % kAmxBlockCols) * g + k % g] =
          B[k * N + n];
  return out;
}

// A panel kernel's buffers: A [M, K], B packed [nb][K / g][16][g], C [M, N].
struct PanelBuffers {
  Buffer A, B, C;
};

PanelBuffers panel_buffers(DataType in_t, DataType w_t, DataType out_t, int64_t M, int64_t N,
                           int64_t K, int64_t g) {
  int64_t nb = (N + kAmxBlockCols - 1) / kAmxBlockCols;
  return {make_buffer("A", in_t, {make_int(M), make_int(K)}),
          make_buffer("B_packed", w_t, {make_int(nb), make_int(K / g), make_int(16), make_int(g)}),
          make_buffer("C", out_t, {make_int(M), make_int(N)})};
}

// Tasks of `per_task` panels of 16 rows, the loop over them parallel; a
// task's call configures the tiles once for its full panels (amx_gemm). The
// last task's rows may be fewer: a call of its own shape in the same loop.
// With an epilogue each task runs it on its rows after its call.
Stmt panel_loops(const PanelBuffers& buf, AmxOp op, DataType acc_t, int64_t M, int64_t N, int64_t K,
                 int64_t per_task, const OpTemplate::TaskEpilogue& epilogue) {
  const int64_t rows_per_task = 16 * per_task;
  AmxTaskOutput out(buf.C, acc_t, std::min(rows_per_task, M), N, epilogue);
  auto rows_at = [&](Expr m0, int64_t rows) {
    return out.rows(m0, rows, [&](const Expr& c) {
      return make_stmt<EvaluateNode>(
          amx_gemm(op, c, load(buf.A, m0 * K), load(buf.B, make_int(0)), rows, N, K, K, N));
    });
  };
  const int64_t full = M / rows_per_task, rest = M % rows_per_task;
  Var t("task", DataType::i64());
  Expr m0 = t * make_int(rows_per_task);
  Stmt body = rows_at(m0, rows_per_task);
  if (rest > 0)
    body = full > 0 ? make_if(t < make_int(full), body, rows_at(m0, rest)) : rows_at(m0, rest);
  int64_t tasks = full + (rest > 0 ? 1 : 0);
  return make_for(t, make_int(0), make_int(tasks), ForKind::Parallel, out.task_body(body));
}

LoweredFunc panel_kernel(const std::string& name, AmxOp op, DataType in_t, DataType w_t,
                         DataType out_t, int64_t M, int64_t N, int64_t K, int64_t g) {
  PanelBuffers buf = panel_buffers(in_t, w_t, out_t, M, N, K, g);
  return LoweredFunc{name,
                     {buf.A, buf.B, buf.C},
                     panel_loops(buf, op, out_t, M, N, K, amx_panels_per_task(M), nullptr)};
}

}  // namespace

int64_t amx_panels_per_task(int64_t M) {
  // At least 16 tasks once M has 16 panels (threads balance), and otherwise
  // as many panels per configuration as that allows.
  return std::max<int64_t>(1, (M / 16) / 16);
}

bool dense_int8_amx_supports(int64_t M, int64_t N, int64_t K) {
  return M >= 1 && N >= 1 && K >= 4 && K % 4 == 0 && K <= kMaxK;
}

std::vector<int8_t> pack_dense_int8_amx_weight(const int8_t* B_KN, int64_t K, int64_t N) {
  if (K % 4 != 0) throw std::invalid_argument("dense_int8_amx: K must be a multiple of 4");
  return pack_blocks(B_KN, K, N, 4);
}

LoweredFunc dense_int8_amx_kernel(const std::string& name, int64_t M, int64_t N, int64_t K) {
  if (!dense_int8_amx_supports(M, N, K))
    throw std::invalid_argument("dense_int8_amx: M=" + std::to_string(M) +
                                " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                " unsupported (K must be a positive multiple of 4, at most " +
                                std::to_string(kMaxK) + ")");
  return panel_kernel(name, AmxOp::DpbusdU8I8, DataType::u8(), DataType::i8(), DataType::i32(), M,
                      N, K, 4);
}

Stmt dense_int8_amx_loops(const Buffer& A, const Buffer& B_packed, const Buffer& C, int64_t M,
                          int64_t N, int64_t K, int64_t panels_per_task,
                          const OpTemplate::TaskEpilogue& epilogue) {
  if (!dense_int8_amx_supports(M, N, K) || panels_per_task < 1)
    throw std::invalid_argument("dense_int8_amx: M=" + std::to_string(M) +
                                " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                " panels per task " + std::to_string(panels_per_task) +
                                " unsupported");
  return panel_loops({A, B_packed, C}, AmxOp::DpbusdU8I8, DataType::i32(), M, N, K, panels_per_task,
                     epilogue);
}

std::vector<int64_t> amx_panel_choices(int64_t M) {
  constexpr int64_t kMaxPanelsPerTask = 32;
  std::vector<int64_t> out;
  for (int64_t p = 1; p <= std::min((M + 15) / 16, kMaxPanelsPerTask); p *= 2) out.push_back(p);
  return out;
}

int64_t amx_fallback_panels(int64_t M) {
  int64_t want = amx_panels_per_task(M), p = 1;
  for (int64_t c : amx_panel_choices(M))
    if (c <= want) p = c;
  return p;
}

Stmt dense_bf16_amx_loops(const Buffer& A_bf16, const Buffer& B_packed, const Buffer& C, int64_t M,
                          int64_t N, int64_t K, int64_t panels_per_task,
                          const OpTemplate::TaskEpilogue& epilogue) {
  if (M < 1 || N < 1 || K < 2 || K % 2 != 0 || panels_per_task < 1)
    throw std::invalid_argument("dense_bf16_amx: M=" + std::to_string(M) +
                                " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                " panels per task " + std::to_string(panels_per_task) +
                                " unsupported (K must be a positive even number)");
  return panel_loops({A_bf16, B_packed, C}, AmxOp::Dpbf16ps, DataType::f32(), M, N, K,
                     panels_per_task, epilogue);
}

std::vector<uint16_t> pack_dense_bf16_amx_weight(const uint16_t* B_KN, int64_t K, int64_t N) {
  if (K % 2 != 0) throw std::invalid_argument("dense_bf16_amx: K must be even");
  return pack_blocks(B_KN, K, N, 2);
}

LoweredFunc dense_bf16_amx_kernel(const std::string& name, int64_t M, int64_t N, int64_t K) {
  if (M < 1 || N < 1 || K < 2 || K % 2 != 0)
    throw std::invalid_argument("dense_bf16_amx: M=" + std::to_string(M) +
                                " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                " unsupported (K must be a positive even number)");
  return panel_kernel(name, AmxOp::Dpbf16ps, DataType::bf16(), DataType::bf16(), DataType::f32(), M,
                      N, K, 2);
}

}  // namespace kiln::ops
