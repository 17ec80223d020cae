// Reductions, Softmax, LayerNormalization and pooling: every compute against
// its evaluate over sweeps of shapes and attributes (check_node), and every
// evaluate against hand-computed cases (ONNX's backend test cases where they
// exist).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Attribute;
using graph::Initializer;
using graph::Node;
using test::check_node;
using test::random_tensor;
using test::tensor_of;
using Ints = std::vector<int64_t>;
using Floats = std::vector<float>;

Node make_node(const std::string& op, int n_inputs, std::map<std::string, Attribute> attrs = {},
               int n_outputs = 1) {
  Node n;
  n.op_type = op;
  n.name = op + "_under_test";
  for (int i = 0; i < n_inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (int i = 0; i < n_outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  n.attrs = std::move(attrs);
  return n;
}

std::vector<Initializer> evaluate(const Node& n, const std::vector<const Initializer*>& in) {
  return graph::get_op(n.op_type).evaluate(n, in);
}

void expect_values(const Initializer& got, const Ints& shape, const Floats& want,
                   const std::string& what, double tol = 1e-6) {
  ASSERT_EQ(got.type.shape, shape) << what;
  Floats g = got.as<float>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

Floats iota(int n) {
  Floats v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

// ---- ReduceSum / ReduceMean / ReduceMax ---------------------------------------------

TEST(ReduceOps, HandComputedCases) {
  Initializer x = tensor_of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(evaluate(make_node("ReduceSum", 1, {{"axes", Ints{1}}}), {&x})[0], {2, 1}, {6, 15},
                "sum axes 1");
  expect_values(
      evaluate(make_node("ReduceSum", 1, {{"axes", Ints{0}}, {"keepdims", int64_t{0}}}), {&x})[0],
      {3}, {5, 7, 9}, "sum axes 0");
  expect_values(evaluate(make_node("ReduceSum", 1), {&x})[0], {1, 1}, {21}, "sum all");
  expect_values(
      evaluate(make_node("ReduceSum", 1, {{"noop_with_empty_axes", int64_t{1}}}), {&x})[0], {2, 3},
      {1, 2, 3, 4, 5, 6}, "noop");
  Initializer axes = tensor_of<int64_t>({1}, {-1});  // ReduceSum-13's axes input
  expect_values(evaluate(make_node("ReduceSum", 2, {{"keepdims", int64_t{0}}}), {&x, &axes})[0],
                {2}, {6, 15}, "axes input");
  Initializer no_axes = tensor_of<int64_t>({0}, {});
  expect_values(evaluate(make_node("ReduceMax", 2, {{"noop_with_empty_axes", int64_t{1}}}),
                         {&x, &no_axes})[0],
                {2, 3}, {1, 2, 3, 4, 5, 6}, "empty axes input, noop");
  expect_values(evaluate(make_node("ReduceMean", 1, {{"axes", Ints{0}}}), {&x})[0], {1, 3},
                {2.5, 3.5, 4.5}, "mean");
  expect_values(
      evaluate(make_node("ReduceMax", 1, {{"axes", Ints{-1}}, {"keepdims", int64_t{0}}}), {&x})[0],
      {2}, {3, 6}, "max");
  Initializer neg = tensor_of<float>({3}, {-5, -2, -9});
  expect_values(evaluate(make_node("ReduceMax", 1), {&neg})[0], {1}, {-2}, "max negative");
}

TEST(ReduceOps, Int64Evaluate) {
  Initializer x = tensor_of<int64_t>({2, 2}, {1, 2, -4, 7});
  auto sum =
      evaluate(make_node("ReduceSum", 1, {{"axes", Ints{0}}, {"keepdims", int64_t{0}}}), {&x})[0];
  EXPECT_EQ(sum.as<int64_t>(), (std::vector<int64_t>{-3, 9}));
  auto mx = evaluate(make_node("ReduceMax", 1, {{"axes", Ints{1}}}), {&x})[0];
  EXPECT_EQ(mx.type.shape, (Ints{2, 1}));
  EXPECT_EQ(mx.as<int64_t>(), (std::vector<int64_t>{2, 7}));
  auto mean = evaluate(make_node("ReduceMean", 1, {{"axes", Ints{1}}}), {&x})[0];
  EXPECT_EQ(mean.as<int64_t>(), (std::vector<int64_t>{1, 1}));  // 3/2 and 3/2, truncated
}

TEST(ReduceOps, RejectBadAxes) {
  Initializer x = tensor_of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(evaluate(make_node("ReduceSum", 1, {{"axes", Ints{2}}}), {&x}), graph::OpError);
  EXPECT_THROW(evaluate(make_node("ReduceSum", 1, {{"axes", Ints{1, -1}}}), {&x}), graph::OpError);
}

TEST(ReduceOps, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(21);
  struct Case {
    Ints shape;
    Ints axes;
    int64_t keepdims;
    bool axes_input;
  };
  std::vector<Case> cases = {
      {{7}, {}, 1, false},          {{3, 17}, {1}, 0, false},
      {{3, 17}, {0}, 1, true},      {{2, 3, 17}, {0, 2}, 1, false},
      {{2, 3, 17}, {-2}, 0, true},  {{2, 3, 4, 5}, {1, 2, 3}, 0, false},
      {{2, 3, 4, 5}, {}, 0, false}, {{5, 1, 33}, {2, 1}, 1, true},
  };
  int i = 0;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"})
    for (const Case& k : cases) {
      if (++i % 3 == 0) continue;  // two thirds of the cross product keep the test fast
      Initializer x = random_tensor("float32", k.shape, rng);
      Initializer axes = tensor_of<int64_t>({static_cast<int64_t>(k.axes.size())}, k.axes);
      std::map<std::string, Attribute> attrs = {{"keepdims", k.keepdims}};
      if (!k.axes_input && !k.axes.empty()) attrs["axes"] = k.axes;
      SCOPED_TRACE(std::string(op) + " " + graph::shape_str(k.shape) + " axes " +
                   graph::shape_str(k.axes));
      if (k.axes_input)
        check_node(make_node(op, 2, attrs), {&x, &axes});
      else
        check_node(make_node(op, 1, attrs), {&x});
    }
  // noop_with_empty_axes and an int64 reduction.
  Initializer x = random_tensor("float32", {3, 5}, rng);
  check_node(make_node("ReduceMax", 1, {{"noop_with_empty_axes", int64_t{1}}}), {&x});
  Initializer xi = random_tensor("int64", {4, 9}, rng, -50, 50);
  check_node(make_node("ReduceSum", 1, {{"axes", Ints{1}}}), {&xi});
  check_node(make_node("ReduceMax", 1, {{"axes", Ints{0}}}), {&xi});
}

// ---- Softmax ------------------------------------------------------------------------------

TEST(SoftmaxOp, HandComputedAndStable) {
  Initializer x = tensor_of<float>({1, 3}, {1, 2, 3});
  Floats want = {0.09003057f, 0.24472847f, 0.66524096f};
  expect_values(evaluate(make_node("Softmax", 1), {&x})[0], {1, 3}, want, "softmax");
  Initializer big = tensor_of<float>({1, 3}, {1000, 1001, 1002});  // exp overflows unless shifted
  expect_values(evaluate(make_node("Softmax", 1), {&big})[0], {1, 3}, want, "shifted");
  // axis 0 of a [2, 2]: columns sum to one.
  Initializer c = tensor_of<float>({2, 2}, {0, 5, 0, 5});
  expect_values(evaluate(make_node("Softmax", 1, {{"axis", int64_t{0}}}), {&c})[0], {2, 2},
                {0.5, 0.5, 0.5, 0.5}, "axis 0");
}

TEST(SoftmaxOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(22);
  struct Case {
    Ints shape;
    int64_t axis;
    double scale;
  };
  for (const Case& k : {Case{{5}, 0, 1}, Case{{3, 17}, -1, 1}, Case{{3, 17}, 0, 1},
                        Case{{2, 3, 4}, 1, 1}, Case{{2, 33, 5}, 1, 1}, Case{{4, 40}, -1, 60}}) {
    Initializer x = random_tensor("float32", k.shape, rng, -k.scale, k.scale);
    SCOPED_TRACE("softmax " + graph::shape_str(k.shape) + " axis " + std::to_string(k.axis));
    check_node(make_node("Softmax", 1, {{"axis", k.axis}}), {&x});
  }
}

// log(softmax) in one step: x - max - log(sum(exp(x - max))), finite where
// softmax underflows to 0.
TEST(LogSoftmaxOp, HandComputedStableAndCompiled) {
  Initializer x = tensor_of<float>({1, 3}, {1, 2, 3});
  Floats want = {-2.40760596f, -1.40760596f, -0.40760596f};
  expect_values(evaluate(make_node("LogSoftmax", 1), {&x})[0], {1, 3}, want, "log_softmax");
  Initializer far = tensor_of<float>({1, 2}, {0, 200});  // exp(-200) is 0 in float32
  expect_values(evaluate(make_node("LogSoftmax", 1), {&far})[0], {1, 2}, {-200, 0}, "far apart");
  std::mt19937_64 rng(23);
  for (const auto& [shape, axis] : std::vector<std::pair<Ints, int64_t>>{
           {{5}, 0}, {{3, 17}, -1}, {{3, 17}, 0}, {{2, 33, 5}, 1}, {{2, 3, 197}, -1}}) {
    Initializer xs = random_tensor("float32", shape, rng, -30, 30);
    SCOPED_TRACE("log_softmax " + graph::shape_str(shape) + " axis " + std::to_string(axis));
    check_node(make_node("LogSoftmax", 1, {{"axis", axis}}), {&xs});
  }
}

// ---- LayerNormalization -----------------------------------------------------------------

TEST(LayerNormOp, HandComputed) {
  Initializer x = tensor_of<float>({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  Initializer scale = tensor_of<float>({4}, {1, 2, 1, 1});
  Initializer bias = tensor_of<float>({4}, {0, 0, 0, 10});
  // A tiny epsilon keeps row 2 (variance 0) finite without moving row 1.
  Node node = make_node("LayerNormalization", 3, {{"epsilon", 1e-30f}}, 3);
  auto out = evaluate(node, {&x, &scale, &bias});
  ASSERT_EQ(out.size(), 3u);
  // Row 1: mean 2.5, var 1.25, inv 1/sqrt(1.25).
  double inv = 1 / std::sqrt(1.25);
  Floats y = {static_cast<float>(-1.5 * inv),
              static_cast<float>(-0.5 * 2 * inv),
              static_cast<float>(0.5 * inv),
              static_cast<float>(1.5 * inv + 10),
              0,
              0,
              0,
              10};
  expect_values(out[0], {2, 4}, y, "Y", 1e-6);
  expect_values(out[1], {2, 1}, {2.5, 2}, "Mean");
  EXPECT_NEAR(out[2].as<float>()[0], inv, 1e-6);

  // axis 0 normalizes over everything; without B.
  Node all = make_node("LayerNormalization", 2, {{"axis", int64_t{0}}, {"epsilon", 0.0f}});
  Initializer ones = tensor_of<float>({2, 4}, Floats(8, 1.0f));
  auto y0 = evaluate(all, {&x, &ones})[0].as<float>();
  double mean = 2.25, var = 0;
  Floats xv = x.as<float>();
  for (float v : xv) var += (v - mean) * (v - mean) / 8;
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y0[i], (xv[i] - mean) / std::sqrt(var), 1e-5);
}

TEST(LayerNormOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(23);
  struct Case {
    Ints shape;
    int64_t axis;
    bool bias;
    int outputs;
  };
  for (const Case& k : {Case{{2, 3, 17}, -1, true, 1}, Case{{2, 3, 8}, 1, false, 3},
                        Case{{4, 16}, 0, true, 2}, Case{{3, 40}, 1, true, 3}}) {
    int64_t axis = k.axis < 0 ? k.axis + static_cast<int64_t>(k.shape.size()) : k.axis;
    Ints norm(k.shape.begin() + axis, k.shape.end());
    Initializer x = random_tensor("float32", k.shape, rng, -3, 3);
    Initializer scale = random_tensor("float32", norm, rng);
    Initializer bias = random_tensor("float32", norm, rng);
    Node node = make_node("LayerNormalization", k.bias ? 3 : 2, {{"axis", k.axis}}, k.outputs);
    SCOPED_TRACE("layernorm " + graph::shape_str(k.shape) + " axis " + std::to_string(k.axis));
    if (k.bias)
      check_node(node, {&x, &scale, &bias}, 2e-5);
    else
      check_node(node, {&x, &scale}, 2e-5);
  }
}

// ---- MaxPool / AveragePool ----------------------------------------------------------------

TEST(MaxPoolOp, OnnxBackendCases) {
  Initializer x4 = tensor_of<float>({1, 1, 4, 4}, iota(16));
  Initializer x5 = tensor_of<float>({1, 1, 5, 5}, iota(25));
  Node ceil =
      make_node("MaxPool", 1,
                {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  expect_values(evaluate(ceil, {&x4})[0], {1, 1, 2, 2}, {11, 12, 15, 16}, "2d_ceil");
  Node pads = make_node("MaxPool", 1, {{"kernel_shape", Ints{5, 5}}, {"pads", Ints{2, 2, 2, 2}}});
  expect_values(evaluate(pads, {&x5})[0], {1, 1, 5, 5},
                {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25,
                 25, 25, 23, 24, 25, 25, 25, 23, 24, 25, 25, 25},
                "2d_pads");
  Node upper = make_node("MaxPool", 1,
                         {{"kernel_shape", Ints{3, 3}},
                          {"strides", Ints{2, 2}},
                          {"auto_pad", std::string("SAME_UPPER")}});
  expect_values(evaluate(upper, {&x5})[0], {1, 1, 3, 3}, {7, 9, 10, 17, 19, 20, 22, 24, 25},
                "same_upper k3");
  Node lower = make_node("MaxPool", 1,
                         {{"kernel_shape", Ints{2, 2}},
                          {"strides", Ints{2, 2}},
                          {"auto_pad", std::string("SAME_LOWER")}});
  expect_values(evaluate(lower, {&x5})[0], {1, 1, 3, 3}, {1, 3, 5, 11, 13, 15, 21, 23, 25},
                "same_lower k2");
  Node dil = make_node("MaxPool", 1, {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}});
  expect_values(evaluate(dil, {&x4})[0], {1, 1, 2, 2}, {11, 12, 15, 16}, "2d_dilations");
  // Padding never wins the max.
  Initializer negs = tensor_of<float>({1, 1, 2, 2}, {-4, -3, -2, -1});
  Node p1 = make_node("MaxPool", 1, {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  expect_values(evaluate(p1, {&negs})[0], {1, 1, 3, 3}, {-4, -3, -3, -2, -1, -1, -2, -1, -1},
                "negative with pads");
}

// With ceil_mode, a window that would start in the right padding is dropped.
TEST(MaxPoolOp, CeilModeDropsWindowsStartingInRightPadding) {
  Initializer x = tensor_of<float>({1, 1, 5, 5}, iota(25));
  Node node = make_node("MaxPool", 1,
                        {{"kernel_shape", Ints{2, 2}},
                         {"strides", Ints{2, 2}},
                         {"pads", Ints{1, 1, 1, 1}},
                         {"ceil_mode", int64_t{1}}});
  expect_values(evaluate(node, {&x})[0], {1, 1, 3, 3}, {1, 3, 5, 11, 13, 15, 21, 23, 25}, "ceil");
}

TEST(MaxPoolOp, IndicesOutputAndBadAttributesAreErrors) {
  Initializer x = tensor_of<float>({1, 1, 4, 4}, iota(16));
  // The Indices output: each window's maximum is its last element, row-major
  // (storage_order 0) or with W before H (1). tests/graph/sampling_ops_test.cc sweeps it.
  Node two = make_node("MaxPool", 1, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, 2);
  std::vector<Initializer> out = evaluate(two, {&x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].as<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15}));
  two.attrs["storage_order"] = int64_t{1};
  EXPECT_EQ(evaluate(two, {&x})[1].as<int64_t>(), (std::vector<int64_t>{5, 13, 7, 15}));
  two.attrs["storage_order"] = int64_t{2};
  EXPECT_THROW(evaluate(two, {&x}), graph::OpError);
  EXPECT_THROW(evaluate(make_node("MaxPool", 1), {&x}), graph::OpError);  // no kernel_shape
  Node big = make_node("MaxPool", 1, {{"kernel_shape", Ints{5, 5}}});
  EXPECT_THROW(evaluate(big, {&x}), graph::OpError);
  Node bad =
      make_node("MaxPool", 1, {{"kernel_shape", Ints{2, 2}}, {"auto_pad", std::string("SAME")}});
  EXPECT_THROW(evaluate(bad, {&x}), graph::OpError);
}

TEST(AveragePoolOp, HandComputedPadsAndCeil) {
  Initializer x3 = tensor_of<float>({1, 1, 3, 3}, iota(9));
  std::map<std::string, Attribute> attrs = {{"kernel_shape", Ints{2, 2}},
                                            {"pads", Ints{1, 1, 1, 1}}};
  expect_values(evaluate(make_node("AveragePool", 1, attrs), {&x3})[0], {1, 1, 4, 4},
                {1, 1.5, 2.5, 3, 2.5, 3, 4, 4.5, 5.5, 6, 7, 7.5, 7, 7.5, 8.5, 9}, "exclude pad");
  attrs["count_include_pad"] = int64_t{1};
  expect_values(
      evaluate(make_node("AveragePool", 1, attrs), {&x3})[0], {1, 1, 4, 4},
      {0.25, 0.75, 1.25, 0.75, 1.25, 3, 4, 2.25, 2.75, 6, 7, 3.75, 1.75, 3.75, 4.25, 2.25},
      "include pad");
  // ceil_mode: the last window runs past the padded input; those taps never count.
  Initializer x5 = tensor_of<float>({1, 1, 5, 5}, iota(25));
  Node ceil = make_node("AveragePool", 1,
                        {{"kernel_shape", Ints{2, 2}},
                         {"strides", Ints{2, 2}},
                         {"ceil_mode", int64_t{1}},
                         {"count_include_pad", int64_t{1}}});
  expect_values(evaluate(ceil, {&x5})[0], {1, 1, 3, 3}, {4, 6, 7.5, 14, 16, 17.5, 21.5, 23.5, 25},
                "ceil");
  Initializer x4 = tensor_of<float>({1, 1, 4, 4}, iota(16));
  Node both = make_node("AveragePool", 1,
                        {{"kernel_shape", Ints{3, 3}},
                         {"strides", Ints{2, 2}},
                         {"pads", Ints{1, 1, 1, 1}},
                         {"ceil_mode", int64_t{1}},
                         {"count_include_pad", int64_t{1}}});
  auto y = evaluate(both, {&x4})[0];
  ASSERT_EQ(y.type.shape, (Ints{1, 1, 3, 3}));
  Floats yv = y.as<float>();
  EXPECT_NEAR(yv[0], 14.0 / 9, 1e-6);  // 3x3 window with 5 pad taps, all counted
  EXPECT_NEAR(yv[8], 16.0 / 4, 1e-6);  // 2x2 counted (input + pad), the rest past the padding
  both.attrs["count_include_pad"] = int64_t{0};
  EXPECT_NEAR(evaluate(both, {&x4})[0].as<float>()[8], 16.0, 1e-6);
}

TEST(PoolOps, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(24);
  struct Case {
    Ints x;
    std::map<std::string, Attribute> attrs;
  };
  std::vector<Case> cases = {
      {{1, 2, 7, 9}, {{"kernel_shape", Ints{3, 3}}}},
      {{2, 3, 8, 8}, {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}},
      {{1, 2, 9, 7},
       {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}}},
      {{1, 2, 10, 11},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 1}},
        {"ceil_mode", int64_t{1}}}},
      {{1, 1, 11, 6},
       {{"kernel_shape", Ints{2, 3}}, {"strides", Ints{3, 2}}, {"ceil_mode", int64_t{1}}}},
      {{1, 3, 9, 9},
       {{"kernel_shape", Ints{3, 3}},
        {"strides", Ints{2, 2}},
        {"auto_pad", std::string("SAME_UPPER")}}},
      {{1, 3, 8, 9},
       {{"kernel_shape", Ints{2, 3}},
        {"strides", Ints{2, 2}},
        {"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 2, 7, 8},
       {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{1, 2}}, {"auto_pad", std::string("VALID")}}},
      {{1, 2, 20, 17},
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}},
  };
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      auto attrs = cases[i].attrs;
      if (std::string(op) == "AveragePool")
        attrs["count_include_pad"] = static_cast<int64_t>(i % 2);
      if (std::string(op) == "MaxPool" && i % 3 == 1) attrs["dilations"] = Ints{2, 1};
      Initializer x = random_tensor("float32", cases[i].x, rng);
      SCOPED_TRACE(std::string(op) + " case " + std::to_string(i));
      check_node(make_node(op, 1, attrs), {&x});
    }
  }
}

// ---- GlobalAveragePool / GlobalMaxPool ----------------------------------------------------

TEST(GlobalPoolOps, HandComputedAndCompiled) {
  Initializer x = tensor_of<float>({1, 2, 2, 2}, iota(8));
  expect_values(evaluate(make_node("GlobalAveragePool", 1), {&x})[0], {1, 2, 1, 1}, {2.5, 6.5},
                "avg");
  expect_values(evaluate(make_node("GlobalMaxPool", 1), {&x})[0], {1, 2, 1, 1}, {4, 8}, "max");
  std::mt19937_64 rng(25);
  for (Ints shape : {Ints{2, 3, 7, 9}, Ints{1, 4, 5}, Ints{1, 2, 3, 4, 5}, Ints{1, 1, 1, 1}}) {
    Initializer r = random_tensor("float32", shape, rng);
    SCOPED_TRACE("global pool " + graph::shape_str(shape));
    check_node(make_node("GlobalAveragePool", 1), {&r});
    check_node(make_node("GlobalMaxPool", 1), {&r});
  }
}

TEST(ReduceFamily, RegisteredAsReductions) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "LayerNormalization",
                         "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}) {
    const graph::OpDef* d = graph::find_op(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->pattern, graph::OpPattern::kReduction) << op;
    EXPECT_TRUE(d->evaluate && d->compute) << op;
  }
  EXPECT_EQ(graph::get_op("ReduceSum").constant_inputs, std::vector<int>{1});
}

}  // namespace
}  // namespace kiln
