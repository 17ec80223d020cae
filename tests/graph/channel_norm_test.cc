// kiln.ChannelNorm: its evaluate equals LayerNormalization(axis -1) on the
// NHWC transpose; in NCHW[b]c (kiln_block) it equals the NCHW result re-laid
// out; the compiled kernels (NCHW and blocked, lanes 4, 8, 16) equal
// evaluate; and propagate_layout runs it blocked between blocked
// convolutions.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "graph/passes/apply_templates.h"
#include "graph/passes/propagate_layout.h"
#include "graph/passes/select_templates.h"
#include "lanes_harness.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::Attribute;
using graph::Graph;
using graph::Initializer;
using test::make_node;
using test::random_tensor;
using Ints = std::vector<int64_t>;

// [n, c, h, w] -> [n, c / b, h, w, b] (b > 0) or [n, h, w, c] (b == 0: NHWC).
Initializer relayout(const Initializer& x, int64_t b) {
  const Ints& s = x.type.shape;
  const int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  Ints shape = b ? Ints{n, c / b, s[2], s[3], b} : Ints{n, s[2], s[3], c};
  Initializer y = test::make_tensor("float32", shape);
  std::vector<float> in = x.as<float>(), out(in.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) {
        int64_t dst = b ? (((i * (c / b) + k / b) * hw) + p) * b + k % b : (i * hw + p) * c + k;
        out[dst] = in[(i * c + k) * hw + p];
      }
  std::memcpy(y.data.data(), out.data(), y.data.size());
  return y;
}

graph::Node norm_node(int64_t block, bool bias) {
  std::map<std::string, Attribute> attrs = {{"epsilon", 1e-6f}};
  if (block) attrs["kiln_block"] = block;
  graph::Node n = make_node("kiln.ChannelNorm", bias ? 3 : 2, attrs);
  n.domain = "kiln";
  return n;
}

TEST(ChannelNorm, EvaluateIsLayerNormOverChannelsOfNhwc) {
  std::mt19937_64 rng(3);
  Initializer x = random_tensor("float32", {2, 24, 5, 7}, rng, -2, 3);
  Initializer g = random_tensor("float32", {24}, rng, 0.5, 1.5);
  Initializer b = random_tensor("float32", {24}, rng, -1, 1);
  Initializer got = graph::get_op("kiln.ChannelNorm").evaluate(norm_node(0, true), {&x, &g, &b})[0];
  Initializer xt = relayout(x, 0);
  graph::Node ln = make_node("LayerNormalization", 3, {{"axis", int64_t{-1}}, {"epsilon", 1e-6f}});
  Initializer want = graph::get_op("LayerNormalization").evaluate(ln, {&xt, &g, &b})[0];
  test::expect_same(relayout(got, 0), want, 1e-6, "NHWC");
}

TEST(ChannelNorm, BlockedEvaluateAndCompiledKernels) {
  std::mt19937_64 rng(17);
  for (const Ints& shape :
       {Ints{1, 24, 5, 7}, Ints{2, 40, 3, 3}, Ints{1, 48, 1, 1}, Ints{1, 32, 4, 9}})
    for (int64_t block : {0, 8, 16})
      for (bool bias : {true, false}) {
        if (block && shape[1] % block) continue;
        SCOPED_TRACE(graph::shape_str(shape) + " block " + std::to_string(block) +
                     (bias ? " with B" : ""));
        // An offset per input: the variance must be taken around the mean.
        Initializer x = random_tensor("float32", shape, rng, 1, 4);
        Initializer g = random_tensor("float32", {shape[1]}, rng, 0.5, 1.5);
        Initializer b = random_tensor("float32", {shape[1]}, rng, -1, 1);
        std::vector<const Initializer*> in = {&x, &g};
        if (bias) in.push_back(&b);
        const graph::OpDef& op = graph::get_op("kiln.ChannelNorm");
        Initializer want = op.evaluate(norm_node(0, bias), in)[0];
        if (block) {
          Initializer xb = relayout(x, block);
          in[0] = &xb;
          Initializer got = op.evaluate(norm_node(block, bias), in)[0];
          test::expect_same(got, relayout(want, block), 1e-6, "blocked evaluate");
          test::check_all_lanes(norm_node(block, bias), in);
        } else {
          test::check_all_lanes(norm_node(0, bias), in);
        }
      }
}

// The schedule's shape in NCHW[16]c: one loop over pixels (n, h, w fused,
// the output's only root loop nest), every statistic attached inside it,
// the lane partials vectorized; in NCHW the statistics stay root stages.
TEST(ChannelNorm, BlockedIsOnePixelLoopWithVectorPartials) {
  std::mt19937_64 rng(5);
  Initializer g = random_tensor("float32", {32}, rng);
  Initializer xb = random_tensor("float32", {1, 2, 6, 5, 16}, rng);
  Initializer x = random_tensor("float32", {1, 32, 6, 5}, rng);
  for (int64_t block : {16, 0}) {
    SCOPED_TRACE("block " + std::to_string(block));
    test::Compiled c = test::compute_of(norm_node(block, false), {block ? &xb : &x, &g});
    schedule::Schedule sch = ops::schedule_generic(c.outs, 16);
    int attached = 0, stats = 0, vector_partials = 0;
    for (const schedule::Stage& s : sch.stages()) {
      if (s->is_placeholder() || s->is_output) continue;
      ++stats;
      attached += s->attach == schedule::AttachKind::At;
      if (s->op->name.find(".partials") == std::string::npos) continue;
      auto a = s->annotations.find(s->leaf_iter_vars.back().get());
      vector_partials +=
          a != s->annotations.end() && a->second == schedule::IterAnnotation::Vectorize;
    }
    EXPECT_EQ(attached, block ? stats : 0);
    EXPECT_EQ(vector_partials, block ? 2 : 0);
  }
}

TEST(ChannelNorm, RejectsBadShapes) {
  Initializer x = test::make_tensor("float32", {1, 16, 4, 4});
  Initializer g = test::make_tensor("float32", {16});
  Initializer g8 = test::make_tensor("float32", {8});
  const graph::OpDef& op = graph::get_op("kiln.ChannelNorm");
  EXPECT_THROW(op.evaluate(norm_node(8, false), {&x, &g}), graph::OpError);  // not blocked
  EXPECT_THROW(op.evaluate(norm_node(0, false), {&x, &g8}), graph::OpError);
}

// dwconv -> ChannelNorm -> 1x1 conv (ConvNeXt's block start): the norm runs
// on the blocked data, no transforms but the one in and the one out.
TEST(ChannelNorm, PropagateLayoutRunsItBlocked) {
  test::GraphBuilder b(8);
  std::string x = b.input("x", {1, 32, 6, 5});
  std::string y =
      test::conv(b, "dw", x, 32, 32, 3, {{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{32}}});
  y = b.node("kiln.ChannelNorm",
             {y, b.random_constant("g", {32}, 0.5, 1.5), b.random_constant("bb", {32})},
             {{"epsilon", 1e-6f}}, "norm");
  b.graph().nodes.back().domain = "kiln";
  b.output(test::conv(b, "pw", y, 32, 64, 1));
  Graph applied = test::check_pass_preserves(
      b.graph(), b.inputs(),
      [](Graph& g) { graph::apply_templates(g, graph::select_templates(g), {}, test::host_isa()); },
      1e-4);
  Graph g = test::check_pass_preserves(
      applied, b.inputs(), [](Graph& h) { graph::propagate_layout(h); }, 1e-4);
  const graph::Node& n = test::node_named(g, "norm");
  EXPECT_EQ(g.type_of(n.inputs[0])->shape.size(), 5u);
  EXPECT_GT(n.attr<int64_t>("kiln_block").value_or(0), 0);
  EXPECT_EQ(test::count_transforms(g), 2);
}

}  // namespace
}  // namespace kiln
