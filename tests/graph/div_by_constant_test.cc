// div_by_constant: Div by a float32 scalar constant becomes Mul by its
// reciprocal (within one ulp of the division; exact for powers of two), and
// every other Div stays.
#include "graph/passes/div_by_constant.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;

std::vector<std::string> op_types(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

// GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2))).
TEST(DivByConstant, GeluDivisionBecomesAMultiply) {
  GraphBuilder b(51);
  std::string x = b.input("x", {3, 37}, "float32", -4, 4);
  std::string d = b.node("Div", {x, b.constant("sqrt2", test::tensor_of<float>({}, {1.4142135f}))});
  std::string e = b.node("Erf", {d});
  e = b.node("Add", {e, b.constant("one", test::tensor_of<float>({}, {1}))});
  b.output(b.node("Mul",
                  {b.node("Mul", {x, e}), b.constant("half", test::tensor_of<float>({}, {0.5f}))}));
  graph::Graph g = test::check_pass_preserves(
      b.graph(), b.inputs(),
      [](graph::Graph& h) { EXPECT_EQ(graph::passes::div_by_constant(h), 1); }, 1e-6);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Mul", "Erf", "Add", "Mul", "Mul"}));
  const graph::Initializer& r = g.initializers.at(g.nodes[0].inputs[1]);
  EXPECT_EQ(r.as<float>()[0], 1.0f / 1.4142135f);
}

TEST(DivByConstant, PowerOfTwoIsExact) {
  GraphBuilder b(52);
  std::string x = b.input("x", {4, 9});
  b.output(b.node("Div", {x, b.constant("eight", test::tensor_of<float>({1}, {8}))}));
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::div_by_constant(g), 1);
  auto want = graph::run_graph(b.graph(), b.inputs());
  auto got = graph::run_graph(g, b.inputs());
  EXPECT_EQ(got.begin()->second.data, want.begin()->second.data);
}

TEST(DivByConstant, OtherDivisionsStay) {
  GraphBuilder b(53);
  std::string x = b.input("x", {2, 3});
  std::string y = b.input("y", {2, 3}, "float32", 1, 2);
  b.output(b.node("Div", {x, y}));                                           // not a constant
  b.output(b.node("Div", {x, b.random_constant("per_column", {3}, 1, 2)}));  // not a scalar
  b.output(b.node("Div", {x, b.constant("zero", test::tensor_of<float>({}, {0}))}));
  b.output(b.node("Div", {x, b.constant("tiny", test::tensor_of<float>({}, {1e-39f}))}));
  b.output(b.node("Div", {b.constant("c", test::tensor_of<float>({}, {3})), x}));  // c / x
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::div_by_constant(g), 0);
  EXPECT_EQ(op_types(g), op_types(b.graph()));
}

}  // namespace
}  // namespace kiln
