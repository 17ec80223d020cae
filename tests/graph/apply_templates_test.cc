// apply_templates: the kiln.Template rewrite of selected nodes, with weights
// packed at build time; packings checked against plain loops on random data
// and every rewrite against run_graph on the original graph.
#include "graph/passes/apply_templates.h"

#include <gtest/gtest.h>

#include "graph/passes/select_templates.h"
#include "graph_builder.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::Graph;
using graph::TemplateUse;
using test::check_pass_preserves;
using test::conv;
using test::GraphBuilder;
using test::node_named;
using test::op_types;
using test::pads;
using Strings = std::vector<std::string>;

// select_templates + apply_templates on a copy of b's graph, checked against
// run_graph; `uses` receives apply_templates' result.
Graph rewrite(const GraphBuilder& b, std::vector<TemplateUse>* uses,
              const std::map<std::string, std::string>& configs = {}) {
  return check_pass_preserves(
      b.graph(), b.inputs(),
      [&](Graph& g) {
        *uses = graph::apply_templates(g, graph::select_templates(g), configs, test::host_isa());
      },
      1e-4);
}

const graph::Initializer& input_constant(const Graph& g, const graph::Node& n, size_t i) {
  return g.initializers.at(n.inputs.at(i));
}

// OIHW -> [OC/ocb, IC/icb, KH, KW, icb, ocb], written out as the layout says.
std::vector<float> reference_conv_pack(const std::vector<float>& w, int64_t oc, int64_t ic,
                                       int64_t kh, int64_t kw, int64_t icb, int64_t ocb) {
  std::vector<float> out(w.size());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t dst = ((((o / ocb) * (ic / icb) + i / icb) * kh + y) * kw + x) * icb * ocb +
                        (i % icb) * ocb + o % ocb;
          out[dst] = w[((o * ic + i) * kh + y) * kw + x];
        }
  return out;
}

TEST(ApplyTemplates, ConvBecomesBlockedTemplateWithPackedWeightAndBias) {
  GraphBuilder b(11);
  std::string x = b.input("x", {1, 8, 6, 6});
  b.output(conv(b, "c1", x, 8, 32, 3, pads(1)));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  EXPECT_EQ(op_types(g),
            (Strings{"kiln.LayoutTransform", "kiln.Template", "Add", "kiln.LayoutTransform"}));
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].template_name, "conv2d_NCHWc.x86");
  EXPECT_FALSE(uses[0].configured);
  // Fallback blocks: ic_bn = 8 (C = 8), oc_bn = 16 (OC = 32).
  EXPECT_EQ(g.nodes[0].attr<int64_t>("dst_block"), 8);
  EXPECT_EQ(g.nodes[3].attr<int64_t>("src_block"), 16);
  EXPECT_EQ(g.nodes[3].outputs[0], "c1");  // the graph keeps its value names
  const graph::Node& t = g.nodes[1];
  EXPECT_EQ(t.name, "c1");
  EXPECT_EQ(t.attr<std::string>("workload"), uses[0].workload);
  const graph::Initializer& packed = input_constant(g, t, 1);
  EXPECT_EQ(packed.type.shape, (std::vector<int64_t>{2, 1, 3, 3, 8, 16}));
  EXPECT_EQ(packed.as<float>(),
            reference_conv_pack(b.graph().initializers.at("c1_w").as<float>(), 32, 8, 3, 3, 8, 16));
  const graph::Initializer& bias = input_constant(g, g.nodes[2], 1);
  EXPECT_EQ(bias.type.shape, (std::vector<int64_t>{1, 2, 1, 1, 16}));
  EXPECT_EQ(bias.as<float>(), b.graph().initializers.at("c1_b").as<float>());
}

TEST(ApplyTemplates, ExplicitConfigSetsTheBlocks) {
  GraphBuilder b(12);
  std::string x = b.input("x", {1, 8, 5, 5});
  b.output(conv(b, "c1", x, 8, 16, 3, pads(1), /*bias=*/false));
  std::string key = graph::select_templates(b.graph()).at(0).workload.key();
  std::string cfg = test::conv_config_with_blocks("conv2d_NCHWc.x86", key, 4, 8);
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses, {{key, cfg}});
  EXPECT_EQ(op_types(g),
            (Strings{"kiln.LayoutTransform", "kiln.Template", "kiln.LayoutTransform"}));
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_TRUE(uses[0].configured);
  EXPECT_EQ(g.nodes[1].attr<std::string>("config"), cfg);
  EXPECT_EQ(g.nodes[0].attr<int64_t>("dst_block"), 4);
  EXPECT_EQ(g.nodes[2].attr<int64_t>("src_block"), 8);
  const graph::Initializer& packed = input_constant(g, g.nodes[1], 1);
  EXPECT_EQ(packed.type.shape, (std::vector<int64_t>{2, 2, 3, 3, 4, 8}));
  EXPECT_EQ(packed.as<float>(),
            reference_conv_pack(b.graph().initializers.at("c1_w").as<float>(), 16, 8, 3, 3, 4, 8));
  // Another key's config does not apply.
  g = rewrite(b, &uses, {{"conv2d_NCHWc.x86(other)", cfg}});
  EXPECT_FALSE(uses[0].configured);
}

TEST(ApplyTemplates, DepthwiseWeightIsPackedPerChannelBlock) {
  GraphBuilder b(13);
  std::string x = b.input("x", {1, 16, 5, 5});
  b.output(conv(b, "dw", x, 16, 16, 3,
                {{"group", int64_t{16}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].template_name, "depthwise_conv2d_NCHWc.x86");
  const graph::Initializer& packed = input_constant(g, node_named(g, "dw"), 1);
  EXPECT_EQ(packed.type.shape, (std::vector<int64_t>{1, 1, 3, 3, 1, 16}));
  EXPECT_EQ(packed.as<float>(),
            reference_conv_pack(b.graph().initializers.at("dw_w").as<float>(), 16, 1, 3, 3, 1, 16));
}

// OIHW [OC, ICg, KH, KW] of G groups -> [G, OCg/ocb, ICg/icb, KH, KW, icb, ocb],
// written out as group_conv2d.h's layout says.
std::vector<float> reference_group_pack(const std::vector<float>& w, int64_t groups, int64_t oc,
                                        int64_t icg, int64_t kh, int64_t kw, int64_t icb,
                                        int64_t ocb) {
  int64_t ocg = oc / groups;
  std::vector<float> out(w.size());
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < ocg; ++o)
      for (int64_t i = 0; i < icg; ++i)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x) {
            int64_t dst =
                (((((g * (ocg / ocb) + o / ocb) * (icg / icb) + i / icb) * kh + y) * kw + x) * icb +
                 i % icb) *
                    ocb +
                o % ocb;
            out[dst] = w[(((g * ocg + o) * icg + i) * kh + y) * kw + x];
          }
  return out;
}

// A grouped 3x3 of 8 groups, 4 input and 8 output channels each (unequal
// widths: group_conv2d_lanes_NCHWc.x86 does not apply): the group template,
// blocks within a group (4 and 8 by the fallback; 2 and 4 by a config), the
// weight packed group by group, the bias blocked like conv's.
TEST(ApplyTemplates, GroupedConvBecomesTheGroupTemplate) {
  GraphBuilder b(15);
  std::string x = b.input("x", {1, 32, 6, 7});
  b.output(conv(b, "gc", x, 32, 64, 3,
                {{"group", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  EXPECT_EQ(op_types(g),
            (Strings{"kiln.LayoutTransform", "kiln.Template", "Add", "kiln.LayoutTransform"}));
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].template_name, "group_conv2d_NCHWc.x86");
  EXPECT_EQ(g.nodes[0].attr<int64_t>("dst_block"), 4);
  EXPECT_EQ(g.nodes[3].attr<int64_t>("src_block"), 8);
  const std::vector<float>& w = b.graph().initializers.at("gc_w").as<float>();
  const graph::Initializer& packed = input_constant(g, node_named(g, "gc"), 1);
  EXPECT_EQ(packed.type.shape, (std::vector<int64_t>{8, 1, 3, 3, 4, 8}));
  EXPECT_EQ(packed.as<float>(), reference_group_pack(w, 8, 64, 4, 3, 3, 4, 8));
  EXPECT_EQ(input_constant(g, g.nodes[2], 1).type.shape, (std::vector<int64_t>{1, 8, 1, 1, 8}));

  std::string key = uses[0].workload;
  std::string cfg = test::conv_config_with_blocks("group_conv2d_NCHWc.x86", key, 2, 4);
  g = rewrite(b, &uses, {{key, cfg}});
  EXPECT_TRUE(uses[0].configured);
  EXPECT_EQ(g.nodes[0].attr<int64_t>("dst_block"), 2);
  const graph::Initializer& packed2 = input_constant(g, node_named(g, "gc"), 1);
  EXPECT_EQ(packed2.type.shape, (std::vector<int64_t>{16, 2, 3, 3, 2, 4}));
  EXPECT_EQ(packed2.as<float>(), reference_group_pack(w, 8, 64, 4, 3, 3, 2, 4));
}

// ResNeXt's grouped 3x3 (8 groups of 4 channels): four whole groups per
// block of 16, conv2d_NCHWc's block on both sides; the weight
// [C/16, 4, 3, 3, 16] holds output channel c's taps at lane c % 16.
TEST(ApplyTemplates, NarrowGroupsBecomeTheLanesTemplate) {
  GraphBuilder b(16);
  std::string x = b.input("x", {1, 32, 6, 7});
  b.output(conv(b, "gc", x, 32, 32, 3,
                {{"group", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].template_name, "group_conv2d_lanes_NCHWc.x86");
  EXPECT_EQ(g.nodes[0].attr<int64_t>("dst_block"), 16);
  EXPECT_EQ(g.nodes[3].attr<int64_t>("src_block"), 16);
  const std::vector<float>& w = b.graph().initializers.at("gc_w").as<float>();
  const graph::Initializer& packed = input_constant(g, node_named(g, "gc"), 1);
  ASSERT_EQ(packed.type.shape, (std::vector<int64_t>{2, 4, 3, 3, 16}));
  const std::vector<float>& p = packed.as<float>();
  for (int64_t c = 0; c < 32; ++c)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t t = 0; t < 9; ++t)
        ASSERT_EQ(p[(((c / 16) * 4 + j) * 9 + t) * 16 + c % 16], w[(c * 4 + j) * 9 + t]);
}

// Groups of 16 output channels with 2 input channels each (OC = 8 x 16, a
// stride of 2): output blocks of 16 inside a group, input blocks of 2.
TEST(ApplyTemplates, GroupedConvWithWideOutputGroups) {
  GraphBuilder b(16);
  std::string x = b.input("x", {1, 16, 7, 9});
  b.output(conv(b, "gc", x, 16, 128, 3,
                {{"group", int64_t{8}}, {"strides", std::vector<int64_t>{2, 2}}}));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].template_name, "group_conv2d_NCHWc.x86");
  const graph::Initializer& packed = input_constant(g, node_named(g, "gc"), 1);
  EXPECT_EQ(packed.type.shape, (std::vector<int64_t>{8, 1, 3, 3, 2, 16}));
  EXPECT_EQ(packed.as<float>(), reference_group_pack(b.graph().initializers.at("gc_w").as<float>(),
                                                     8, 128, 2, 3, 3, 2, 16));
}

TEST(ApplyTemplates, ConvsReadingOneActivationShareItsTransform) {
  GraphBuilder b(14);
  std::string x = b.input("x", {1, 8, 5, 5});
  b.output(conv(b, "a", x, 8, 16, 3, pads(1)));
  b.output(conv(b, "b", x, 8, 8, 1));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  int from_x = 0;
  for (const graph::Node& n : g.nodes)
    from_x += n.op_type == "kiln.LayoutTransform" && n.inputs[0] == x;
  EXPECT_EQ(from_x, 1);
  EXPECT_EQ(test::count_transforms(g), 3);
  EXPECT_EQ(node_named(g, "a").inputs[0], node_named(g, "b").inputs[0]);
  ASSERT_EQ(uses.size(), 2u);  // one per node, in node order
  EXPECT_NE(uses[0].workload.find("kernel=[16,8,3,3]"), std::string::npos);
  EXPECT_NE(uses[1].workload.find("kernel=[8,8,1,1]"), std::string::npos);
}

// Bp[ceil(N / bn), K, bn] of alpha * B^T, zero past column N.
TEST(ApplyTemplates, GemmPacksAlphaTimesBAndScalesC) {
  GraphBuilder b(15);
  std::string a = b.input("a", {3, 6});
  std::string bt = b.random_constant("bt", {20, 6});
  std::string c = b.random_constant("c", {20});
  b.output(b.node("Gemm", {a, bt, c}, {{"transB", int64_t{1}}, {"alpha", 2.0f}, {"beta", 0.5f}},
                  "gemm"));
  // Panels of 16 columns (AVX-512's fallback for N = 20), whatever this
  // host's fallback is (AVX2's: one panel of 20): the second panel is zero
  // past column N.
  const std::string key = "dense_pack.x86(data=[3,6],weight=[6,20],dtype=float32)";
  const std::string cfg =
      ops::get_template("dense_pack.x86")
          .fallback(
              ops::Workload::parse(key),
              codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512").isa())
          .to_json();
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses, {{key, cfg}});
  EXPECT_EQ(op_types(g), (Strings{"kiln.Template", "Add"}));
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].workload, key);
  const graph::Initializer& packed = input_constant(g, g.nodes[0], 1);
  const int64_t K = 6, N = 20, bn = 16;
  ASSERT_EQ(packed.type.shape, (std::vector<int64_t>{2, K, bn}));
  std::vector<float> bv = b.graph().initializers.at(bt).as<float>(), want;
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < bn; ++j)
        want.push_back(p * bn + j < N ? 2.0f * bv[(p * bn + j) * K + k] : 0.0f);
  EXPECT_EQ(packed.as<float>(), want);
  std::vector<float> cv = b.graph().initializers.at(c).as<float>();
  for (float& v : cv) v *= 0.5f;
  EXPECT_EQ(input_constant(g, g.nodes[1], 1).as<float>(), cv);
  EXPECT_EQ(g.nodes[1].outputs[0], "gemm");
}

TEST(ApplyTemplates, MatMulWithAConstantRunsAsDenseOfTheGraphShape) {
  GraphBuilder b(16);
  std::string a = b.input("a", {2, 3, 6});
  b.output(b.node("MatMul", {a, b.random_constant("w", {6, 4})}, {}, "mm"));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  ASSERT_EQ(op_types(g), (Strings{"kiln.Template"}));
  EXPECT_EQ(g.nodes[0].inputs[0], a);
  EXPECT_EQ(g.nodes[0].attr<std::vector<int64_t>>("output_shape"), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(input_constant(g, g.nodes[0], 1).type.shape, (std::vector<int64_t>{1, 6, 4}));
}

TEST(ApplyTemplates, BatchMatmulReadsBothActivationsAsGiven) {
  GraphBuilder b(17);
  std::string q = b.input("q", {2, 4, 6});
  std::string k = b.input("k", {2, 6, 5});
  b.output(b.node("MatMul", {q, k}, {}, "qk"));
  std::vector<TemplateUse> uses;
  Graph g = rewrite(b, &uses);
  ASSERT_EQ(op_types(g), (Strings{"kiln.Template"}));
  EXPECT_EQ(g.nodes[0].inputs, (Strings{q, k}));
  EXPECT_EQ(g.nodes[0].attr<std::string>("template"), "batch_matmul.x86");
  EXPECT_EQ(uses[0].template_name, "batch_matmul.x86");
}

TEST(ApplyTemplates, UnselectedNodesStayAndBadInputsThrow) {
  GraphBuilder b(18);
  std::string x = b.input("x", {1, 4, 5, 5});
  std::string y = conv(b, "c", x, 4, 4, 1);
  b.output(b.node("Relu", {y}, {}, "relu"));
  Graph g = b.graph();
  EXPECT_TRUE(graph::apply_templates(g, {}, {}, test::host_isa()).empty());
  EXPECT_EQ(op_types(g), (Strings{"Conv", "Relu"}));
  auto selected = graph::select_templates(g);
  auto ghost = selected;
  ghost[0].node = "ghost";
  EXPECT_THROW(graph::apply_templates(g, ghost, {}, test::host_isa()), std::invalid_argument);
  g = b.graph();
  try {
    graph::apply_templates(g, selected, {{selected[0].workload.key(), "{\"knobs\": {}}"}},
                           test::host_isa());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(selected[0].workload.key()), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln
