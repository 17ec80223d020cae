// select_templates: which Conv / Gemm / MatMul nodes a tunable template
// covers, with which workload key, on graphs built by hand.
#include "graph/passes/select_templates.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "graph/passes/strategy.h"
#include "graph_builder.h"
#include "layout_graphs.h"
#include "ops/op_template.h"

namespace kiln {
namespace {

using graph::TemplateSelection;
using test::conv;
using test::GraphBuilder;
using test::pads;

// (node, template, workload key) of every selection, for one-line expectations.
std::vector<std::vector<std::string>> picks(const graph::Graph& g) {
  std::vector<std::vector<std::string>> out;
  for (const TemplateSelection& s : graph::select_templates(g)) {
    EXPECT_EQ(s.workload.template_name, s.template_name);
    out.push_back({s.node, s.template_name, s.workload.key()});
  }
  return out;
}

using Picks = std::vector<std::vector<std::string>>;

TEST(SelectTemplates, PlainDepthwiseAndGroupedConvs) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 8, 6, 7});
  std::string y = conv(b, "plain", x, 8, 16, 3, pads(1));
  std::string d = conv(b, "depthwise", y, 16, 16, 3, {{"group", int64_t{16}}});
  std::string gr = conv(b, "grouped", d, 16, 8, 1, {{"group", int64_t{2}}});
  b.output(gr);
  size_t nodes = b.graph().nodes.size();
  EXPECT_EQ(picks(b.graph()),
            (Picks{{"plain", "conv2d_NCHWc.x86",
                    "conv2d_NCHWc.x86(data=[1,8,6,7],kernel=[16,8,3,3],strides=[1,1],"
                    "pads=[1,1,1,1],dilation=[1,1],dtype=float32)"},
                   {"depthwise", "depthwise_conv2d_NCHWc.x86",
                    "depthwise_conv2d_NCHWc.x86(data=[1,16,6,7],kernel=[16,1,3,3],strides=[1,1],"
                    "pads=[0,0,0,0],dilation=[1,1],dtype=float32)"},
                   {"grouped", "group_conv2d_NCHWc.x86",
                    "group_conv2d_NCHWc.x86(data=[1,16,4,5],kernel=[8,8,1,1],strides=[1,1],"
                    "pads=[0,0,0,0],dilation=[1,1],dtype=float32)"}}));
  EXPECT_EQ(b.graph().nodes.size(), nodes);  // analysis only
}

// ResNeXt's and RegNet's grouped convs (4..32 channels per group, strides 1
// and 2), and a channel multiplier > 1 (groups = C, OC = 2C: not depthwise),
// take a group template on every ISA row: groups of 4 with equal widths the
// lanes template (its untuned default, several groups per block), 16 per
// group and the multiplier group_conv2d_NCHWc.x86; the table's first
// matching row wins, so a depthwise conv still takes the depthwise template.
TEST(SelectTemplates, GroupedConvsTakeTheGroupTemplate) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 128, 8, 8});
  std::string y = conv(b, "resnext", x, 128, 128, 3,
                       {{"group", int64_t{32}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  std::string z = conv(b, "regnet_s2", y, 128, 128, 3,
                       {{"group", int64_t{8}},
                        {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                        {"strides", std::vector<int64_t>{2, 2}}});
  std::string m = conv(b, "multiplier", z, 128, 256, 3, {{"group", int64_t{128}}});
  std::string d = conv(b, "depthwise", m, 256, 256, 1, {{"group", int64_t{256}}});
  b.output(d);
  for (const Isa& isa : {Isa{}, Isa{"x86_64-avx512", 512, 32, 2}, Isa{"x86_64-avx2", 256, 16, 2},
                         Isa{"aarch64-neon", 128, 32, 2}}) {
    auto s = graph::select_templates(b.graph(), isa);
    ASSERT_EQ(s.size(), 4u) << isa.isa_class;
    EXPECT_EQ(s[0].template_name, "group_conv2d_lanes_NCHWc.x86");
    EXPECT_EQ(s[0].workload.get("kernel"), (std::vector<int64_t>{128, 4, 3, 3}));
    EXPECT_EQ(s[1].template_name, "group_conv2d_NCHWc.x86");
    EXPECT_EQ(s[1].workload.get("strides"), (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(s[1].workload.get("kernel"), (std::vector<int64_t>{128, 16, 3, 3}));
    EXPECT_EQ(s[2].template_name, "group_conv2d_NCHWc.x86");
    EXPECT_EQ(s[2].workload.get("kernel"), (std::vector<int64_t>{256, 1, 3, 3}));
    EXPECT_EQ(s[3].template_name, "depthwise_conv2d_NCHWc.x86");
  }
}

// Every row of the strategy table names a registered template and a rewrite
// apply_templates knows; find_strategy finds each by (operator, template).
TEST(SelectTemplates, StrategyTableRowsAreRegisteredTemplates) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const graph::Strategy& row : graph::strategies()) {
    const ops::OpTemplate* t = ops::find_template(row.template_name);
    ASSERT_NE(t, nullptr) << row.template_name;
    EXPECT_TRUE(seen.insert({row.op_type, row.template_name}).second)
        << row.op_type << " " << row.template_name << " listed twice";
    EXPECT_EQ(graph::find_strategy(row.op_type, row.template_name), &row);
    if (row.rewrite == graph::Rewrite::kBlockedConv) {
      EXPECT_TRUE(t->channel_blocked()) << row.template_name;
      EXPECT_NE(row.pack_weight, nullptr) << row.template_name;
    }
  }
  EXPECT_EQ(graph::find_strategy("Conv", "dense_pack.x86"), nullptr);
  EXPECT_NE(graph::find_strategy("Conv", "group_conv2d_NCHWc.x86"), nullptr);
}

// A grouped conv with a runtime bias is covered, so it is an error like any
// other covered Conv's (the blocked bias is laid out at build time).
TEST(SelectTemplates, GroupedConvWithARuntimeBiasIsAnError) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string bias = b.input("bias", {8});
  b.output(b.node("Conv", {x, b.random_constant("w", {8, 2, 1, 1}), bias}, {{"group", int64_t{4}}},
                  "gconv"));
  EXPECT_THROW(graph::select_templates(b.graph()), std::runtime_error);
}

TEST(SelectTemplates, ConvKeyHasTheAutoPadPadsAndStrides) {
  GraphBuilder b;
  std::string x = b.input("x", {2, 4, 7, 7});
  std::string upper = conv(b, "upper", x, 4, 4, 2, {{"auto_pad", std::string("SAME_UPPER")}});
  std::string lower = conv(b, "lower", upper, 4, 4, 2, {{"auto_pad", std::string("SAME_LOWER")}});
  std::string valid = conv(b, "valid", lower, 4, 4, 3,
                           {{"auto_pad", std::string("VALID")},
                            {"strides", std::vector<int64_t>{2, 2}},
                            {"dilations", std::vector<int64_t>{1, 1}}});
  b.output(valid);
  auto s = graph::select_templates(b.graph());
  ASSERT_EQ(s.size(), 3u);
  // One pixel of padding for a 2x2 kernel: at the end (UPPER) or the start (LOWER).
  EXPECT_EQ(s[0].workload.get("pads"), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(s[1].workload.get("pads"), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(s[2].workload.get("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(s[2].workload.get("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(s[2].workload.get("data"), (std::vector<int64_t>{2, 4, 7, 7}));
}

TEST(SelectTemplates, ConvNeedsAConstantWeight) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 4, 5, 5});
  std::string w = b.input("w", {4, 4, 3, 3});
  b.output(b.node("Conv", {x, w}, {}, "runtime_weight"));
  EXPECT_TRUE(graph::select_templates(b.graph()).empty());
}

TEST(SelectTemplates, ConvWithARuntimeBiasIsAnError) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 4, 5, 5});
  std::string bias = b.input("bias", {4});
  b.output(b.node("Conv", {x, b.random_constant("w", {4, 4, 1, 1}), bias}, {}, "conv"));
  try {
    graph::select_templates(b.graph());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'conv'"), std::string::npos) << e.what();
  }
}

TEST(SelectTemplates, GemmIsDenseUnlessTransA) {
  GraphBuilder b;
  std::string a = b.input("a", {3, 6});
  std::string at = b.input("at", {6, 3});
  std::string c = b.random_constant("c", {5});
  std::string y = b.node("Gemm", {a, b.random_constant("bt", {5, 6}), c},
                         {{"transB", int64_t{1}}, {"alpha", 2.0f}}, "gemm_tb");
  std::string z =
      b.node("Gemm", {at, b.random_constant("b2", {6, 5})}, {{"transA", int64_t{1}}}, "gemm_ta");
  b.output(y);
  b.output(z);
  EXPECT_EQ(picks(b.graph()), (Picks{{"gemm_tb", "dense_pack.x86",
                                      "dense_pack.x86(data=[3,6],weight=[6,5],dtype=float32)"}}));
}

// beta scales C at build time, which a runtime C does not allow.
TEST(SelectTemplates, GemmWithAScaledRuntimeCIsNotCovered) {
  GraphBuilder b;
  std::string a = b.input("a", {3, 6});
  std::string c = b.input("c", {3, 5});
  std::string bw = b.random_constant("b", {6, 5});
  b.output(b.node("Gemm", {a, bw, c}, {{"beta", 0.5f}}, "scaled"));
  b.output(b.node("Gemm", {a, bw, c}, {}, "unscaled"));
  b.output(b.node("Gemm", {a, bw, c}, {{"beta", 0.0f}}, "dropped"));
  auto s = graph::select_templates(b.graph());
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].node, "unscaled");
  EXPECT_EQ(s[1].node, "dropped");
}

TEST(SelectTemplates, MatMulWithAConstantIsDenseOverFlattenedRows) {
  GraphBuilder b;
  std::string a = b.input("a", {2, 3, 6});
  b.output(b.node("MatMul", {a, b.random_constant("w", {6, 4})}, {}, "mm"));
  EXPECT_EQ(
      picks(b.graph()),
      (Picks{{"mm", "dense_pack.x86", "dense_pack.x86(data=[6,6],weight=[6,4],dtype=float32)"}}));
}

TEST(SelectTemplates, MatMulOfTwoActivationsIsBatchMatmul) {
  GraphBuilder b;
  std::string q = b.input("q", {2, 3, 4, 6});
  std::string k = b.input("k", {2, 3, 6, 5});
  std::string w = b.input("w", {6, 5});
  b.output(b.node("MatMul", {q, k}, {}, "same_batch"));
  b.output(b.node("MatMul", {q, w}, {}, "no_batch_on_the_right"));
  EXPECT_EQ(picks(b.graph()), (Picks{{"same_batch", "batch_matmul.x86",
                                      "batch_matmul.x86(a=[6,4,6],b=[6,6,5],dtype=float32)"},
                                     {"no_batch_on_the_right", "batch_matmul.x86",
                                      "batch_matmul.x86(a=[6,4,6],b=[1,6,5],dtype=float32)"}}));
}

TEST(SelectTemplates, MatMulBatchBroadcastAndMatrixTimesActivationAreRefused) {
  GraphBuilder b;
  std::string a = b.input("a", {1, 3, 4, 6});
  std::string bb = b.input("b", {2, 3, 6, 5});  // broadcasts a over a batch of 2
  std::string m = b.input("m", {4, 6});
  std::string v = b.input("v", {6, 5});
  b.output(b.node("MatMul", {a, bb}, {}, "broadcast"));
  b.output(b.node("MatMul", {m, v}, {}, "rank2"));
  EXPECT_TRUE(graph::select_templates(b.graph()).empty());
}

TEST(SelectTemplates, OnlyFloat32ConvGemmAndMatMul) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 4, 5, 5});
  std::string y = b.node("Relu", {x});
  y = b.node("Softmax", {y});
  b.output(b.node("Conv", {y, b.random_constant("w", {4, 4, 1, 1})}, {}, "conv"));
  graph::Graph g = b.graph();
  EXPECT_EQ(graph::select_templates(g).size(), 1u);
  g.value_info.at(y).dtype = "float64";  // what a double model would infer
  EXPECT_TRUE(graph::select_templates(g).empty());
}

}  // namespace
// A 3x3 stride-1 Conv with >= 16 channels has two implementations, direct
// first and Winograd (an alternative row); untuned, Winograd is built. A
// stride-2, a 1x1 or a narrow 3x3 conv has one. choose_implementations takes
// the implementation with the faster record; an unknown or zero rate counts
// as none.
TEST(SelectTemplates, ThreeByThreeStrideOneConvsHaveAWinogradAlternative) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 16, 10, 10});
  std::string y = conv(b, "wide3x3", x, 16, 32, 3, pads(1));
  std::string z = conv(b, "narrow3x3", y, 32, 8, 3, pads(1));
  std::string s2 =
      conv(b, "stride2", z, 8, 16, 3,
           {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}});
  b.output(conv(b, "pointwise", s2, 16, 16, 1));
  std::vector<TemplateSelection> s = graph::select_templates(b.graph());
  ASSERT_EQ(s.size(), 4u);
  ASSERT_EQ(s[0].implementations.size(), 2u);
  EXPECT_EQ(s[0].implementations[0].template_name, "conv2d_NCHWc.x86");
  EXPECT_EQ(s[0].implementations[1].template_name, "conv2d_winograd_NCHWc.x86");
  EXPECT_EQ(s[0].implementations[0].params, s[0].implementations[1].params);
  EXPECT_EQ(s[0].untuned_default, 1u);
  EXPECT_EQ(s[0].template_name, "conv2d_winograd_NCHWc.x86");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(s[i].implementations.size(), 1u) << s[i].node;
    EXPECT_EQ(s[i].template_name, "conv2d_NCHWc.x86") << s[i].node;
  }
  const std::string direct = s[0].implementations[0].key(),
                    winograd = s[0].implementations[1].key();
  auto chosen = [&](const std::map<std::string, double>& gflops) {
    std::vector<TemplateSelection> c = s;
    graph::choose_implementations(c, gflops);
    EXPECT_EQ(c[0].workload.template_name, c[0].template_name);
    return c[0].template_name;
  };
  EXPECT_EQ(chosen({{direct, 200}, {winograd, 450}}), "conv2d_winograd_NCHWc.x86");
  EXPECT_EQ(chosen({{direct, 200}, {winograd, 150}}), "conv2d_NCHWc.x86");
  EXPECT_EQ(chosen({{direct, 200}}), "conv2d_NCHWc.x86");  // a record beats none
  EXPECT_EQ(chosen({{direct, 0}}), "conv2d_winograd_NCHWc.x86");
  EXPECT_EQ(chosen({}), "conv2d_winograd_NCHWc.x86");
}

// On a small map Winograd's tiles, padded to its fallback's register tile,
// can cost more products than the direct convolution: untuned, a 3x3 on
// 5 x 5 with AVX-512 (9 F(2x2) tiles padded to 16 rows: 256 products per
// channel pair against the direct 225) is built direct. AVX2's and NEON's
// register tiles of 6 rows pad them to 12 (192) and keep Winograd, and on
// 7 x 7 (16 tiles: at most 288 against 441) every ISA keeps it. Both
// implementations stay tuning candidates.
TEST(SelectTemplates, SmallMapsDefaultToTheDirectConvolutionWherePaddedTilesCostMore) {
  GraphBuilder b;
  std::string x5 = b.input("x5", {1, 32, 5, 5}), x7 = b.input("x7", {1, 32, 7, 7});
  b.output(conv(b, "map5", x5, 32, 32, 3, pads(1)));
  b.output(conv(b, "map7", x7, 32, 32, 3, pads(1)));
  for (const Isa& isa : {Isa{"x86_64-avx512", 512, 32, 2}, Isa{"x86_64-avx2", 256, 16, 2},
                         Isa{"aarch64-neon", 128, 32, 2}}) {
    std::vector<TemplateSelection> s = graph::select_templates(b.graph(), isa);
    ASSERT_EQ(s.size(), 2u);
    for (const TemplateSelection& t : s) ASSERT_EQ(t.implementations.size(), 2u) << t.node;
    const bool avx512 = isa.isa_class == "x86_64-avx512";
    EXPECT_EQ(s[0].template_name, avx512 ? "conv2d_NCHWc.x86" : "conv2d_winograd_NCHWc.x86")
        << isa.isa_class;
    EXPECT_EQ(s[0].untuned_default, avx512 ? 0u : 1u) << isa.isa_class;
    EXPECT_EQ(s[1].template_name, "conv2d_winograd_NCHWc.x86") << isa.isa_class;
  }
}

// Dilated 3x3 convolutions get Winograd where their phases hold whole tiles
// (FCN's dilation 2 and 4 on 28 x 28); a dilation near the map's size
// (DeepLab's ASPP: 12 and 36 on 28 x 28) keeps the direct convolution alone.
TEST(SelectTemplates, DilatedConvsGetWinogradWhereTheirPhasesHoldTiles) {
  GraphBuilder b;
  std::string x = b.input("x", {1, 16, 28, 28});
  auto dilated = [](int64_t d) {
    return std::map<std::string, graph::Attribute>{{"pads", std::vector<int64_t>{d, d, d, d}},
                                                   {"dilations", std::vector<int64_t>{d, d}}};
  };
  std::string y = x;
  for (int64_t d : {2, 4, 12, 36})
    y = conv(b, "dilation" + std::to_string(d), y, 16, 16, 3, dilated(d));
  b.output(y);
  std::vector<TemplateSelection> s = graph::select_templates(b.graph());
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(s[i].implementations.size(), 2u) << s[i].node;
    EXPECT_EQ(s[i].template_name, "conv2d_winograd_NCHWc.x86") << s[i].node;
  }
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(s[i].implementations.size(), 1u) << s[i].node;
    EXPECT_EQ(s[i].template_name, "conv2d_NCHWc.x86") << s[i].node;
  }
}

}  // namespace kiln
