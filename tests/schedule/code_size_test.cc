// The code-size estimate (schedule/code_size.h) and the compile-time budget
// built on it: counts of a known kernel, monotone in unroll factor and vector
// width, and demotion of the outermost unrolled loops.
#include "schedule/code_size.h"

#include <gtest/gtest.h>

#include "ir/expr.h"
#include "ir/functor.h"
#include "ir/stmt.h"

namespace kiln::test {
namespace {

using namespace kiln::ir;
using schedule::estimate_code_size;
using schedule::fit_code_budget;

Buffer buf(const std::string& name) {
  return make_buffer(name, DataType::f32(), {make_int(4096)}, MemScope::Global);
}

// B[i] = A[i] * 2, unrolled `extent` times.
Stmt scale_loop(int64_t extent, ForKind kind = ForKind::Unrolled) {
  Var i("i");
  Buffer A = buf("A"), B = buf("B");
  return make_for(i, make_int(0), make_int(extent), kind,
                  make_store(B, load(A, i) * make_float(2.0), i));
}

// B[ramp(0, 1, lanes)] = A[ramp(0, 1, lanes)] + A[ramp(0, 1, lanes)].
Stmt vector_add(int lanes) {
  Buffer A = buf("A"), B = buf("B");
  Expr idx = ramp(make_int(0), make_int(1), lanes);
  return make_store(B, load(A, idx) + load(A, idx), idx);
}

TEST(CodeSize, CountsAKnownKernel) {
  // Per copy: the store, the multiply and the load (the index is a variable
  // and the constant is free): 3 operations, 4 copies.
  EXPECT_EQ(estimate_code_size(scale_loop(4)), 12);
  // A serial loop: its body once plus the loop header.
  EXPECT_EQ(estimate_code_size(scale_loop(4, ForKind::Serial)), 3 + 3);
  // A vector add of 16 floats on 512-bit registers: store, add, two loads,
  // each one register; three ramps (their base is a constant).
  EXPECT_EQ(estimate_code_size(vector_add(16), 512), 4 + 3);
}

// Every buffer is a noalias scope on every access in LLVM: the estimate
// grows with accesses x buffers, which a kernel summing 1,000 distinct
// buffers (a fused chain of Adds, issue 65 item 6) makes quadratic.
TEST(CodeSize, CountsAliasScopesOfManyBuffers) {
  auto sum_of = [](int n) {
    Var i("i");
    Expr sum = load(buf("in0"), i);
    for (int k = 1; k < n; ++k) sum = sum + load(buf("in" + std::to_string(k)), i);
    return make_for(i, make_int(0), make_int(256), ForKind::Serial, make_store(buf("out"), sum, i));
  };
  // Few buffers: operations only (16 loads, 15 adds, 1 store, the loop).
  EXPECT_EQ(estimate_code_size(sum_of(16)), 16 + 15 + 1 + 3);
  // 1,000 loads and a store over 1,001 buffers: 1,001 accesses x the 985
  // buffers past the first 16, / 64, on top.
  const int64_t ops = 1000 + 999 + 1 + 3;
  EXPECT_EQ(estimate_code_size(sum_of(1000)), ops + 1001 * (1001 - 16) / 64);
  // Twice the buffers: about four times the estimate.
  EXPECT_GT(estimate_code_size(sum_of(2000)), 3 * estimate_code_size(sum_of(1000)));
}

TEST(CodeSize, MonotoneInUnrollFactor) {
  int64_t last = 0;
  for (int64_t n : {1, 2, 4, 8, 16, 64, 256}) {
    int64_t s = estimate_code_size(scale_loop(n));
    EXPECT_GT(s, last) << "unroll " << n;
    last = s;
  }
  // Nested unrolling multiplies.
  Var j("j");
  Stmt nested = make_for(j, make_int(0), make_int(8), ForKind::Unrolled, scale_loop(4));
  EXPECT_EQ(estimate_code_size(nested), 8 * estimate_code_size(scale_loop(4)));
}

TEST(CodeSize, MonotoneInVectorWidth) {
  int64_t last = 0;
  for (int lanes : {2, 4, 8, 16, 32, 64}) {
    int64_t s = estimate_code_size(vector_add(lanes), 256);
    EXPECT_GE(s, last) << lanes << " lanes";
    last = s;
  }
  // Wider than a register: split into registers (8 floats per 256 bits).
  EXPECT_EQ(estimate_code_size(vector_add(64), 256), 4 * 8 + 3);
  EXPECT_GT(estimate_code_size(vector_add(64), 256), estimate_code_size(vector_add(64), 512));
}

TEST(CodeSize, LoopsInsideUnrolledLoopsWeighMore) {
  Var j("j");
  Stmt outer_serial =
      make_for(j, make_int(0), make_int(8), ForKind::Serial, scale_loop(4, ForKind::Serial));
  Stmt outer_unrolled =
      make_for(j, make_int(0), make_int(8), ForKind::Unrolled, scale_loop(4, ForKind::Serial));
  // Eight copies of a loop cost far more than eight copies of its body.
  EXPECT_GT(estimate_code_size(outer_unrolled), 8 * 100);
  EXPECT_LT(estimate_code_size(outer_serial), 20);
}

// B[i] = select(i == 0, A[0]*2, select(i == 1, A[1]*3 + A[2], A[3])) inside a
// loop over i: unrolled, every copy keeps one branch (the condition folds),
// so a copy costs the largest branch; serial, every branch is evaluated.
TEST(CodeSize, SelectOnAnUnrolledIndexCountsOneBranchPerCopy) {
  Var i("i");
  Buffer A = buf("A"), B = buf("B");
  Expr rows = select(
      eq(i, make_int(0)), load(A, make_int(0)) * make_float(2.0),
      select(eq(i, make_int(1)), load(A, make_int(1)) * make_float(3.0) + load(A, make_int(2)),
             load(A, make_int(3))));
  auto loop = [&](ForKind kind, Expr value) {
    return make_for(i, make_int(0), make_int(3), kind, make_store(B, value, i));
  };
  // Largest branch: two loads, a multiply and an add (4); plus the store: 5 per copy.
  EXPECT_EQ(estimate_code_size(loop(ForKind::Unrolled, rows)), 3 * 5);
  // Vectorized, the condition is broadcast: the same rule.
  EXPECT_EQ(estimate_code_size(loop(ForKind::Unrolled, rows)),
            estimate_code_size(loop(
                ForKind::Unrolled,
                select(broadcast(eq(i, make_int(0)), 1), load(A, make_int(0)) * make_float(2.0),
                       select(eq(i, make_int(1)),
                              load(A, make_int(1)) * make_float(3.0) + load(A, make_int(2)),
                              load(A, make_int(3)))))));
  // Serial, or a condition on another variable: every branch and the selects count.
  EXPECT_GT(estimate_code_size(loop(ForKind::Serial, rows)), 5 + 3);
  Var other("other");
  Expr on_other = select(eq(other, make_int(0)), load(A, make_int(0)), load(A, make_int(3)));
  EXPECT_EQ(estimate_code_size(loop(ForKind::Unrolled, on_other)), 3 * (1 + 1 + 1 + 1 + 1));
}

int count_unrolled(const Stmt& s) {
  int n = 0;
  struct V : IRVisitor {
    int* n;
    void visit_for(const ForNode* op) override {
      *n += op->for_kind == ForKind::Unrolled;
      IRVisitor::visit_for(op);
    }
  } v;
  v.n = &n;
  v.visit(s);
  return n;
}

TEST(CodeBudget, DemotesOutermostUnrolledLoopsUntilUnder) {
  Var j("j"), k("k");
  // k (16) x j (8) x i (4) unrolled: 512 copies of 3 operations.
  Stmt s = make_for(k, make_int(0), make_int(16), ForKind::Unrolled,
                    make_for(j, make_int(0), make_int(8), ForKind::Unrolled, scale_loop(4)));
  ASSERT_EQ(estimate_code_size(s), 16 * 8 * 12);

  EXPECT_EQ(fit_code_budget(s, 200).demoted, std::vector<std::string>{"k"});

  auto within = fit_code_budget(s, 100000);  // fits: unchanged
  EXPECT_TRUE(within.stmt.same_as(s));
  EXPECT_TRUE(within.demoted.empty());
  EXPECT_EQ(within.size_before, within.size_after);

  // k serial alone: one loop around 8 x 12 = 99 > 50, so j goes next.
  auto r = fit_code_budget(s, 50);
  EXPECT_EQ(r.size_before, 16 * 8 * 12);
  EXPECT_LE(r.size_after, 50);
  ASSERT_EQ(r.demoted.size(), 2u);
  EXPECT_EQ(r.demoted[0], "k");
  EXPECT_EQ(r.demoted[1], "j");
  EXPECT_EQ(count_unrolled(r.stmt), 1);  // i stays unrolled
  EXPECT_EQ(estimate_code_size(r.stmt), r.size_after);

  // Nothing left to demote: the smallest size it can reach, over the budget.
  auto all = fit_code_budget(s, 1);
  EXPECT_EQ(count_unrolled(all.stmt), 0);
  EXPECT_EQ(all.demoted.size(), 3u);
  EXPECT_GT(all.size_after, 1);

  EXPECT_TRUE(fit_code_budget(s, 0).stmt.same_as(s));  // no budget
}

TEST(CodeBudget, ExceededSaysSizeAndBudget) {
  schedule::CodeBudgetExceeded e("dense", 123456, 50000);
  EXPECT_NE(std::string(e.what()).find("123456"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("50000"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("'dense'"), std::string::npos);
}

}  // namespace
}  // namespace kiln::test
