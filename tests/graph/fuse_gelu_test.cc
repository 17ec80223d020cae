// fuse_gelu: the exported Erf GELU pattern (Div by sqrt 2 or Mul by 1/sqrt 2,
// Erf, Add 1, and the two Muls by x and 0.5 in either association) becomes
// one Gelu with the same outputs (reference interpreter before and after);
// near misses are left alone. The Gelu op itself (opset 20, both forms)
// against its formula.
#include "graph/passes/fuse_gelu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "graph/interpreter.h"
#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;

struct Pattern {
  bool div = true;          // Div(x, sqrt 2), else Mul(1/sqrt 2, x)
  bool half_first = false;  // (x * 0.5) * e, else (x * e) * 0.5
  bool one_first = false;   // Add(1, erf), else Add(erf, 1)
  float scale = std::sqrt(2.0f);
  float one = 1.0f;
  bool extra_reader = false;  // erf's output also read outside the pattern
};

std::vector<std::string> op_types(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

GraphBuilder build(const Pattern& p) {
  GraphBuilder b(7);
  // Values in [-4, 4): GELU's curve bends around 0 and is ~x or ~0 beyond.
  std::string x = b.node("Relu", {b.input("x", {3, 37}, "float32", -4, 4)});
  x = b.node("Sub", {x, b.constant("offset", test::tensor_of<float>({}, {2.0f}))});
  std::string s =
      p.div
          ? b.node("Div", {x, b.constant("sqrt2", test::tensor_of<float>({}, {p.scale}))})
          : b.node("Mul", {b.constant("rsqrt2", test::tensor_of<float>({1}, {1.0f / p.scale})), x});
  std::string phi = b.node("Erf", {s});
  std::string c1 = b.constant("one", test::tensor_of<float>({}, {p.one}));
  std::string e = p.one_first ? b.node("Add", {c1, phi}) : b.node("Add", {phi, c1});
  std::string half = b.constant("half", test::tensor_of<float>({}, {0.5f}));
  std::string y = p.half_first ? b.node("Mul", {b.node("Mul", {half, x}), e})
                               : b.node("Mul", {b.node("Mul", {x, e}), half});
  b.output(y);
  if (p.extra_reader) b.output(b.node("Neg", {phi}));
  return b;
}

void expect_fused(const Pattern& p) {
  GraphBuilder b = build(p);
  graph::Graph after = test::check_pass_preserves(
      b.graph(), b.inputs(), [](graph::Graph& g) { EXPECT_EQ(graph::passes::fuse_gelu(g), 1); },
      1e-6);
  ASSERT_EQ(op_types(after), (std::vector<std::string>{"Relu", "Sub", "Gelu"}));
  EXPECT_EQ(after.nodes[2].outputs[0], b.graph().outputs[0]);
  EXPECT_EQ(after.nodes[2].inputs[0], after.nodes[1].outputs[0]);
}

TEST(FuseGelu, RewritesTheExportedPatterns) {
  expect_fused(Pattern{});  // PyTorch's nn.GELU() at opset <= 19
  Pattern mul;
  mul.div = false;  // after div_by_constant, constant first
  mul.one_first = true;
  expect_fused(mul);
  Pattern hf;  // 0.5 * x * (1 + erf(x / sqrt 2)), Hugging Face's order
  hf.half_first = true;
  expect_fused(hf);
}

void expect_untouched(const Pattern& p) {
  GraphBuilder b = build(p);
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::fuse_gelu(g), 0);
  EXPECT_EQ(op_types(g), op_types(b.graph()));
}

TEST(FuseGelu, LeavesNearMissesAlone) {
  Pattern two;  // Div by 2: not GELU
  two.scale = 2.0f;
  expect_untouched(two);
  Pattern shifted;  // 1.001 + erf
  shifted.one = 1.001f;
  expect_untouched(shifted);
  Pattern shared;  // erf(x / sqrt 2) needed outside the pattern
  shared.extra_reader = true;
  expect_untouched(shared);
}

// Gelu as a model writes it (opset 20): both approximations against their
// formulas in double, and an unknown approximation named with its node.
TEST(FuseGelu, GeluOpMatchesItsFormula) {
  for (const char* approx : {"none", "tanh"}) {
    GraphBuilder b(3);
    std::string x = b.input("x", {257}, "float32", -6, 6);
    b.output(b.node("Gelu", {x}, {{"approximate", std::string(approx)}}));
    auto out = graph::run_graph(b.graph(), b.inputs());
    std::vector<float> xv = b.inputs().at("x").as<float>();
    std::vector<float> yv = out.begin()->second.as<float>();
    for (size_t i = 0; i < yv.size(); ++i) {
      double v = xv[i];
      double want =
          std::string(approx) == "tanh"
              ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
              : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      EXPECT_NEAR(yv[i], want, 1e-6 * std::max(1.0, std::fabs(want))) << approx << " x=" << v;
    }
  }
  GraphBuilder b(3);
  std::string x = b.input("x", {4});
  EXPECT_THROW(b.node("Gelu", {x}, {{"approximate", std::string("sigmoid")}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace kiln
