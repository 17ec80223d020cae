// lower_3d_windows: 3-D Conv, MaxPool and AveragePool become 2-D ones with
// the same outputs (the interpreter runs the graph before and after): one
// 2-D Conv per depth tap that reads the input, one 2-D pool per pool, no
// rank-5 window op left.
#include "graph/passes/lower_3d_windows.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

int count_rank5_windows(const graph::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes)
    if ((node.op_type == "Conv" || node.op_type == "MaxPool" || node.op_type == "AveragePool") &&
        g.type_of(node.inputs[0])->shape.size() == 5)
      ++n;
  return n;
}

TEST(Lower3dWindows, ConvIsOne2dConvPerDepthTap) {
  GraphBuilder b(31);
  std::string x = b.input("x", {2, 4, 6, 7, 8});
  std::string y =
      b.node("Conv", {x, b.random_constant("w", {6, 2, 3, 3, 2}), b.random_constant("b", {6})},
             {{"pads", Ints{1, 1, 0, 1, 1, 1}}, {"strides", Ints{2, 1, 2}}, {"group", int64_t{2}}});
  b.output(y);
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_3d_windows(h), 1);
  });
  EXPECT_EQ(count_rank5_windows(g), 0);
  EXPECT_EQ(test::count_op(g, "Conv"), 3);
  EXPECT_EQ(test::count_op(g, "Add"), 2);
  EXPECT_EQ(test::count_op(g, "Transpose"), 2);
  int biased = 0;
  for (const auto& n : g.nodes)
    if (n.op_type == "Conv") {
      EXPECT_EQ(g.type_of(n.inputs[1])->shape, (Ints{6, 2, 3, 2})) << n.name;
      EXPECT_EQ(n.attr<int64_t>("group").value_or(1), 2) << n.name;
      biased += n.inputs.size() > 2;
    }
  EXPECT_EQ(biased, 1);  // the bias is added once
}

// Depth: input 2, kernel 3, dilation 3, pads 3 and 3: one output depth,
// whose taps read positions -3, 0 and 3; taps 0 and 2 read only padding and
// are dropped (so is the padding, which no kept tap reads).
TEST(Lower3dWindows, ConvDropsTapsThatReadOnlyPadding) {
  GraphBuilder b(32);
  std::string x = b.input("x", {1, 2, 2, 4, 4});
  std::string y = b.node(
      "Conv", {x, b.random_constant("w", {3, 2, 3, 3, 3})},
      {{"pads", Ints{3, 1, 1, 3, 1, 1}}, {"strides", Ints{3, 1, 1}}, {"dilations", Ints{3, 1, 1}}});
  b.output(y);
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_3d_windows(h), 1);
  });
  EXPECT_EQ(test::count_op(g, "Conv"), 1);
  EXPECT_EQ(test::count_op(g, "Pad"), 0);
}

TEST(Lower3dWindows, PoolsReduceDepthThenPool2d) {
  GraphBuilder b(33);
  std::string x = b.input("x", {1, 3, 7, 6, 9});
  b.output(b.node("MaxPool", {x},
                  {{"kernel_shape", Ints{3, 2, 3}},
                   {"strides", Ints{2, 2, 2}},
                   {"pads", Ints{1, 0, 1, 1, 1, 1}},
                   {"ceil_mode", int64_t{1}}}));
  b.output(b.node("AveragePool", {x},
                  {{"kernel_shape", Ints{2, 3, 2}},
                   {"strides", Ints{2, 1, 2}},
                   {"pads", Ints{1, 1, 0, 1, 1, 1}},
                   {"count_include_pad", int64_t{1}}}));
  b.output(b.node("AveragePool", {x},
                  {{"kernel_shape", Ints{3, 3, 3}}, {"auto_pad", std::string("SAME_UPPER")}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_3d_windows(h), 3);
  });
  EXPECT_EQ(count_rank5_windows(g), 0);
  EXPECT_EQ(test::count_op(g, "MaxPool"), 1);
  EXPECT_EQ(test::count_op(g, "AveragePool"), 2);
  EXPECT_EQ(test::count_op(g, "Max"), 2);  // three depth taps
  EXPECT_EQ(test::count_op(g, "Transpose"), 0);
}

// ConvTranspose: one 2-D ConvTranspose per depth tap on the depth-upsampled
// input, with stride, dilation, pads and output_padding on every axis.
TEST(Lower3dWindows, ConvTransposeIsOne2dPerDepthTap) {
  GraphBuilder b(35);
  std::string x = b.input("x", {2, 4, 3, 4, 5});
  b.output(b.node("ConvTranspose",
                  {x, b.random_constant("w", {4, 3, 3, 2, 3}), b.random_constant("b", {6})},
                  {{"strides", Ints{2, 2, 1}},
                   {"dilations", Ints{2, 1, 1}},
                   {"pads", Ints{1, 0, 1, 2, 1, 0}},
                   {"output_padding", Ints{1, 1, 0}},
                   {"group", int64_t{2}}}));
  b.output(b.node("ConvTranspose", {x, b.random_constant("w2", {4, 2, 2, 3, 3})},
                  {{"strides", Ints{3, 1, 2}}, {"output_shape", Ints{9, 7, 12}}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_3d_windows(h), 2);
  });
  EXPECT_EQ(test::count_op(g, "ConvTranspose"), 5);
  for (const auto& n : g.nodes)
    if (n.op_type == "ConvTranspose") EXPECT_EQ(g.type_of(n.inputs[0])->shape.size(), 4u);
}

// What the pass leaves alone: 2-D windows.
TEST(Lower3dWindows, LeavesOtherRanksAlone) {
  GraphBuilder b(34);
  std::string x = b.input("x", {1, 3, 6, 6});
  b.output(b.node("Conv", {x, b.random_constant("w", {4, 3, 3, 3})}));
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::passes::lower_3d_windows(g), 0);
}

}  // namespace
}  // namespace kiln
