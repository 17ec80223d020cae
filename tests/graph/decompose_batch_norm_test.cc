// decompose_batch_norm: a BatchNormalization left after folding becomes
// Mul by a per-channel scale and Add of a per-channel shift (the same values
// within float rounding), on inputs of rank 2 to 5; a BN whose parameters
// are not constants stays.
#include "graph/passes/decompose_batch_norm.h"

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

std::string batch_norm(GraphBuilder& b, const std::string& x, int64_t c, const std::string& tag,
                       std::map<std::string, graph::Attribute> attrs = {}) {
  return b.node("BatchNormalization",
                {x, b.random_constant(tag + ".gamma", {c}, 0.5, 1.5),
                 b.random_constant(tag + ".beta", {c}, -0.5, 0.5),
                 b.random_constant(tag + ".mean", {c}, -0.3, 0.3),
                 b.random_constant(tag + ".var", {c}, 0.2, 2.0)},
                std::move(attrs));
}

TEST(DecomposeBatchNorm, PreActivationBatchNormsBecomeScaleAndShift) {
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{2, 5}, {1, 7, 9}, {2, 3, 4, 5}, {1, 4, 2, 3, 3}}) {
    GraphBuilder b(61);
    std::string x = b.input("x", shape, "float32", -3, 3);
    std::string y = batch_norm(b, x, shape[1], "bn", {{"epsilon", 1e-3f}});
    b.output(b.node("Relu", {y}));
    graph::Graph g = test::check_pass_preserves(
        b.graph(), b.inputs(),
        [](graph::Graph& h) { EXPECT_EQ(graph::passes::decompose_batch_norm(h), 1); }, 1e-6);
    EXPECT_EQ(op_types(g), (std::vector<std::string>{"Mul", "Add", "Relu"}));
    std::vector<int64_t> per_channel(shape.size() - 1, 1);
    per_channel[0] = shape[1];
    EXPECT_EQ(g.initializers.at(g.nodes[0].inputs[1]).type.shape, per_channel);
    EXPECT_EQ(g.initializers.at(g.nodes[1].inputs[1]).type.shape, per_channel);
  }
}

TEST(DecomposeBatchNorm, VariableParametersStay) {
  GraphBuilder b(62);
  std::string x = b.input("x", {1, 3, 4, 4});
  std::string mean = b.input("mean", {3});
  b.output(
      b.node("BatchNormalization", {x, b.random_constant("g", {3}), b.random_constant("b", {3}),
                                    mean, b.random_constant("v", {3}, 0.5, 1)}));
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::decompose_batch_norm(g), 0);
  EXPECT_EQ(op_types(g), op_types(b.graph()));
}

}  // namespace
}  // namespace kiln
