// trim_conv_taps: kernel taps that read only padding for every output are
// dropped with their padding; the outputs stay the same (the interpreter runs
// the graph before and after), and convolutions with no such tap, or whose
// trimming would need a negative pad, stay as they are.
#include "graph/passes/trim_conv_taps.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

struct ConvCase {
  Ints input, weight, dilations, pads;
  Ints strides = {};
  int64_t group = 1;
  std::string auto_pad = "";
};

graph::Graph conv_graph(GraphBuilder& b, const ConvCase& c) {
  std::string x = b.input("x", c.input);
  std::map<std::string, graph::Attribute> attrs = {{"dilations", c.dilations}, {"group", c.group}};
  if (c.auto_pad.empty())
    attrs["pads"] = c.pads;
  else
    attrs["auto_pad"] = c.auto_pad;
  if (!c.strides.empty()) attrs["strides"] = c.strides;
  b.output(b.node(
      "Conv", {x, b.random_constant("w", c.weight), b.random_constant("b", {c.weight[0]})}, attrs));
  return b.graph();
}

// Trims `c` and checks the outputs; returns the trimmed Conv node.
graph::Node trimmed(const ConvCase& c, int expect_trimmed, int seed) {
  GraphBuilder b(seed);
  graph::Graph before = conv_graph(b, c);
  graph::Graph g = test::check_pass_preserves(before, b.inputs(), [&](graph::Graph& h) {
    EXPECT_EQ(graph::passes::trim_conv_taps(h), expect_trimmed);
  });
  EXPECT_EQ(g.nodes.size(), 1u);
  return g.nodes.at(0);
}

Ints weight_shape(const graph::Node& conv, const graph::Graph& g) {
  return g.initializers.at(conv.inputs[1]).type.shape;
}

// DeepLabV3's ASPP at dilation 36 (and 24) on a 14x14 map: only the centre
// tap lands in the input.
TEST(TrimConvTaps, AsppAtLargeDilationBecomesAOneByOne) {
  for (int64_t dilation : {14, 24, 36}) {
    GraphBuilder b(71);
    ConvCase c{{1, 5, 14, 14},
               {3, 5, 3, 3},
               {dilation, dilation},
               {dilation, dilation, dilation, dilation}};
    graph::Graph before = conv_graph(b, c);
    graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
      EXPECT_EQ(graph::passes::trim_conv_taps(h), 1);
    });
    const graph::Node& conv = g.nodes.at(0);
    EXPECT_EQ(weight_shape(conv, g), (Ints{3, 5, 1, 1})) << "dilation " << dilation;
    EXPECT_EQ(conv.attr<Ints>("pads"), (Ints{0, 0, 0, 0}));
    EXPECT_EQ(conv.attr<Ints>("kernel_shape"), (Ints{1, 1}));
  }
}

// At dilation 12 on 14 rows the corner taps reach rows 12 and 13 (and 0, 1).
TEST(TrimConvTaps, TapsThatReachTheInputStay) {
  trimmed({{1, 4, 14, 14}, {2, 4, 3, 3}, {12, 12}, {12, 12, 12, 12}}, 0, 72);
  trimmed({{1, 4, 9, 9}, {2, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}}, 0, 73);
}

TEST(TrimConvTaps, ThreeByThreeOnOnePixel) {
  GraphBuilder b(74);
  ConvCase c{{1, 8, 1, 1}, {6, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}};
  graph::Graph before = conv_graph(b, c);
  graph::Graph g = test::check_pass_preserves(
      before, b.inputs(), [](graph::Graph& h) { EXPECT_EQ(graph::passes::trim_conv_taps(h), 1); });
  EXPECT_EQ(weight_shape(g.nodes[0], g), (Ints{6, 8, 1, 1}));
}

// One dim trims, the other keeps all its taps; strides, groups, unequal pads.
TEST(TrimConvTaps, EachDimOnItsOwn) {
  {
    GraphBuilder b(75);
    ConvCase c{{1, 4, 9, 10}, {4, 2, 3, 3}, {1, 20}, {1, 20, 1, 20}, {1, 2}, 2};
    graph::Graph before = conv_graph(b, c);
    graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
      EXPECT_EQ(graph::passes::trim_conv_taps(h), 1);
    });
    EXPECT_EQ(weight_shape(g.nodes[0], g), (Ints{4, 2, 3, 1}));
    EXPECT_EQ(g.nodes[0].attr<Ints>("pads"), (Ints{1, 0, 1, 0}));
  }
  // Pads of 2 and 0 on 2 rows, a 3-row kernel: tap 0 reads rows -2 and -1.
  trimmed({{1, 3, 2, 5}, {2, 3, 3, 1}, {1, 1}, {2, 0, 0, 0}}, 1, 76);
  trimmed({{1, 2, 5, 7}, {2, 2, 5, 5}, {9, 1}, {18, 2, 18, 2}}, 1, 77);
}

TEST(TrimConvTaps, AutoPadBecomesExplicitPads) {
  GraphBuilder b(79);
  ConvCase c{{1, 3, 4, 4}, {2, 3, 3, 3}, {5, 5}, {}, {}, 1, "SAME_UPPER"};
  graph::Graph before = conv_graph(b, c);
  graph::Graph g = test::check_pass_preserves(
      before, b.inputs(), [](graph::Graph& h) { EXPECT_EQ(graph::passes::trim_conv_taps(h), 1); });
  EXPECT_FALSE(g.nodes[0].attr<std::string>("auto_pad").has_value());
  EXPECT_EQ(weight_shape(g.nodes[0], g), (Ints{2, 3, 1, 1}));
}

// Dropping the dead tap would need pads of -1 (a crop of the input): stays.
TEST(TrimConvTaps, NoNegativePads) {
  // 4 rows, pads 3, dilation 4: tap 0 reads rows -3..-2, tap 2 rows 5..6.
  trimmed({{1, 2, 4, 4}, {2, 2, 3, 1}, {4, 1}, {3, 0, 3, 0}}, 0, 80);
}

// Two convolutions share one weight: the trimmed one gets its own copy.
TEST(TrimConvTaps, SharedWeightsStayForTheOtherConv) {
  GraphBuilder b(81);
  std::string w = b.random_constant("w", {3, 3, 3, 3});
  std::string x = b.input("x", {1, 3, 6, 6});
  std::string y = b.input("y", {1, 3, 20, 20});
  b.output(b.node("Conv", {x, w}, {{"dilations", Ints{8, 8}}, {"pads", Ints{8, 8, 8, 8}}}));
  b.output(b.node("Conv", {y, w}, {{"dilations", Ints{8, 8}}, {"pads", Ints{8, 8, 8, 8}}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::trim_conv_taps(h), 1);
  });
  EXPECT_EQ(g.nodes[1].inputs[1], w);
  EXPECT_EQ(weight_shape(g.nodes[0], g), (Ints{3, 3, 1, 1}));
}

}  // namespace
}  // namespace kiln
