// Hand-built loop IR through the JIT, checked against plain C++.
#include "codegen/codegen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "codegen/helpers.h"
#include "runtime/c_runtime_api.h"

namespace kiln::codegen::test {
namespace {

// C[i] = A[i] + B[i]: 16-lane body plus a scalar tail for n % 16.
LoweredFunc vector_add(int64_t n, const std::string& name = "vadd") {
  Buffer A = make_buffer("A", DataType::f32(), {n});
  Buffer B = make_buffer("B", DataType::f32(), {n});
  Buffer C = make_buffer("C", DataType::f32(), {n});
  Var i("i"), j("j");
  Expr idx = ramp(i * 16, 1, 16);
  Stmt body = serial(i, 0, n / 16, make_store(C, load(A, idx) + load(B, idx), idx));
  Stmt tail = serial(j, n / 16 * 16, n % 16, make_store(C, load(A, j) + load(B, j), j));
  return {name, {A, B, C}, seq({body, tail})};
}

TEST(Codegen, VectorAddWithScalarTail) {
  const int64_t n = 1000;
  auto k = jit(vector_add(n));
  auto a = random_vector<float>(n, -10, 10, 1), b = random_vector<float>(n, -10, 10, 2);
  std::vector<float> c(n, -1);
  ASSERT_EQ(k({a.data(), b.data(), c.data()}), 0);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST(Codegen, StridedGatherAndScatter) {
  const int64_t n = 64;
  Buffer A = make_buffer("A", DataType::f32(), {3 * n});
  Buffer B = make_buffer("B", DataType::f32(), {2 * n});
  Var i("i");
  // B[2*(16i + l)] = A[3*(16i + l)] * 2 for lanes l.
  Stmt s =
      serial(i, 0, n / 16, make_store(B, load(A, ramp(i * 48, 3, 16)) * 2.0f, ramp(i * 32, 2, 16)));
  auto k = jit({"strided", {A, B}, s});
  auto a = random_vector<float>(3 * n, -5, 5);
  std::vector<float> b(2 * n, 7.0f);
  ASSERT_EQ(k({a.data(), b.data()}), 0);
  for (int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(b[2 * j], a[3 * j] * 2) << j;
    ASSERT_EQ(b[2 * j + 1], 7.0f) << j;  // untouched
  }
}

TEST(Codegen, IndirectGatherThroughIndexBuffer) {
  const int64_t n = 128, m = 1000;
  Buffer A = make_buffer("A", DataType::f32(), {m});
  Buffer I = make_buffer("I", DataType::i64(), {n});
  Buffer B = make_buffer("B", DataType::f32(), {n});
  Var i("i");
  Expr idx = ramp(i * 16, 1, 16);
  Stmt s = serial(i, 0, n / 16, make_store(B, load(A, load(I, idx)), idx));
  auto k = jit({"indirect", {A, I, B}, s});
  auto a = random_vector<float>(m, -5, 5);
  auto ind = random_vector<int64_t>(n, 0, m - 1);
  std::vector<float> b(n);
  ASSERT_EQ(k({a.data(), ind.data(), b.data()}), 0);
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(b[j], a[ind[j]]);
}

// y[b, i] = scale * sum_k W[i, k] x[b, k], rows in parallel, a Local
// accumulator per row; the closure captures the batch loop var, a let var and
// every buffer.
TEST(Codegen, ParallelMatVecWithLocalAccumulator) {
  const int64_t batch = 3, M = 67, K = 48;
  Buffer W = make_buffer("W", DataType::f32(), {M * K});
  Buffer X = make_buffer("X", DataType::f32(), {batch * K});
  Buffer Y = make_buffer("Y", DataType::f32(), {batch * M});
  Buffer acc = make_buffer("acc", DataType::f32(), {16}, MemScope::Local);
  Var b("b"), i("i"), k("k"), scale("scale", DataType::f32());
  Expr lanes = ramp(0, 1, 16);
  Stmt row =
      allocate(acc, 16,
               seq({make_store(acc, broadcast(0.0f, 16), lanes),
                    serial(k, 0, K / 16,
                           make_store(acc,
                                      load(acc, lanes) + load(W, ramp(i * K + k * 16, 1, 16)) *
                                                             load(X, ramp(b * K + k * 16, 1, 16)),
                                      lanes)),
                    make_store(Y, Expr(0.0f), b * M + i),
                    serial(k, 0, 16, make_store(Y, load(Y, b * M + i) + load(acc, k), b * M + i)),
                    make_store(Y, load(Y, b * M + i) * scale, b * M + i)}));
  Stmt s = serial(
      b, 0, batch,
      let_stmt(scale, cast(DataType::f32(), b + 1), make_for(i, 0, M, ForKind::Parallel, row)));
  auto f = jit({"matvec", {W, X, Y}, s});
  auto w = random_vector<float>(M * K, -1, 1, 3), x = random_vector<float>(batch * K, -1, 1, 4);
  std::vector<float> y(batch * M);
  ASSERT_EQ(f({w.data(), x.data(), y.data()}), 0);
  for (int64_t bb = 0; bb < batch; ++bb)
    for (int64_t r = 0; r < M; ++r) {
      double ref = 0;
      for (int64_t kk = 0; kk < K; ++kk) ref += double(w[r * K + kk]) * x[bb * K + kk];
      ASSERT_NEAR(y[bb * M + r], ref * (bb + 1), 1e-4 * (bb + 1)) << bb << "," << r;
    }
}

TEST(Codegen, NestedParallelRunsAndGlobalWorkspace) {
  const int64_t M = 9, N = 37;
  Buffer A = make_buffer("A", DataType::f32(), {M * N});
  Buffer C = make_buffer("C", DataType::f32(), {M * N});
  Buffer T = make_buffer("T", DataType::f32(), {N});  // global: heap workspace per row
  Var i("i"), j("j");
  Stmt inner = allocate(
      T, N,
      seq({make_for(j, 0, N, ForKind::Parallel, make_store(T, load(A, i * N + j) * 2.0f, j)),
           serial(j, 0, N, make_store(C, load(T, N - 1 - j) + 1.0f, i * N + j))}));
  auto f = jit({"nested", {A, C}, make_for(i, 0, M, ForKind::Parallel, inner)});
  auto a = random_vector<float>(M * N, -3, 3);
  std::vector<float> c(M * N);
  ASSERT_EQ(f({a.data(), c.data()}), 0);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t q = 0; q < N; ++q) ASSERT_EQ(c[r * N + q], a[r * N + N - 1 - q] * 2 + 1);
}

TEST(Codegen, IfLetSelect) {
  const int64_t n = 100;
  Buffer A = make_buffer("A", DataType::f32(), {n});
  Buffer C = make_buffer("C", DataType::f32(), {n});
  Buffer D = make_buffer("D", DataType::f32(), {n});
  Var i("i"), t("t", DataType::f32()), u("u", DataType::f32());
  Stmt s =
      serial(i, 0, n,
             let_stmt(t, load(A, i) * 2.0f,
                      seq({make_if(t > 0.0f, make_store(C, t, i), make_store(C, -t, i)),
                           make_if(i < 10, make_store(D, let_expr(u, t + 1.0f, u * u), i)),
                           make_if(i >= 10, make_store(D, select(t < 1.0f, t, Expr(1.0f)), i))})));
  auto f = jit({"iflet", {A, C, D}, s});
  auto a = random_vector<float>(n, -2, 2);
  std::vector<float> c(n), d(n);
  ASSERT_EQ(f({a.data(), c.data(), d.data()}), 0);
  for (int64_t k = 0; k < n; ++k) {
    float tv = a[k] * 2;
    ASSERT_EQ(c[k], std::fabs(tv));
    ASSERT_EQ(d[k], k < 10 ? (tv + 1) * (tv + 1) : (tv < 1 ? tv : 1.0f));
  }
}

// Runs out[i] = op(a[i], b[i]) for int64 values, scalar and 16 lanes.
template <typename T, typename Ref>
void check_int_binary(DataType t, ExprKind kind, const std::vector<T>& a, const std::vector<T>& b,
                      Ref ref, bool const_divisor) {
  const int64_t n = static_cast<int64_t>(a.size());
  ASSERT_EQ(n % 16, 0);
  for (int lanes : {1, 16}) {
    Buffer A = make_buffer("A", t, {n}), B = make_buffer("B", t, {n}), C = make_buffer("C", t, {n});
    Var i("i");
    Expr idx = lanes == 1 ? Expr(i) : ramp(i * 16, 1, 16);
    Expr rhs = const_divisor ? make_const(t.with_lanes(lanes), double(b[0])) : load(B, idx);
    Stmt s = serial(i, 0, n / lanes, make_store(C, make_binary(kind, load(A, idx), rhs), idx));
    auto f = jit({"binop", {A, B, C}, s});
    std::vector<T> c(n);
    ASSERT_EQ(f({const_cast<T*>(a.data()), const_cast<T*>(b.data()), c.data()}), 0);
    for (int64_t k = 0; k < n; ++k) {
      T bk = const_divisor ? b[0] : b[k];
      ASSERT_EQ(c[k], ref(a[k], bk)) << a[k] << " op " << bk << " lanes " << lanes;
    }
  }
}

int64_t floordiv_ref(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floormod_ref(int64_t a, int64_t b) { return a - floordiv_ref(a, b) * b; }

TEST(Codegen, FloorDivModOnNegativeNumbers) {
  std::vector<int64_t> a;
  for (int64_t v = -40; v < 40; ++v) a.push_back(v);
  auto divisors = random_vector<int64_t>(a.size(), -9, 9, 5);
  for (auto& d : divisors) d = d == 0 ? 3 : d;
  auto fd = [](auto x, auto y) { return decltype(x)(floordiv_ref(x, y)); };
  auto fm = [](auto x, auto y) { return decltype(x)(floormod_ref(x, y)); };
  check_int_binary<int64_t>(DataType::i64(), ExprKind::FloorDiv, a, divisors, fd, false);
  check_int_binary<int64_t>(DataType::i64(), ExprKind::FloorMod, a, divisors, fm, false);
  for (int64_t d : {1, 2, 3, 7, 8, 16, -1, -3, -4}) {
    std::vector<int64_t> b(a.size(), d);
    check_int_binary<int64_t>(DataType::i64(), ExprKind::FloorDiv, a, b, fd, true);
    check_int_binary<int64_t>(DataType::i64(), ExprKind::FloorMod, a, b, fm, true);
  }
  std::vector<int32_t> a32(a.begin(), a.end()), d32(divisors.begin(), divisors.end());
  check_int_binary<int32_t>(DataType::i32(), ExprKind::FloorDiv, a32, d32, fd, false);
  check_int_binary<int32_t>(DataType::i32(), ExprKind::FloorMod, a32, d32, fm, false);
  // Truncating Div / Mod are C's.
  auto td = [](auto x, auto y) { return decltype(x)(x / y); };
  auto tm = [](auto x, auto y) { return decltype(x)(x % y); };
  check_int_binary<int64_t>(DataType::i64(), ExprKind::Div, a, divisors, td, false);
  check_int_binary<int64_t>(DataType::i64(), ExprKind::Mod, a, divisors, tm, false);
  std::vector<uint32_t> ua(80), ub(80);
  for (int k = 0; k < 80; ++k) ua[k] = 4000000000u - k * 7919, ub[k] = 1 + k % 13;
  check_int_binary<uint32_t>(DataType(TypeCode::UInt, 32), ExprKind::Div, ua, ub, td, false);
  check_int_binary<uint32_t>(DataType(TypeCode::UInt, 32), ExprKind::FloorMod, ua, ub, tm, false);
  auto mn = [](auto x, auto y) { return std::min(x, y); };
  auto mx = [](auto x, auto y) { return std::max(x, y); };
  check_int_binary<int64_t>(DataType::i64(), ExprKind::Min, a, divisors, mn, false);
  check_int_binary<uint32_t>(DataType(TypeCode::UInt, 32), ExprKind::Max, ua, ub, mx, false);
}

TEST(Codegen, FloatMinMaxModAndFloorDiv) {
  const int64_t n = 64;
  Buffer A = make_buffer("A", DataType::f32(), {n}), B = make_buffer("B", DataType::f32(), {n});
  std::vector<Buffer> outs;
  for (const char* name : {"mn", "mx", "md", "fd", "fm"})
    outs.push_back(make_buffer(name, DataType::f32(), {n}));
  Var i("i");
  Expr idx = ramp(i * 16, 1, 16), a = load(A, idx), b = load(B, idx);
  Stmt s = serial(i, 0, n / 16,
                  seq({make_store(outs[0], min(a, b), idx), make_store(outs[1], max(a, b), idx),
                       make_store(outs[2], a % b, idx), make_store(outs[3], floordiv(a, b), idx),
                       make_store(outs[4], floormod(a, b), idx)}));
  auto f = jit({"fminmax", {A, B, outs[0], outs[1], outs[2], outs[3], outs[4]}, s});
  auto av = random_vector<float>(n, -10, 10, 7), bv = random_vector<float>(n, 0.5, 3, 8);
  std::vector<std::vector<float>> o(5, std::vector<float>(n));
  ASSERT_EQ(
      f({av.data(), bv.data(), o[0].data(), o[1].data(), o[2].data(), o[3].data(), o[4].data()}),
      0);
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(o[0][k], std::min(av[k], bv[k]));
    EXPECT_EQ(o[1][k], std::max(av[k], bv[k]));
    EXPECT_EQ(o[2][k], std::fmod(av[k], bv[k]));
    EXPECT_EQ(o[3][k], std::floor(av[k] / bv[k]));
    EXPECT_NEAR(o[4][k], av[k] - std::floor(av[k] / bv[k]) * bv[k], 1e-5);
  }
}

TEST(Codegen, BoolBuffersAndLogic) {
  const int64_t n = 64;
  Buffer A = make_buffer("A", DataType::f32(), {n});
  Buffer P = make_buffer("P", DataType::boolean(), {n});
  Buffer Q = make_buffer("Q", DataType::boolean(), {n});
  Buffer C = make_buffer("C", DataType::i32(), {n});
  Var i("i"), j("j");
  Expr v = ramp(i * 16, 1, 16);
  Stmt s = seq({serial(i, 0, n / 16, make_store(P, load(A, v) > 0.0f, v)),
                serial(j, 0, n,
                       seq({make_store(Q,
                                       logical_or(logical_not(load(P, j)),
                                                  logical_and(load(A, j) > 1.0f, j < 5)),
                                       j),
                            make_store(C, cast(DataType::i32(), load(Q, j)), j)}))});
  auto f = jit({"bools", {A, P, Q, C}, s});
  auto a = random_vector<float>(n, -3, 3);
  std::vector<uint8_t> p(n, 9), q(n, 9);
  std::vector<int32_t> c(n);
  ASSERT_EQ(f({a.data(), p.data(), q.data(), c.data()}), 0);
  for (int64_t k = 0; k < n; ++k) {
    ASSERT_EQ(p[k], a[k] > 0 ? 1 : 0);
    bool qk = !(a[k] > 0) || (a[k] > 1 && k < 5);
    ASSERT_EQ(q[k], qk ? 1 : 0);
    ASSERT_EQ(c[k], qk ? 1 : 0);
  }
}

TEST(Codegen, TensorLevelNodesAreRejected) {
  Buffer A = make_buffer("A", DataType::f32(), {4});
  Var x("x", DataType::f32());
  // A free variable: not a loop variable, let or argument.
  EXPECT_THROW(jit({"unbound", {A}, make_store(A, x, 0)}), std::runtime_error);
  Buffer other = make_buffer("other", DataType::f32(), {4});
  EXPECT_THROW(jit({"nobuf", {A}, make_store(other, Expr(1.0f), 0)}), std::runtime_error);
  auto c = jit({"ok", {A}, make_store(A, Expr(1.0f), 0)});
  EXPECT_THROW(c.module->get_function("missing"), std::runtime_error);
  EXPECT_THROW(jit_compile({{"dup", {A}, make_store(A, Expr(1.0f), 0)},
                            {"dup", {A}, make_store(A, Expr(2.0f), 0)}},
                           host()),
               std::runtime_error);
}

TEST(Codegen, ManyKernelsInOneModule) {
  auto m = jit_compile({vector_add(32, "add32"), vector_add(48, "add48")}, host());
  EXPECT_EQ(m->function_names(), (std::vector<std::string>{"add32", "add48"}));
  std::vector<float> a(48, 1), b(48, 2), c(48);
  void* args[] = {a.data(), b.data(), c.data()};
  ASSERT_EQ(m->get_function("add48")(args), 0);
  EXPECT_EQ(c[47], 3.0f);
}

TEST(Codegen, AssemblyUsesZmmOnAvx512) {
  if (!host().has_feature("avx512f")) GTEST_SKIP() << "host has no AVX-512";
  std::string asm_text = emit_assembly({vector_add(1024)}, host());
  EXPECT_NE(asm_text.find("zmm"), std::string::npos);
  std::string ir = emit_llvm_ir({vector_add(1024)}, host(), false);
  EXPECT_NE(ir.find("\"prefer-vector-width\"=\"512\""), std::string::npos);
  EXPECT_NE(ir.find("noalias"), std::string::npos);
}

TEST(Codegen, AvxTwoTargetStaysInYmm) {
  Target t = Target::parse("llvm -mtriple=" + host().triple + " -mcpu=haswell");
  std::string asm_text = emit_assembly({vector_add(1024)}, t);
  EXPECT_EQ(asm_text.find("zmm"), std::string::npos);
  EXPECT_NE(asm_text.find("ymm"), std::string::npos);
}

TEST(Codegen, FastMathTargetCompilesAndRuns) {
  Target t = host();
  t.fast_math = true;
  auto k = jit(vector_add(100), t);
  std::vector<float> a(100, 1.5f), b(100, 2.0f), c(100);
  ASSERT_EQ(k({a.data(), b.data(), c.data()}), 0);
  EXPECT_EQ(c[99], 3.5f);
}

}  // namespace
}  // namespace kiln::codegen::test
