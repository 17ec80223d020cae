// lower_conv_transpose: a ConvTranspose becomes a phase Conv, a pixel shuffle
// and a Slice that compute the same outputs (the interpreter runs the graph
// before and after) over strides, kernels, pads, output_padding,
// output_shape, auto_pad, groups and biases; dilated ones stay.
#include "graph/passes/lower_conv_transpose.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

struct Case {
  Ints input, weight;  // weight [C, M / group, kh, kw]
  std::map<std::string, graph::Attribute> attrs;
  bool bias = true;
};

graph::Graph lowered(const Case& c, int seed, int expect = 1) {
  GraphBuilder b(seed);
  std::string x = b.input("x", c.input);
  std::vector<std::string> in = {x, b.random_constant("w", c.weight)};
  const int64_t m = c.weight[1] * std::get<int64_t>(c.attrs.count("group") ? c.attrs.at("group")
                                                                           : graph::Attribute{1});
  if (c.bias) in.push_back(b.random_constant("b", {m}));
  // A consumer, so the rewrite's last node must feed it.
  b.output(b.node("Relu", {b.node("ConvTranspose", in, c.attrs)}));
  graph::Graph before = b.graph();
  return test::check_pass_preserves(before, b.inputs(), [&](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_conv_transpose(h), expect);
  });
}

// U-Net's upsampling: 2x2 stride 2 is a 1x1 conv to 4x the channels.
TEST(LowerConvTranspose, TwoByTwoStrideTwoIsAOneByOneConv) {
  graph::Graph g = lowered({{1, 6, 5, 7}, {6, 4, 2, 2}, {{"strides", Ints{2, 2}}}}, 91);
  EXPECT_EQ(test::count_op(g, "ConvTranspose"), 0);
  const graph::Node& conv = g.nodes.at(0);
  ASSERT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(g.initializers.at(conv.inputs[1]).type.shape, (Ints{16, 6, 1, 1}));
  EXPECT_EQ(test::count_op(g, "Slice"), 0);
}

TEST(LowerConvTranspose, StridesKernelsAndPads) {
  int seed = 100;
  for (int64_t k : {1, 2, 3, 4, 5})
    for (int64_t s : {1, 2, 3})
      for (int64_t p : {0, 1, 2, 4}) {
        if (p > 0 && 2 * p >= (3 - 1) * s + k) continue;  // an empty output on 3 rows
        SCOPED_TRACE("k " + std::to_string(k) + " s " + std::to_string(s) + " p " +
                     std::to_string(p));
        lowered({{1, 3, 3, 4}, {3, 2, k, k}, {{"strides", Ints{s, s}}, {"pads", Ints{p, p, p, p}}}},
                ++seed);
      }
}

TEST(LowerConvTranspose, UnequalDimsOutputPaddingAndShapes) {
  // 3x3 stride 2 pad 1 output_padding 1: the decoder's exact 2x upsampling.
  lowered({{1, 4, 6, 5},
           {4, 3, 3, 3},
           {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}},
          201);
  lowered({{2, 3, 4, 5},
           {3, 2, 4, 3},
           {{"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}, {"output_padding", Ints{1, 2}}}},
          202);
  lowered({{1, 2, 4, 4}, {2, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"output_shape", Ints{9, 8}}}},
          203);
  lowered({{1, 2, 5, 3},
           {2, 2, 3, 2},
           {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
          204);
  lowered({{1, 2, 5, 3},
           {2, 2, 3, 3},
           {{"strides", Ints{3, 2}}, {"auto_pad", std::string("SAME_LOWER")}}},
          205);
}

TEST(LowerConvTranspose, GroupsAndNoBias) {
  lowered({{1, 4, 3, 3}, {4, 3, 3, 3}, {{"strides", Ints{2, 2}}, {"group", int64_t{2}}}}, 301);
  lowered({{1, 4, 3, 3},
           {4, 1, 4, 4},
           {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{4}}},
           false},
          302);
}

TEST(LowerConvTranspose, DilatedOnesStay) {
  graph::Graph g = lowered(
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {{"strides", Ints{2, 2}}, {"dilations", Ints{2, 2}}}}, 401, 0);
  EXPECT_EQ(test::count_op(g, "ConvTranspose"), 1);
}

}  // namespace
}  // namespace kiln
