// fuse_layer_norm: the decomposed LayerNorm pattern (ReduceMean, Sub, Pow or
// Mul, ReduceMean, Add eps, Sqrt, Div, [Mul gamma], [Add beta]) becomes one
// LayerNormalization with the same outputs (reference interpreter before and
// after), and near misses are left alone.
#include "graph/passes/fuse_layer_norm.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

struct Pattern {
  Ints shape = {2, 5, 33};
  Ints axes = {-1};
  bool mul_square = false;  // Mul(d, d) instead of Pow(d, 2)
  bool gamma = true, beta = true;
  bool gamma_first = false;   // Mul(gamma, n)
  bool axes_input = false;    // ReduceMean-18's axes input
  bool extra_reader = false;  // d also read outside the pattern
  int64_t keepdims = 1;
};

std::vector<std::string> op_types(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

GraphBuilder build(const Pattern& p) {
  GraphBuilder b(17);
  // An offset mean, as activations have: the variance must be of x - mean.
  std::string x = b.input("x", p.shape, "float32", 1, 3);
  std::string x2 = b.node("Relu", {x});  // the pattern reads a computed value
  auto reduce_mean = [&](const std::string& v) {
    std::map<std::string, graph::Attribute> attrs = {{"keepdims", p.keepdims}};
    if (p.axes_input) return b.node("ReduceMean", {v, b.ints("axes_" + v, p.axes)}, attrs);
    attrs["axes"] = p.axes;
    return b.node("ReduceMean", {v}, attrs);
  };
  std::string mean = reduce_mean(x2);
  std::string d = b.node("Sub", {x2, mean});
  std::string sq = p.mul_square
                       ? b.node("Mul", {d, d})
                       : b.node("Pow", {d, b.constant("two", test::tensor_of<float>({}, {2}))});
  std::string var = reduce_mean(sq);
  std::string ve = b.node("Add", {var, b.constant("eps", test::tensor_of<float>({1}, {1e-5f}))});
  std::string y = b.node("Div", {d, b.node("Sqrt", {ve})});
  Ints norm;
  int64_t rank = static_cast<int64_t>(p.shape.size());
  int64_t first = rank;
  for (int64_t a : p.axes) first = std::min(first, a < 0 ? a + rank : a);
  norm.assign(p.shape.begin() + first, p.shape.end());
  if (p.gamma) {
    std::string g = b.random_constant("gamma", norm);
    y = p.gamma_first ? b.node("Mul", {g, y}) : b.node("Mul", {y, g});
  }
  if (p.beta) y = b.node("Add", {y, b.random_constant("beta", norm)});
  b.output(y);
  if (p.extra_reader) b.output(b.node("Neg", {d}));
  return b;
}

void expect_fused(const Pattern& p, int64_t axis, size_t scale_and_bias) {
  GraphBuilder b = build(p);
  graph::Graph after = test::check_pass_preserves(
      b.graph(), b.inputs(),
      [](graph::Graph& g) { EXPECT_EQ(graph::passes::fuse_layer_norm(g), 1); }, 2e-5);
  ASSERT_EQ(op_types(after), (std::vector<std::string>{"Relu", "LayerNormalization"}));
  const graph::Node& ln = after.nodes[1];
  EXPECT_EQ(ln.inputs.size(), scale_and_bias);
  EXPECT_EQ(ln.attr<int64_t>("axis").value_or(-99), axis);
  EXPECT_FLOAT_EQ(ln.attr<float>("epsilon").value_or(0), 1e-5f);
  EXPECT_EQ(ln.outputs[0], b.graph().outputs[0]);
}

TEST(FuseLayerNorm, RewritesTheExportedPattern) {
  expect_fused(Pattern{}, 2, 3);
  Pattern sq;
  sq.mul_square = true;
  sq.gamma_first = true;
  expect_fused(sq, 2, 3);
  Pattern plain;  // no affine tail: Scale is a constant of ones
  plain.gamma = plain.beta = false;
  expect_fused(plain, 2, 2);
  Pattern scale_only;
  scale_only.beta = false;
  expect_fused(scale_only, 2, 2);
  Pattern two_axes;  // over the two innermost dims, axes as an input
  two_axes.shape = {3, 4, 7};
  two_axes.axes = {2, 1};
  two_axes.axes_input = true;
  expect_fused(two_axes, 1, 3);
  Pattern one;  // 1-element rows
  one.shape = {4, 1};
  expect_fused(one, 1, 3);
}

void expect_untouched(const Pattern& p) {
  GraphBuilder b = build(p);
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::fuse_layer_norm(g), 0);
  EXPECT_EQ(op_types(g), op_types(b.graph()));
}

TEST(FuseLayerNorm, LeavesNearMissesAlone) {
  Pattern shared;  // x - mean is needed outside the pattern
  shared.extra_reader = true;
  expect_untouched(shared);
  Pattern inner;  // not the innermost dims
  inner.axes = {1};
  expect_untouched(inner);
  Pattern dropped;  // keepdims 0: Sub broadcasts another way
  dropped.shape = {5, 5};
  dropped.keepdims = 0;
  dropped.gamma = dropped.beta = false;
  expect_untouched(dropped);
}

}  // namespace
}  // namespace kiln
