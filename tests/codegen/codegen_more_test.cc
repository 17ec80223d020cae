// Error propagation out of parallel loops, dynamic local allocations,
// vector selects, int32 loops and concurrent compilation.
#include <gtest/gtest.h>

#include <thread>

#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

// A workspace too large to allocate makes the kernel return -1, also from
// inside a parallel loop's closure.
TEST(CodegenMore, AllocationFailureReturnsErrorThroughParallelFor) {
  Buffer A = make_buffer("A", DataType::f32(), {8});
  Buffer huge = make_buffer("huge", DataType::f32(), {Expr(int64_t(1) << 58)});
  Var i("i");
  Stmt inner = allocate(huge, Expr(int64_t(1) << 58),
                        seq({make_store(huge, Expr(1.0f), 0), make_store(A, load(huge, 0), i)}));
  auto f = jit({"oom", {A}, make_for(i, 0, 8, ForKind::Parallel, inner)});
  std::vector<float> a(8, 0);
  EXPECT_EQ(f({a.data()}), -1);
}

// A Local allocation whose size is not a constant falls back to the heap.
TEST(CodegenMore, DynamicLocalAllocation) {
  const int64_t n = 40;
  Buffer A = make_buffer("A", DataType::f32(), {n}), C = make_buffer("C", DataType::f32(), {n});
  Buffer T = make_buffer("T", DataType::f32(), {n}, MemScope::Local);
  Var len("len"), j("j");
  // len is read at run time: the compiler cannot fold it to a constant.
  Buffer N = make_buffer("N", DataType::i64(), {1});
  Stmt s = let_stmt(len, load(N, 0),
                    allocate(T, len,
                             seq({serial(j, 0, len, make_store(T, load(A, j) + 1.0f, j)),
                                  serial(j, 0, len, make_store(C, load(T, len - 1 - j), j))})));
  auto f = jit({"dynlocal", {A, N, C}, s});
  auto a = random_vector<float>(n, -1, 1);
  std::vector<int64_t> nn{n};
  std::vector<float> c(n);
  ASSERT_EQ(f({a.data(), nn.data(), c.data()}), 0);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(c[k], a[n - 1 - k] + 1.0f);
}

TEST(CodegenMore, VectorSelectLetAndInt32Loop) {
  const int64_t n = 64;
  Buffer A = make_buffer("A", DataType::f32(), {n}), B = make_buffer("B", DataType::f32(), {n});
  Buffer C = make_buffer("C", DataType::f32(), {n});
  Var i("i", DataType::i32()), v("v", DataType::f32(16));
  Expr idx = ramp(cast(DataType::i64(), i) * 16, 1, 16);
  Expr body = let_expr(v, load(A, idx), select(v > 0.0f, v, load(B, idx) * 2.0f));
  auto f = jit({"vsel",
                {A, B, C},
                make_for(i, make_int(0, DataType::i32()), make_int(n / 16, DataType::i32()),
                         ForKind::Serial, make_store(C, body, idx))});
  auto a = random_vector<float>(n, -1, 1, 1), b = random_vector<float>(n, -1, 1, 2);
  std::vector<float> c(n);
  ASSERT_EQ(f({a.data(), b.data(), c.data()}), 0);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(c[k], a[k] > 0 ? a[k] : b[k] * 2);
}

TEST(CodegenMore, UnrolledAndVectorizedLoopsRunSerially) {
  const int64_t n = 32;
  Buffer A = make_buffer("A", DataType::f32(), {n}), C = make_buffer("C", DataType::f32(), {n});
  Var i("i"), j("j");
  Stmt s = make_for(
      i, 0, 4, ForKind::Unrolled,
      make_for(j, 0, 8, ForKind::Vectorized, make_store(C, load(A, i * 8 + j) * 3.0f, i * 8 + j)));
  auto f = jit({"unroll", {A, C}, s});
  auto a = random_vector<float>(n, -1, 1);
  std::vector<float> c(n);
  ASSERT_EQ(f({a.data(), c.data()}), 0);
  for (int64_t k = 0; k < n; ++k) ASSERT_EQ(c[k], a[k] * 3.0f);
}

TEST(CodegenMore, ConcurrentCompilation) {
  auto work = [](int seed, bool* ok) {
    const int64_t n = 48 + seed;
    Buffer A = make_buffer("A", DataType::f32(), {n}), C = make_buffer("C", DataType::f32(), {n});
    Var i("i");
    auto f = jit({"k" + std::to_string(seed),
                  {A, C},
                  serial(i, 0, n, make_store(C, exp(load(A, i)) + float(seed), i))});
    std::vector<float> a(n, 0.0f), c(n);
    *ok = f({a.data(), c.data()}) == 0 && c[n - 1] == 1.0f + seed;
  };
  bool ok[4] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work, t, &ok[t]);
  for (auto& t : threads) t.join();
  for (bool b : ok) EXPECT_TRUE(b);
}

}  // namespace
}  // namespace kiln::codegen::test
