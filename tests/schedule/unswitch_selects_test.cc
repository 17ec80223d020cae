// unswitch_selects (schedule/unswitch_selects.h): a Concat's select chain on
// an outer channel loop becomes if/else around the inner loops, each version
// loading from one input, and the kernel computes the same; a test that
// differs between vector lanes stays a select.
#include "schedule/unswitch_selects.h"

#include <gtest/gtest.h>

#include <random>

#include "interpreter.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/tensor.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using namespace kiln::ir;

struct Counts {
  int selects = 0, ifs = 0;
};

Counts count(const Stmt& s) {
  struct V : IRVisitor {
    Counts c;
    void visit_select(const SelectNode* op) override {
      ++c.selects;
      IRVisitor::visit_select(op);
    }
    void visit_if(const IfThenElseNode* op) override {
      ++c.ifs;
      IRVisitor::visit_if(op);
    }
  } v;
  v.visit(s);
  return v.c;
}

// out[c, w] = concat over c of inputs [sizes[k], W], as graph/ops lowers Concat
// (a select chain, reads clamped into range), times 2.
struct Concat {
  std::vector<Tensor> inputs;
  Tensor out;
};

Concat make_concat(const std::vector<int64_t>& sizes, int64_t W) {
  Concat c;
  int64_t total = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    c.inputs.push_back(placeholder({sizes[k], W}, DataType::f32(), "in" + std::to_string(k)));
    total += sizes[k];
  }
  c.out = compute(
      {total, W},
      [&](const std::vector<Var>& i) {
        Expr r;
        int64_t start = 0;
        for (size_t k = 0; k < sizes.size(); ++k) {
          Expr idx = max(min(Expr(i[0]) - Expr(start), Expr(sizes[k] - 1)), Expr(int64_t{0}));
          Expr v = at(c.inputs[k], idx, i[1]);
          r = r ? select(Expr(i[0]) >= Expr(start), v, r) : v;
          start += sizes[k];
        }
        return r * make_float(2.0);
      },
      "concat");
  return c;
}

// Lowers with `schedule_it`, checks the result on random inputs, returns the counts.
Counts lower_and_check(const std::vector<int64_t>& sizes, int64_t W,
                       const std::function<void(schedule::Schedule&, const Tensor&)>& schedule_it) {
  Concat c = make_concat(sizes, W);
  schedule::Schedule sch = schedule::create_schedule({c.out});
  schedule_it(sch, c.out);
  std::vector<Tensor> args = c.inputs;
  args.push_back(c.out);
  LoweredFunc f = schedule::lower(sch, args, "concat");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> data;
  std::vector<float*> ptrs;
  for (int64_t n : sizes) {
    data.emplace_back(n * W);
    for (float& x : data.back()) x = u(rng);
  }
  int64_t total = 0;
  for (int64_t n : sizes) total += n;
  std::vector<float> out(total * W, NAN);
  for (auto& d : data) ptrs.push_back(d.data());
  ptrs.push_back(out.data());
  Interpreter().run(f, ptrs);
  int64_t row = 0;
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int64_t r = 0; r < sizes[k]; ++r, ++row)
      for (int64_t w = 0; w < W; ++w)
        EXPECT_EQ(out[row * W + w], 2 * data[k][r * W + w]) << "input " << k << " row " << r;
  return count(f.body);
}

TEST(UnswitchSelects, ConcatOnAnOuterLoopLoadsFromOneInputPerVersion) {
  // Channel loop outside, width loop inside: the tests read only the channel.
  Counts c = lower_and_check({3, 5, 2, 7}, 6, [](schedule::Schedule&, const Tensor&) {});
  EXPECT_EQ(c.selects, 0);
  EXPECT_EQ(c.ifs, 3);
}

TEST(UnswitchSelects, LaneIndexTestsThatAgreeOnEveryLaneUnswitch) {
  // Channels split by 16, the inner 16 vectorized (a layout transform to
  // NCHW16c does this): inputs of 16 and 32 channels start at multiples of 16.
  auto blocked = [](schedule::Schedule& sch, const Tensor& out) {
    auto s = sch[out];
    auto [co, ci] = s->split(s->axis(0), 16);
    s->reorder({co, s->axis(1), ci});
    s->vectorize(ci);
  };
  Counts c = lower_and_check({16, 32, 16}, 5, blocked);
  EXPECT_EQ(c.selects, 0);
  EXPECT_EQ(c.ifs, 2);
  // An input of 8 channels: the lanes of one vector straddle two inputs.
  Counts mixed = lower_and_check({8, 24}, 5, blocked);
  EXPECT_GT(mixed.selects, 0);
}

TEST(UnswitchSelects, InnermostLoopAndMemoryDependentTestsStay) {
  // A test on the width (inner) loop's variable cannot leave that loop.
  Tensor a = placeholder({4, 8}, DataType::f32(), "a");
  Tensor o = compute(
      {4, 8},
      [&](const std::vector<Var>& i) {
        return select(Expr(i[1]) >= Expr(int64_t{3}), at(a, i[0], i[1]), make_float(0));
      },
      "o");
  schedule::Schedule sch = schedule::create_schedule({o});
  LoweredFunc f = schedule::lower(sch, {a, o}, "o");
  EXPECT_EQ(count(f.body).ifs, 0) << to_string(f);
  EXPECT_EQ(count(f.body).selects, 1) << to_string(f);
}

}  // namespace
}  // namespace kiln::test
