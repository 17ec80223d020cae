// instance_norm_as_layer_norm: InstanceNormalization becomes a LayerNorm over
// the spatial dims and a per-channel Mul and Add with the same outputs (the
// interpreter runs the graph before and after), for 3-D to 5-D inputs and
// constant or computed scale and bias.
#include "graph/passes/instance_norm.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

TEST(InstanceNorm, BecomesLayerNormMulAdd) {
  int seed = 90;
  for (const Ints& shape : {Ints{2, 3, 7}, Ints{1, 4, 5, 6}, Ints{2, 2, 3, 2, 4}}) {
    SCOPED_TRACE(graph::shape_str(shape));
    GraphBuilder b(++seed);
    std::string x = b.input("x", shape, "float32", -3, 5);
    std::string scale = b.random_constant("scale", {shape[1]}, 0.5, 2);
    std::string bias = b.random_constant("bias", {shape[1]});
    b.output(b.node("InstanceNormalization", {x, scale, bias}, {{"epsilon", 1e-3f}}));
    graph::Graph before = b.graph();
    graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
      EXPECT_EQ(graph::passes::instance_norm_as_layer_norm(h), 1);
    });
    EXPECT_EQ(test::count_op(g, "InstanceNormalization"), 0);
    EXPECT_EQ(test::count_op(g, "LayerNormalization"), 1);
  }
}

TEST(InstanceNorm, ComputedScaleAndBias) {
  GraphBuilder b(99);
  std::string x = b.input("x", {1, 3, 4, 4});
  std::string s = b.node("Abs", {b.input("s", {3})});
  std::string t = b.input("t", {3});
  b.output(b.node("InstanceNormalization", {x, s, t}));
  graph::Graph before = b.graph();
  graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::instance_norm_as_layer_norm(h), 1);
  });
  EXPECT_EQ(test::count_op(g, "Reshape"), 2);
}

}  // namespace
}  // namespace kiln
