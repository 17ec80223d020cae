// select_templates: which Conv / Gemm / MatMul nodes a tunable template
// covers, with which workload key, on graphs built by hand.
#include "graph/passes/select_templates.h"

#include <gtest/gtest.h>

#include "graph_builder.h"
#include "layout_graphs.h"

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
                    "pads=[0,0,0,0],dilation=[1,1],dtype=float32)"}}));
  EXPECT_EQ(b.graph().nodes.size(), nodes);  // analysis only
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
}  // namespace kiln
