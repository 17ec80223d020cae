// pad_channels: channel counts whose blocks would fill a quarter of a vector
// or less are padded inside the convolutions' chains. The interpreter runs
// the graph before and after (the padded channels must not reach a real
// one: a NaN there times a zero weight would), and the convolutions' weights
// are checked for the padded counts.
#include "graph/passes/pad_channels.h"

#include <gtest/gtest.h>

#include "graph_builder.h"

namespace kiln {
namespace {

using graph::passes::pad_channels;
using graph::passes::padded_channel_count;
using test::GraphBuilder;
using Ints = std::vector<int64_t>;

TEST(PadChannels, PaddedCountRule) {
  EXPECT_EQ(padded_channel_count(58, 16), 64);    // blocks of 2 -> 16
  EXPECT_EQ(padded_channel_count(116, 16), 128);  // blocks of 4
  EXPECT_EQ(padded_channel_count(58, 8), 64);     // AVX2: blocks of 2 of 8 lanes
  EXPECT_EQ(padded_channel_count(34, 16), 40);    // 48 adds 14 (> 1/8): 40 adds 6
  EXPECT_EQ(padded_channel_count(29, 4), 32);     // NEON: blocks of 1 of 4 lanes
  EXPECT_EQ(padded_channel_count(58, 4), 58);     // blocks of 2: half a NEON vector
  // Blocks of more than a quarter vector stay.
  EXPECT_EQ(padded_channel_count(232, 16), 232);  // 8
  EXPECT_EQ(padded_channel_count(21, 16), 21);    // 7
  EXPECT_EQ(padded_channel_count(116, 8), 116);   // 4 of 8
  EXPECT_EQ(padded_channel_count(64, 16), 64);
  // Too much padding: 3 channels would need 5 more.
  EXPECT_EQ(padded_channel_count(3, 16), 3);
  EXPECT_EQ(padded_channel_count(2, 16), 2);
}

std::map<std::string, graph::Attribute> depthwise(int64_t c) {
  return {{"group", c}, {"pads", Ints{1, 1, 1, 1}}};
}

Ints weight_shape(const graph::Graph& g, const std::string& conv) {
  for (const graph::Node& n : g.nodes)
    if (n.name == conv) return g.initializers.at(n.inputs[1]).type.shape;
  ADD_FAILURE() << "no node " << conv;
  return {};
}

int count_ops(const graph::Graph& g, const std::string& op) {
  int k = 0;
  for (const graph::Node& n : g.nodes) k += n.op_type == op;
  return k;
}

// ShuffleNetV2's unit: a channel split, a branch of 1x1 -> depthwise 3x3 ->
// 1x1 on 58 channels, an SE-like gate, the concat.
graph::Graph shuffle_unit(GraphBuilder& b, int64_t c, int64_t h, int64_t w) {
  std::string x = b.input("x", {1, 2 * c, h, w});
  auto halves = b.node_n("Split", {x, b.ints("split", {c, c})}, 2, {{"axis", int64_t{1}}});
  std::string a = b.node(
      "Conv", {halves[1], b.random_constant("w1", {c, c, 1, 1}), b.random_constant("b1", {c})}, {},
      "conv1");
  a = b.node("Relu", {a});
  a = b.node("Conv", {a, b.random_constant("wd", {c, 1, 3, 3}), b.random_constant("bd", {c})},
             depthwise(c), "dw");
  a = b.node("Mul", {a, b.random_constant("scale", {c, 1, 1})});
  a = b.node("Div", {a, b.random_constant("divisor", {1, c, 1, 1}, 0.5, 2)});
  std::string s = b.node("GlobalAveragePool", {a});
  s = b.node("Conv", {s, b.random_constant("ws", {c, c, 1, 1})}, {}, "se");
  s = b.node("Sigmoid", {s});
  a = b.node("Mul", {a, s});
  a = b.node("Conv", {a, b.random_constant("w2", {c, c, 1, 1}), b.random_constant("b2", {c})}, {},
             "conv2");
  a = b.node("Clip",
             {a, b.random_constant("lo", {}, -0.5, -0.4), b.random_constant("hi", {}, 4, 5)});
  b.output(b.node("Concat", {halves[0], a}, {{"axis", int64_t{1}}}));
  return b.graph();
}

TEST(PadChannels, ShuffleUnitOn58Channels) {
  for (int64_t lanes : {16, 8}) {
    GraphBuilder b(91);
    graph::Graph before = shuffle_unit(b, 58, 7, 9);
    graph::Graph g = test::check_pass_preserves(before, b.inputs(), [&](graph::Graph& h) {
      EXPECT_EQ(pad_channels(h, lanes), 2);  // conv1's output class and conv2's
    });
    EXPECT_EQ(weight_shape(g, "conv1"), (Ints{64, 58, 1, 1})) << lanes;  // the split's half stays
    EXPECT_EQ(weight_shape(g, "dw"), (Ints{64, 1, 3, 3}));
    EXPECT_EQ(weight_shape(g, "se"), (Ints{64, 64, 1, 1}));  // the gate joins the class
    EXPECT_EQ(weight_shape(g, "conv2"), (Ints{64, 64, 1, 1}));
    EXPECT_EQ(count_ops(g, "Slice"), 1);  // before the Concat
    EXPECT_EQ(count_ops(g, "Pad"), 0);
  }
}

// The class of a graph input: padded by a Pad; a graph output in a padded
// class is the Slice's.
TEST(PadChannels, GraphInputAndOutput) {
  GraphBuilder b(92);
  std::string x = b.input("x", {2, 29, 5, 6});
  std::string y = b.node("Conv", {x, b.random_constant("w", {29, 1, 3, 3})}, depthwise(29), "dw");
  y = b.node("Add", {y, x});
  b.output(y);
  graph::Graph g = test::check_pass_preserves(
      b.graph(), b.inputs(), [](graph::Graph& h) { EXPECT_EQ(pad_channels(h, 16), 1); });
  EXPECT_EQ(weight_shape(g, "dw"), (Ints{32, 1, 3, 3}));  // 29 + 3 (<= 1/8)
  EXPECT_EQ(count_ops(g, "Pad"), 1);
  EXPECT_EQ(count_ops(g, "Slice"), 1);
  EXPECT_EQ(g.outputs.at(0), y);
}

// A divisor that is not a constant would be zero in its padded channels
// (0 / 0 is a NaN, and a NaN times c3's zero weight too): the Div reads both
// operands unpadded.
TEST(PadChannels, DivByAValueReadsUnpadded) {
  GraphBuilder b(93);
  std::string x = b.input("x", {1, 8, 6, 6}, "float32", 0.5, 1);  // q > 2
  std::string p = b.node("Conv", {x, b.random_constant("w1", {58, 8, 1, 1})}, {}, "c1");
  std::string q = b.node("Conv", {x, b.random_constant("w2", {58, 8, 1, 1}, 0.5, 1)}, {}, "c2");
  std::string r = b.node("Div", {p, q});
  b.output(b.node("Conv", {r, b.random_constant("w3", {4, 58, 1, 1})}, {}, "c3"));
  graph::Graph g = test::check_pass_preserves(
      b.graph(), b.inputs(), [](graph::Graph& h) { EXPECT_EQ(pad_channels(h, 16), 2); });
  EXPECT_EQ(weight_shape(g, "c1"), (Ints{64, 8, 1, 1}));
  EXPECT_EQ(weight_shape(g, "c3"), (Ints{4, 58, 1, 1}));  // after the Div: unpadded
  EXPECT_EQ(count_ops(g, "Slice"), 2);
}

// Nothing to pad: counts whose blocks fill the vector, grouped convolutions
// (neither depthwise nor group 1), and classes without a convolution's
// output.
TEST(PadChannels, LeavesOtherGraphsAlone) {
  GraphBuilder b(94);
  std::string x = b.input("x", {1, 58, 5, 5});
  std::string y = b.node("Relu", {x});  // no convolution writes this class
  y = b.node("Conv", {y, b.random_constant("w", {64, 58, 3, 3})}, {}, "c");
  y = b.node("Conv", {y, b.random_constant("wg", {58, 32, 1, 1})}, {{"group", int64_t{2}}}, "g");
  b.output(b.node("Relu", {y}));
  graph::Graph g = b.graph();
  EXPECT_EQ(pad_channels(g, 16), 0);
  EXPECT_EQ(g.nodes.size(), b.graph().nodes.size());
}

// Several sizes and seeds, at each ISA's lanes (odd spatial sizes, channel
// counts of blocks 1-4).
TEST(PadChannels, ManyShapes) {
  int seed = 100;
  for (int64_t c : {29, 58, 116, 34, 13})
    for (int64_t lanes : {16, 8, 4}) {
      GraphBuilder b(seed++);
      graph::Graph before = shuffle_unit(b, c, 3 + c % 5, 5);
      const int64_t p = padded_channel_count(c, lanes);
      test::check_pass_preserves(before, b.inputs(), [&](graph::Graph& h) {
        EXPECT_EQ(pad_channels(h, lanes), p > c ? 2 : 0) << c << " channels, " << lanes << " lanes";
      });
    }
}

}  // namespace
}  // namespace kiln
