// Operators that ONNX defines as functions of other operators import as
// their bodies where kiln has no definition of its own
// (frontend/inline_functions.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"
#include "graph/interpreter.h"

using kiln::frontend::import_onnx;
using kiln::test::OnnxBuilder;
using ::testing::StartsWith;

namespace {

kiln::graph::Initializer f32_tensor(const std::vector<int64_t>& shape,
                                    const std::vector<float>& v) {
  kiln::graph::Initializer t;
  t.type = {"float32", shape};
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

// MeanVarianceNormalization (a function in every opset that has it): the
// body's nodes replace it, named after it, and compute (x - mean) / sqrt(var)
// over axes 0, 2, 3 (its default).
TEST(InlineFunctions, MeanVarianceNormalizationRunsAsItsBody) {
  for (int64_t opset : {9, 13}) {
    OnnxBuilder b(opset);
    b.input("x", {"2", "3", "2", "2"});
    b.output("y", {"2", "3", "2", "2"});
    b.node("MeanVarianceNormalization", "mvn", {"x"}, {"y"});
    kiln::graph::Graph g = import_onnx(b.write("mvn" + std::to_string(opset) + ".onnx"));
    ASSERT_GT(g.nodes.size(), 1u) << opset;
    for (const auto& n : g.nodes) {
      EXPECT_NE(n.op_type, "MeanVarianceNormalization");
      EXPECT_THAT(n.name, StartsWith("mvn/"));
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-2.f, 3.f);
    std::vector<float> x(24);
    for (float& v : x) v = d(rng);
    auto out = kiln::graph::run_graph(g, {{"x", f32_tensor({2, 3, 2, 2}, x)}});
    std::vector<float> y = out.at("y").as<float>();
    ASSERT_EQ(y.size(), x.size());
    for (int c = 0; c < 3; ++c) {
      double sum = 0, sq = 0;
      for (int n = 0; n < 2; ++n)
        for (int s = 0; s < 4; ++s) sum += x[(n * 3 + c) * 4 + s];
      const double mean = sum / 8;
      for (int n = 0; n < 2; ++n)
        for (int s = 0; s < 4; ++s) sq += std::pow(x[(n * 3 + c) * 4 + s] - mean, 2);
      const double sd = std::sqrt(sq / 8);
      for (int n = 0; n < 2; ++n)
        for (int s = 0; s < 4; ++s) {
          const int i = (n * 3 + c) * 4 + s;
          EXPECT_NEAR(y[i], (x[i] - mean) / sd, 1e-4) << "opset " << opset << " at " << i;
        }
    }
  }
}

// An operator that kiln runs itself is never expanded, though ONNX gives it
// a body (Softmax at opset 13, HardSwish at 14).
TEST(InlineFunctions, SupportedOperatorsStayWhole) {
  OnnxBuilder b(14);
  b.input("x", {"2", "5"});
  b.output("y", {"2", "5"});
  b.node("Softmax", "sm", {"x"}, {"s"});
  b.node("HardSwish", "hs", {"s"}, {"y"});
  kiln::graph::Graph g = import_onnx(b.write("softmax_hardswish.onnx"));
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Softmax");
  EXPECT_EQ(g.nodes[1].op_type, "HardSwish");
}

}  // namespace
