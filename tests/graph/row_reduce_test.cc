// Row reductions (Softmax, LayerNormalization, ReduceSum/Mean/Max over the
// innermost axes, GlobalAverage/MaxPool): the compiled kernels against the
// reference evaluate on random inputs, for every ISA's lane count (4, 8, 16)
// and row lengths the 16 partials and the lanes do not divide (1-element
// rows, 7, 31, 33, 257, ...), and the schedule's shape: one row loop with
// every statistic inside it, the partials vectorized.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "lanes_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::check_all_lanes;
using test::Compiled;
using test::compute_of;
using test::make_node;
using test::random_tensor;
using Ints = std::vector<int64_t>;

const Ints kRowLengths = {1, 2, 7, 16, 31, 32, 33, 100, 128, 257};

TEST(RowReduce, SoftmaxLastAxis) {
  std::mt19937_64 rng(31);
  for (int64_t n : kRowLengths)
    for (const Ints& lead : {Ints{3}, Ints{2, 3}, Ints{1}}) {
      Ints shape = lead;
      shape.push_back(n);
      SCOPED_TRACE("softmax " + graph::shape_str(shape));
      // Wide inputs: exp overflows unless the row maximum is right.
      Initializer x = random_tensor("float32", shape, rng, -40, 40);
      check_all_lanes(make_node("Softmax", 1), {&x});
    }
}

TEST(RowReduce, LogSoftmaxLastAxis) {
  std::mt19937_64 rng(36);
  for (int64_t n : kRowLengths) {
    Ints shape = {3, n};
    SCOPED_TRACE("log_softmax " + graph::shape_str(shape));
    Initializer x = random_tensor("float32", shape, rng, -40, 40);
    check_all_lanes(make_node("LogSoftmax", 1), {&x});
  }
}

TEST(RowReduce, LayerNormOverOneAndTwoAxes) {
  std::mt19937_64 rng(32);
  struct Case {
    Ints shape;
    int64_t axis;
    bool bias;
  };
  std::vector<Case> cases;
  for (int64_t n : kRowLengths) cases.push_back({{3, n}, -1, true});
  cases.push_back({{2, 5, 7}, 1, true});    // 35 values per row through div/mod
  cases.push_back({{2, 4, 16}, 1, false});  // 64
  cases.push_back({{1, 128, 256}, 2, true});
  cases.push_back({{7, 1}, 1, true});
  for (const Case& k : cases) {
    int64_t axis = k.axis < 0 ? k.axis + static_cast<int64_t>(k.shape.size()) : k.axis;
    Ints norm(k.shape.begin() + axis, k.shape.end());
    // An offset mean: a one-pass variance would lose it to cancellation.
    Initializer x = random_tensor("float32", k.shape, rng, 2, 5);
    Initializer scale = random_tensor("float32", norm, rng);
    Initializer bias = random_tensor("float32", norm, rng);
    Node node = make_node("LayerNormalization", k.bias ? 3 : 2, {{"axis", k.axis}});
    SCOPED_TRACE("layernorm " + graph::shape_str(k.shape) + " axis " + std::to_string(k.axis));
    if (k.bias)
      check_all_lanes(node, {&x, &scale, &bias}, 2e-5);
    else
      check_all_lanes(node, {&x, &scale}, 2e-5);
  }
}

TEST(RowReduce, ReduceOpsOverInnermostAxes) {
  std::mt19937_64 rng(33);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
    for (int64_t n : kRowLengths)
      for (int64_t keep : {0, 1}) {
        Ints shape = {4, n};
        SCOPED_TRACE(std::string(op) + " " + graph::shape_str(shape));
        // All negative: a max whose partials start at 0 instead of -inf is wrong.
        Initializer x = random_tensor("float32", shape, rng, -3, -1);
        check_all_lanes(make_node(op, 1, {{"axes", Ints{-1}}, {"keepdims", keep}}), {&x});
      }
    Initializer x = random_tensor("float32", {3, 5, 13}, rng, -3, -1);  // 65 per row
    check_all_lanes(make_node(op, 1, {{"axes", Ints{1, 2}}}), {&x});
  }
}

TEST(RowReduce, GlobalPools) {
  std::mt19937_64 rng(34);
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (const Ints& shape : {Ints{1, 5, 7, 7}, Ints{2, 3, 1, 1}, Ints{1, 4, 9, 9}, Ints{1, 3, 40},
                              Ints{1, 64, 14, 14}}) {
      SCOPED_TRACE(std::string(op) + " " + graph::shape_str(shape));
      Initializer x = random_tensor("float32", shape, rng, -3, -1);
      check_all_lanes(make_node(op, 1), {&x});
    }
}

// The schedule's shape for Softmax over [4, 128]: the output's row loop is
// the only root loop nest, every statistic (maxima, sums, their partials,
// 1 / sum) and the row's exponentials are attached inside it, and each
// partial stage runs its partial axis as vectors inside its reduction loop.
TEST(RowReduce, SoftmaxIsOneRowKernelWithVectorPartials) {
  std::mt19937_64 rng(35);
  Initializer x = random_tensor("float32", {4, 128}, rng);
  Compiled c = compute_of(make_node("Softmax", 1), {&x});
  for (int64_t lanes : {8, 16}) {
    schedule::Schedule sch = ops::schedule_generic(c.outs, lanes);
    int attached = 0, vector_partials = 0, exp_rows = 0;
    for (const schedule::Stage& s : sch.stages()) {
      if (s->is_placeholder() || s->is_output) continue;
      EXPECT_EQ(s->attach, schedule::AttachKind::At) << s->op->name;
      attached += s->attach == schedule::AttachKind::At;
      // exp(x - max) is a row buffer of its own, stored as vectors, that the
      // sum and the output both read: exp runs once per element.
      if (s->op->name.size() > 4 && s->op->name.substr(s->op->name.size() - 4) == ".exp") {
        ++exp_rows;
        auto a = s->annotations.find(s->leaf_iter_vars.back().get());
        EXPECT_TRUE(a != s->annotations.end() && a->second == schedule::IterAnnotation::Vectorize);
      }
      if (s->op->name.find(".partials") == std::string::npos) continue;
      // [row, ko, (lane group,) lanes]: the vectorized leaf is innermost and
      // follows the reduction loop.
      const auto& leaves = s->leaf_iter_vars;
      ASSERT_GE(leaves.size(), 3u);
      auto a = s->annotations.find(leaves.back().get());
      EXPECT_TRUE(a != s->annotations.end() && a->second == schedule::IterAnnotation::Vectorize);
      const int64_t* extent = ir::as_const_int(leaves.back()->dom.extent);
      EXPECT_TRUE(extent && *extent == lanes);
      bool reduce_before_lanes = false;
      for (size_t i = 0; i + 1 < leaves.size(); ++i)
        reduce_before_lanes = reduce_before_lanes || leaves[i]->kind == ir::IterKind::Reduce;
      EXPECT_TRUE(reduce_before_lanes);
      ++vector_partials;
    }
    EXPECT_EQ(attached, 6);  // max, max partials, exp, sum, sum partials, 1 / sum
    EXPECT_EQ(vector_partials, 2);
    EXPECT_EQ(exp_rows, 1);
  }
}

}  // namespace
}  // namespace kiln
