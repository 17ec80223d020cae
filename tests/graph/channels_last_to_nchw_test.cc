// channels_last_to_nchw: ConvNeXt's channels-last block (Transpose to NHWC,
// LayerNormalization over C, Linear, GELU, Linear, Transpose back) and its
// downsample layer run in NCHW (kiln.ChannelNorm, 1x1 Convs) with the same
// outputs through the reference interpreter, channel counts that are not a
// multiple of 16 included; near misses are left unchanged (and still
// correct).
#include "graph/passes/channels_last_to_nchw.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/passes/pipeline.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::Graph;
using test::GraphBuilder;
using Ints = std::vector<int64_t>;

const Ints kToNhwc = {0, 2, 3, 1};
const Ints kToNchw = {0, 3, 1, 2};

std::string transpose(GraphBuilder& b, const std::string& x, const Ints& perm) {
  return b.node("Transpose", {x}, {{"perm", perm}});
}

// What a block may vary to become a near miss.
struct Block {
  int64_t c = 24;
  Ints perm_in = kToNhwc, perm_out = kToNchw;
  bool weight_is_input = false;  // the first Linear's weight is a graph input
  bool ln_also_output = false;   // the LayerNorm's output is also a graph output
  bool ln_also_read = false;     // ... also read by a Softmax over C (not understood)
  bool bias_per_pixel = false;   // the first bias is [W, 4C], not [4C]
};

// x [1, c, 5, 7] -> depthwise 7x7 -> ConvNeXt's block -> residual add.
GraphBuilder convnext_block(const Block& k) {
  GraphBuilder b(5);
  const int64_t c = k.c;
  std::string x = b.input("x", {1, c, 5, 7});
  std::string d = test::conv(b, "dw", x, c, c, 7, {{"pads", Ints{3, 3, 3, 3}}, {"group", c}});
  std::string t = transpose(b, d, k.perm_in);
  std::string ln =
      b.node("LayerNormalization",
             {t, b.random_constant("ln_g", {c}, 0.5, 1.5), b.random_constant("ln_b", {c})},
             {{"axis", int64_t{-1}}, {"epsilon", 1e-6f}}, "ln");
  std::string w1 = k.weight_is_input ? b.input("w1", {c, 4 * c})
                                     : b.random_constant("w1", {c, 4 * c}, -0.3, 0.3);
  std::string h = b.node("MatMul", {ln, w1}, {}, "fc1");
  h = b.node("Add", {h, b.random_constant("b1", k.bias_per_pixel ? Ints{7, 4 * c} : Ints{4 * c})});
  h = b.node("Gelu", {h});
  h = b.node("MatMul", {h, b.random_constant("w2", {4 * c, c}, -0.2, 0.2)}, {}, "fc2");
  h = b.node("Add", {h, b.random_constant("b2", {c})});
  std::string back = transpose(b, h, k.perm_out);
  std::string s = b.node("Mul", {back, b.random_constant("layer_scale", {c, 1, 1})});
  std::string y = b.node("Add", {s, x}, {}, "residual");
  b.output(y);
  if (k.ln_also_output) b.output(ln);
  if (k.ln_also_read) b.output(b.node("Softmax", {ln}, {{"axis", int64_t{-1}}}));
  return b;
}

Graph rewrite(const GraphBuilder& b, int want_regions) {
  return test::check_pass_preserves(
      b.graph(), b.inputs(),
      [&](Graph& g) { EXPECT_EQ(graph::passes::channels_last_to_nchw(g), want_regions); }, 1e-5);
}

TEST(ChannelsLastToNchw, ConvNeXtBlockRunsInNchw) {
  for (int64_t c : {24, 40}) {
    SCOPED_TRACE("C = " + std::to_string(c));
    Block k;
    k.c = c;
    Graph g = rewrite(convnext_block(k), 1);
    EXPECT_EQ(test::count_op(g, "Transpose"), 0);
    EXPECT_EQ(test::count_op(g, "MatMul"), 0);
    EXPECT_EQ(test::count_op(g, "LayerNormalization"), 0);
    EXPECT_EQ(test::count_op(g, "kiln.ChannelNorm"), 1);
    EXPECT_EQ(test::count_op(g, "Conv"), 3);
    // The Linears are 1x1 convolutions with W^T as their weight.
    const graph::Node& fc1 = test::node_named(g, "fc1");
    EXPECT_EQ(fc1.op_type, "Conv");
    EXPECT_EQ(g.type_of(fc1.inputs[1])->shape, (Ints{4 * c, c, 1, 1}));
    EXPECT_EQ(g.type_of(fc1.outputs[0])->shape, (Ints{1, 4 * c, 5, 7}));
  }
}

// After the default pipeline, the Linears' biases and the layer scale are
// folded into the convolutions: dwconv, norm, conv, Gelu, conv, residual add.
TEST(ChannelsLastToNchw, DefaultPassesFoldBiasAndLayerScale) {
  GraphBuilder b = convnext_block({});
  Graph g =
      test::check_pass_preserves(b.graph(), b.inputs(), graph::passes::run_default_passes, 1e-5);
  EXPECT_EQ(test::op_types(g),
            (std::vector<std::string>{"Conv", "kiln.ChannelNorm", "Conv", "Gelu", "Conv", "Add"}));
}

// ConvNeXt's stem and downsample layers: Conv -> Transpose -> LayerNorm ->
// Transpose -> Conv, the second output read by two convolutions.
TEST(ChannelsLastToNchw, DownsampleNormBetweenConvs) {
  GraphBuilder b(9);
  std::string x = b.input("x", {1, 3, 10, 14});
  std::string y = test::conv(b, "stem", x, 3, 24, 2, {{"strides", Ints{2, 2}}});
  std::string t = transpose(b, y, kToNhwc);
  t = b.node("LayerNormalization", {t, b.random_constant("g", {24}), b.random_constant("bb", {24})},
             {{"axis", int64_t{3}}}, "ln");
  std::string n = transpose(b, t, kToNchw);
  b.output(test::conv(b, "down", n, 24, 40, 2, {{"strides", Ints{2, 2}}}));
  b.output(test::conv(b, "side", n, 24, 8, 1));
  Graph g = rewrite(b, 1);
  EXPECT_EQ(test::op_types(g),
            (std::vector<std::string>{"Conv", "kiln.ChannelNorm", "Conv", "Conv"}));
}

// The end Transpose's output is a graph output: it keeps its name.
TEST(ChannelsLastToNchw, EndTransposeIsAGraphOutput) {
  GraphBuilder b(3);
  std::string x = b.input("x", {2, 24, 5, 7});
  std::string t = transpose(b, x, kToNhwc);
  t = b.node("MatMul", {t, b.random_constant("w", {24, 40})});
  t = b.node("Relu", {b.node("Sub", {b.random_constant("k", {1, 1, 1, 40}), t})});
  std::string y = transpose(b, t, kToNchw);
  b.output(y);
  Graph g = rewrite(b, 1);
  EXPECT_EQ(g.outputs, (std::vector<std::string>{y}));
  EXPECT_EQ(test::op_types(g), (std::vector<std::string>{"Conv", "Sub", "Relu"}));
}

void expect_unchanged(const Block& k) {
  GraphBuilder b = convnext_block(k);
  Graph g = rewrite(b, 0);
  EXPECT_EQ(test::op_types(g), test::op_types(b.graph()));
}

TEST(ChannelsLastToNchw, NearMissesAreLeftAlone) {
  {
    SCOPED_TRACE("a Transpose in with another perm");
    Block k;
    k.perm_in = {0, 3, 2, 1};
    k.perm_out = {0, 3, 2, 1};
    expect_unchanged(k);
  }
  {
    SCOPED_TRACE("a Transpose out with another perm");
    // Its own graph: the block's residual add would not type-check.
    GraphBuilder b(1);
    std::string x = b.input("x", {1, 6, 5, 7});
    std::string t = transpose(b, x, kToNhwc);
    t = b.node("MatMul", {t, b.random_constant("w", {6, 6})});
    b.output(transpose(b, t, {0, 2, 1, 3}));
    Graph g = rewrite(b, 0);
    EXPECT_EQ(test::op_types(g), test::op_types(b.graph()));
  }
  {
    SCOPED_TRACE("a MatMul whose weight is not a constant");
    Block k;
    k.weight_is_input = true;
    expect_unchanged(k);
  }
  {
    SCOPED_TRACE("a region value that is also a graph output");
    Block k;
    k.ln_also_output = true;
    expect_unchanged(k);
  }
  {
    SCOPED_TRACE("a region value also read by a node the pass does not understand");
    Block k;
    k.ln_also_read = true;
    expect_unchanged(k);
  }
  {
    SCOPED_TRACE("a constant that is not per-channel");
    Block k;
    k.bias_per_pixel = true;
    expect_unchanged(k);
  }
}

// A region with no Transpose back (the NHWC result is a graph output) stays.
TEST(ChannelsLastToNchw, RegionWithoutAnEndIsLeftAlone) {
  GraphBuilder b(4);
  std::string x = b.input("x", {1, 16, 3, 3});
  std::string t = transpose(b, x, kToNhwc);
  b.output(b.node("MatMul", {t, b.random_constant("w", {16, 8})}));
  Graph g = rewrite(b, 0);
  EXPECT_EQ(test::op_types(g), test::op_types(b.graph()));
}

}  // namespace
}  // namespace kiln
