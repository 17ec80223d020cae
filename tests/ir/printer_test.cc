#include "ir/printer.h"

#include <gtest/gtest.h>

#include "ir/tensor.h"

using namespace kiln::ir;

TEST(Printer, LoopNestExactText) {
  Buffer A = make_buffer("A", DataType::f32(), {64, 32});
  Buffer B = make_buffer("B", DataType::f32(), {64, 32});
  Buffer C = make_buffer("C.local", DataType::f32(), {32}, MemScope::Local);
  Var i("i"), j("j"), k("k");
  Stmt inner = make_seq({
      make_store(C, load(A, i * 32 + j) * 2.0f + 0.5f, j),
      make_if(j < 16, make_store(B, load(C, j), i * 32 + j),
              make_store(B, max(load(C, j), 0.0f), i * 32 + j)),
  });
  Stmt body =
      make_for(i, 0, 64, ForKind::Parallel,
               make_stmt<AllocateNode>(C, Expr(32), make_for(j, 0, 32, ForKind::Serial, inner)));
  LoweredFunc f{"kernel", {A, B}, body};
  EXPECT_EQ(to_string(f),
            "func kernel(A: float32[64, 32], B: float32[64, 32]) {\n"
            "  parallel (i, 0, 64) {\n"
            "    allocate C.local[float32 * 32] local {\n"
            "      for (j, 0, 32) {\n"
            "        C.local[j] = A[i*32 + j]*2f + 0.5f\n"
            "        if (j < 16) {\n"
            "          B[i*32 + j] = C.local[j]\n"
            "        } else {\n"
            "          B[i*32 + j] = max(C.local[j], 0f)\n"
            "        }\n"
            "      }\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(Printer, ParenthesesOnlyWhereNeeded) {
  // Expr handles: Var's own operator< / == compare identities, not values.
  Expr a = Var("a"), b = Var("b"), c = Var("c");
  EXPECT_EQ(to_string(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(to_string((a - b) - c), "a - b - c");
  EXPECT_EQ(to_string((a + b) * c), "(a + b)*c");
  EXPECT_EQ(to_string(a + b * c), "a + b*c");
  EXPECT_EQ(to_string(a * (b * c)), "a*(b*c)");
  EXPECT_EQ(to_string(logical_and(a < b, logical_or(b < c, eq(a, c)))),
            "a < b && (b < c || a == c)");
  EXPECT_EQ(to_string(logical_not(a < b)), "!(a < b)");
  EXPECT_EQ(to_string(floordiv(a + 1, 8)), "floordiv(a + 1, 8)");
  EXPECT_EQ(to_string(floormod(a, 8)), "floormod(a, 8)");
  EXPECT_EQ(to_string(min(a, b)), "min(a, b)");
  EXPECT_EQ(to_string(select(a < b, a, b)), "select(a < b, a, b)");
  EXPECT_EQ(to_string(a / b % c), "a / b % c");
  EXPECT_EQ(to_string(a / (b % c)), "a / (b % c)");
}

TEST(Printer, LiteralsCastsAndVectors) {
  Var x("x", DataType::f32()), i("i");
  EXPECT_EQ(to_string(Expr(1.0f)), "1f");
  EXPECT_EQ(to_string(Expr(0.5f)), "0.5f");
  EXPECT_EQ(to_string(make_float(2.0, DataType::f64())), "2.0");
  EXPECT_EQ(to_string(make_bool(true)), "true");
  EXPECT_EQ(to_string(cast(DataType::f32(16), broadcast(i, 16))), "float32x16(x16(i))");
  EXPECT_EQ(to_string(ramp(i * 16, 1, 16)), "ramp(i*16, 1, 16)");
  EXPECT_EQ(to_string(broadcast(x, 8)), "x8(x)");
  EXPECT_EQ(to_string(exp(x)), "exp(x)");
  Buffer A = make_buffer("A", DataType::f32(), {64});
  EXPECT_EQ(to_string(load(A, ramp(i, 1, 8))), "A[ramp(i, 1, 8)]");
}

TEST(Printer, TensorLevel) {
  Tensor A = placeholder({64, 32}, DataType::f32(), "A");
  IterVar k = reduce_axis(32, "k");
  Tensor C = compute(
      {64}, [&](const std::vector<Var>& i) { return sum(at(A, i[0], k->var), {k}); }, "C");
  EXPECT_EQ(to_string(C->body), "sum(A(i, k), axis=[k])");
  Var i("i");
  Stmt s = make_stmt<RealizeNode>(
      C, std::vector<Range>{{0, 64}}, MemScope::Global,
      make_stmt<LetStmtNode>(i, Expr(3),
                             make_stmt<TensorStoreNode>(C, std::vector<Expr>{i}, 0.0f)));
  EXPECT_EQ(to_string(s),
            "realize C([0, 64]) {\n"
            "  let i = 3\n"
            "  C(i) = 0f\n"
            "}\n");
}

TEST(Printer, DistinctVarsWithOneNameAreSuffixed) {
  Var a("i"), b("i");
  EXPECT_EQ(to_string(a + b), "i + i_1");
}
