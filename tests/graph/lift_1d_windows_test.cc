// lift_1d_windows: 1-D convolutions, pools and the per-channel and
// elementwise ops between them run in 2-D on [N, C, 1, L] with the same
// outputs (the interpreter runs the graph before and after), with no
// Reshape inside a lifted chain.
#include "graph/passes/lift_1d_windows.h"

#include <gtest/gtest.h>

#include "graph/passes/lower_conv_transpose.h"
#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

std::string batch_norm(GraphBuilder& b, const std::string& x, int64_t c) {
  return b.node("BatchNormalization",
                {x, b.random_constant(x + "_scale", {c}), b.random_constant(x + "_bias", {c}),
                 b.random_constant(x + "_mean", {c}), b.random_constant(x + "_var", {c}, 0.5, 2)});
}

// A keyword-spotting net: Conv1d, BatchNorm1d, ReLU, MaxPool1d, a strided
// dilated Conv1d, AvgPool1d, AdaptiveAvgPool1d(1) and a Flatten.
TEST(Lift1dWindows, ConvNetRunsIn2d) {
  GraphBuilder b(61);
  std::string x = b.input("x", {2, 3, 50});
  x = b.node("Conv", {x, b.random_constant("w1", {8, 3, 5}), b.random_constant("b1", {8})},
             {{"pads", Ints{2, 2}}});
  x = b.node("Relu", {batch_norm(b, x, 8)});
  x = b.node("MaxPool", {x}, {{"kernel_shape", Ints{2}}, {"strides", Ints{2}}});
  x = b.node(
      "Conv", {x, b.random_constant("w2", {4, 4, 3})},
      {{"strides", Ints{2}}, {"dilations", Ints{2}}, {"pads", Ints{1, 2}}, {"group", int64_t{2}}});
  x = b.node("AveragePool", {x}, {{"kernel_shape", Ints{3}}, {"pads", Ints{1, 1}}});
  b.output(b.node("Flatten", {b.node("GlobalAveragePool", {x})}));
  graph::Graph before = b.graph();
  graph::Graph g = test::check_pass_preserves(
      before, b.inputs(), [](graph::Graph& h) { EXPECT_EQ(graph::passes::lift_1d_windows(h), 7); });
  // One Reshape into 2-D at the input, one back before the Flatten.
  EXPECT_EQ(test::count_op(g, "Reshape"), 2);
  for (const auto& n : g.nodes)
    if (n.op_type == "Conv") EXPECT_EQ(g.type_of(n.inputs[0])->shape.size(), 4u) << n.name;
}

// Residual adds of two lifted values, per-channel [C, 1] and scalar
// constants; a lifted value that is also a graph output and is read by an
// operator that stays 3-D (Transpose).
TEST(Lift1dWindows, ElementwiseConstantsAndThreeDReaders) {
  GraphBuilder b(62);
  std::string x = b.input("x", {1, 4, 9});
  std::string y = b.node("Conv", {x, b.random_constant("w", {4, 4, 3})}, {{"pads", Ints{1, 1}}});
  std::string z = b.node("Add", {y, b.random_constant("per_channel", {4, 1})});
  z = b.node("Mul", {z, b.constant("half", test::tensor_of<float>({}, {0.5f}))});
  z = b.node("Add", {z, y});
  z = b.node("Sigmoid", {z});
  b.output(y);
  b.output(b.node("Transpose", {z}, {{"perm", Ints{0, 2, 1}}}));
  b.output(b.node("Add", {z, x}));  // x has a twin (the Conv read it): lifted
  std::string other = b.input("other", {1, 4, 9});
  b.output(b.node("Add", {z, other}));  // a 3-D value with no twin: stays 3-D
  graph::Graph before = b.graph();
  graph::Graph g = test::check_pass_preserves(
      before, b.inputs(), [](graph::Graph& h) { EXPECT_EQ(graph::passes::lift_1d_windows(h), 6); });
  EXPECT_EQ(g.type_of(g.outputs[0])->shape, (Ints{1, 4, 9}));
}

// ConvTranspose1d: lifted, then lowered to a phase Conv like a 2-D one.
TEST(Lift1dWindows, TransposedConvThenLowered) {
  GraphBuilder b(63);
  std::string x = b.input("x", {1, 3, 7});
  b.output(b.node("ConvTranspose",
                  {x, b.random_constant("w", {3, 2, 4}), b.random_constant("b", {2})},
                  {{"strides", Ints{2}}, {"pads", Ints{1, 1}}, {"output_padding", Ints{1}}}));
  graph::Graph before = b.graph();
  graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lift_1d_windows(h), 1);
    EXPECT_EQ(graph::passes::lower_conv_transpose(h), 1);
  });
  EXPECT_EQ(test::count_op(g, "ConvTranspose"), 0);
}

// Weights that are graph inputs (ONNX's node tests): Reshaped to 4-D like
// the data.
TEST(Lift1dWindows, ComputedWeights) {
  GraphBuilder b(63);
  std::string x = b.input("x", {1, 2, 7});
  std::string w = b.input("w", {3, 2, 3});
  std::string wt = b.input("wt", {3, 2, 2});
  b.output(b.node("Conv", {x, w}, {{"pads", Ints{1, 1}}}));
  b.output(b.node("ConvTranspose", {b.node("Relu", {b.node("Conv", {x, w})}), wt},
                  {{"strides", Ints{2}}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lift_1d_windows(h), 4);
  });
  for (const auto& n : g.nodes)
    if (n.op_type == "Conv" || n.op_type == "ConvTranspose")
      EXPECT_EQ(g.type_of(n.inputs[1])->shape.size(), 4u) << n.name;
}

// Sequences without 1-D windows keep their 3-D ops.
TEST(Lift1dWindows, NoWindowsNoChange) {
  GraphBuilder b(64);
  std::string x = b.input("x", {2, 5, 8});
  b.output(b.node("Relu", {b.node("MatMul", {x, b.random_constant("w", {8, 8})})}));
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::lift_1d_windows(g), 0);
  EXPECT_EQ(g.nodes.size(), 2u);
}

}  // namespace
}  // namespace kiln
