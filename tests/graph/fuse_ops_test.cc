// fuse_ops: how a graph's nodes are grouped into kernels (epilogues into
// anchors, injective chains, values read twice, reductions).
#include "graph/passes/fuse_ops.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "graph/passes/apply_templates.h"
#include "graph/passes/propagate_layout.h"
#include "graph/passes/select_templates.h"
#include "graph_builder.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::FusedGroup;
using graph::Graph;
using graph::OpPattern;
using test::conv;
using test::GraphBuilder;
using test::pads;
using Strings = std::vector<std::string>;

// The op types of every group's nodes, groups in kernel order.
std::vector<Strings> grouped_ops(const Graph& g, const std::vector<FusedGroup>& groups) {
  std::vector<Strings> out;
  for (const FusedGroup& grp : groups) {
    out.emplace_back();
    for (size_t ni : grp.nodes) out.back().push_back(g.nodes[ni].op_type);
  }
  return out;
}

// Every node in exactly one group.
void expect_partition(const Graph& g, const std::vector<FusedGroup>& groups) {
  std::vector<int> seen(g.nodes.size(), 0);
  for (const FusedGroup& grp : groups)
    for (size_t ni : grp.nodes) ++seen.at(ni);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << g.nodes[i].name;
}

TEST(FuseOps, EpilogueFusesIntoTheAnchor) {
  GraphBuilder b(31);
  std::string x = b.input("x", {1, 4, 5, 5});
  std::string y = conv(b, "c", x, 4, 4, 3, pads(1), /*bias=*/false);
  y = b.node("Add", {y, b.random_constant("bias", {4, 1, 1})}, {}, "bias_add");
  y = b.node("Relu", {y}, {}, "relu");
  y = b.node("Add", {y, x}, {}, "residual");
  b.output(y);
  const Graph& g = b.graph();
  auto groups = graph::fuse_ops(g);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(grouped_ops(g, groups)[0], (Strings{"Conv", "Add", "Relu", "Add"}));
  EXPECT_EQ(groups[0].anchor, 0);
  EXPECT_EQ(groups[0].pattern, OpPattern::kAnchor);
  EXPECT_EQ(groups[0].inputs, (Strings{x, "c_w", "bias"}));
  EXPECT_EQ(groups[0].outputs, (Strings{y}));
  EXPECT_EQ(graph::group_label(g, groups[0]), "fused_conv_add_relu_add");
}

// The skip connection of an int8 residual block: a DequantizeLinear alone in
// its group whose only reader joins an anchor's epilogue joins it too (the
// epilogue dequantizes inline; no float32 tensor between two kernels). Read
// by another node as well, it stays a kernel of its own.
TEST(FuseOps, SkipConnectionDequantizeJoinsTheEpilogue) {
  for (bool read_twice : {false, true}) {
    SCOPED_TRACE(read_twice ? "read twice" : "one reader");
    GraphBuilder b(33);
    std::string s = b.input("s", {1, 4, 5, 5}, "uint8", 0, 255);
    std::string x = b.input("x", {1, 4, 5, 5});
    std::string d = b.node("DequantizeLinear",
                           {s, b.constant("sc", test::tensor_of<float>({}, {0.1f})),
                            b.constant("zp", test::tensor_of<uint8_t>({}, {3}))},
                           {}, "skip_dq");
    std::string y = conv(b, "c", x, 4, 4, 3, pads(1), /*bias=*/false);
    y = b.node("Add", {y, d}, {}, "residual");
    b.output(b.node("Relu", {y}, {}, "relu"));
    if (read_twice) b.output(b.node("Neg", {d}, {}, "other"));
    const Graph& g = b.graph();
    auto groups = graph::fuse_ops(g);
    expect_partition(g, groups);
    if (!read_twice) {
      ASSERT_EQ(groups.size(), 1u);
      EXPECT_EQ(grouped_ops(g, groups)[0],
                (Strings{"DequantizeLinear", "Conv", "Add", "Relu"}));  // in graph order
      EXPECT_EQ(g.nodes[groups[0].anchor].name, "c");
      EXPECT_EQ(groups[0].inputs, (Strings{s, "sc", "zp", x, "c_w"}));
    } else {
      auto ops = grouped_ops(g, groups);
      EXPECT_NE(std::find(ops.begin(), ops.end(), Strings{"DequantizeLinear"}), ops.end());
      EXPECT_NE(std::find(ops.begin(), ops.end(), Strings{"Conv", "Add", "Relu"}), ops.end());
    }
  }
}

// After the layout passes: the template takes its bias add, the residual add
// of another conv's blocked output and the relu; the conv whose output is
// read twice ends its group there.
TEST(FuseOps, BlockedConvChainAfterTheLayoutPasses) {
  GraphBuilder b(32);
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string c1 = conv(b, "c1", x, 8, 16, 1);
  std::string c2 = conv(b, "c2", c1, 16, 16, 3, pads(1));
  std::string y = b.node("Add", {c2, c1}, {}, "residual");
  b.output(b.node("Relu", {y}, {}, "relu"));
  Graph g = b.graph();
  graph::apply_templates(g, graph::select_templates(g), {}, test::host_isa());
  graph::propagate_layout(g);
  auto groups = graph::fuse_ops(g);
  expect_partition(g, groups);
  EXPECT_EQ(grouped_ops(g, groups), (std::vector<Strings>{{"kiln.LayoutTransform"},
                                                          {"kiln.Template", "Add"},
                                                          {"kiln.Template", "Add", "Add", "Relu"},
                                                          {"kiln.LayoutTransform"}}));
  EXPECT_EQ(g.nodes[groups[2].anchor].name, "c2");
  EXPECT_EQ(groups[1].outputs.size(), 1u);  // c1's blocked output, read by c2 and residual
}

TEST(FuseOps, InjectiveChainIsOneGroup) {
  GraphBuilder b(33);
  std::string x = b.input("x", {2, 3, 4});
  std::string y = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  y = b.node("Reshape", {y, b.ints("shape", {8, 3})});
  y = b.node("Relu", {y});
  y = b.node("Mul", {y, b.random_constant("s", {3})});
  b.output(y);
  const Graph& g = b.graph();
  auto groups = graph::fuse_ops(g);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(grouped_ops(g, groups)[0], (Strings{"Transpose", "Reshape", "Relu", "Mul"}));
  EXPECT_EQ(groups[0].anchor, -1);
  EXPECT_EQ(groups[0].outputs, (Strings{y}));
}

// A long chain of elementwise nodes is split into groups of at most 128
// nodes and 64 inputs (issue 65, item 6): fused whole, 1,000 Adds of
// distinct constants were one kernel of 1,001 buffers that took 39 s to build.
TEST(FuseOps, ALongElementwiseChainIsSplitIntoBoundedGroups) {
  GraphBuilder b(65);
  std::string y = b.input("x", {1, 16});
  const int n = 300;
  for (int i = 0; i < n; ++i)
    y = b.node(i % 2 ? "Mul" : "Add", {y, b.random_constant("c" + std::to_string(i), {16})});
  b.output(y);
  const Graph& g = b.graph();
  auto groups = graph::fuse_ops(g);
  ASSERT_GE(groups.size(), 5u);  // 300 nodes reading 301 values, 64 at a time
  size_t nodes = 0;
  for (const graph::FusedGroup& grp : groups) {
    EXPECT_LE(grp.nodes.size(), 128u);
    EXPECT_LE(grp.inputs.size(), 64u);
    EXPECT_EQ(grp.outputs.size(), 1u);
    nodes += grp.nodes.size();
  }
  EXPECT_EQ(nodes, static_cast<size_t>(n));
  EXPECT_EQ(groups.back().outputs, (Strings{y}));
  // Nodes reading one input share it: only the node limit splits them.
  GraphBuilder s(66);
  std::string x = s.input("x", {1, 16});
  y = x;
  for (int i = 0; i < n; ++i) y = s.node("Add", {y, x});
  s.output(y);
  auto shared = graph::fuse_ops(s.graph());
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_EQ(shared[0].nodes.size(), 128u);
}

TEST(FuseOps, AValueWithTwoReadersEndsItsGroup) {
  GraphBuilder b(34);
  std::string x = b.input("x", {6});
  std::string e = b.node("Exp", {x}, {}, "exp");
  std::string n = b.node("Neg", {e}, {}, "neg");
  std::string r = b.node("Relu", {e}, {}, "relu");
  b.output(b.node("Add", {n, r}, {}, "add"));
  const Graph& g = b.graph();
  auto groups = graph::fuse_ops(g);
  expect_partition(g, groups);
  // add joins neg's group, which then needs relu's: the groups are reordered.
  EXPECT_EQ(grouped_ops(g, groups), (std::vector<Strings>{{"Exp"}, {"Relu"}, {"Neg", "Add"}}));
  EXPECT_EQ(groups[0].outputs, (Strings{e}));
  EXPECT_EQ(groups[2].inputs, (Strings{e, r}));
}

// SiLU after a conv: its output has two readers, Sigmoid and the Mul, both
// in one elementwise group, which joins the conv as its epilogue. A third
// reader outside (or the value being a graph output) keeps them apart.
TEST(FuseOps, DiamondOfAnAnchorsOutputJoinsItsEpilogue) {
  for (int extra : {0, 1, 2}) {
    GraphBuilder b(36);
    std::string x = b.input("x", {1, 4, 5, 5});
    std::string c = conv(b, "c", x, 4, 4, 3, pads(1), /*bias=*/false);
    std::string s = b.node("Sigmoid", {c}, {}, "sig");
    std::string y = b.node("Mul", {c, s}, {}, "silu");
    b.output(b.node("Relu", {y}, {}, "relu"));
    if (extra == 1) b.output(b.node("Neg", {c}, {}, "other_reader"));
    if (extra == 2) b.output(c);
    const Graph& g = b.graph();
    auto groups = graph::fuse_ops(g);
    expect_partition(g, groups);
    if (extra == 0) {
      ASSERT_EQ(groups.size(), 1u);
      EXPECT_EQ(grouped_ops(g, groups)[0], (Strings{"Conv", "Sigmoid", "Mul", "Relu"}));
      EXPECT_EQ(groups[0].anchor, 0);
      EXPECT_EQ(groups[0].outputs, (Strings{"relu"}));
    } else {
      EXPECT_EQ(grouped_ops(g, groups)[0], (Strings{"Conv"})) << extra;
      EXPECT_EQ(groups[0].outputs, (Strings{c})) << extra;
    }
  }
}

TEST(FuseOps, AGraphOutputEndsItsGroup) {
  GraphBuilder b(35);
  std::string x = b.input("x", {6});
  std::string r = b.node("Relu", {x});
  b.output(r);
  b.output(b.node("Neg", {r}));
  const Graph& g = b.graph();
  EXPECT_EQ(grouped_ops(g, graph::fuse_ops(g)), (std::vector<Strings>{{"Relu"}, {"Neg"}}));
}

TEST(FuseOps, InjectiveChainFusesIntoAReductionThatTakesItsEpilogue) {
  GraphBuilder b(36);
  std::string x = b.input("x", {2, 8});
  std::string y = b.node("Mul", {x, b.random_constant("s", {8})});
  y = b.node("Relu", {y});
  y = b.node("ReduceMean", {y}, {{"axes", std::vector<int64_t>{1}}});  // [2, 1]
  y = b.node("Exp", {y});
  y = b.node("Reshape", {y, b.ints("shape", {2})});
  b.output(y);
  const Graph& g = b.graph();
  auto groups = graph::fuse_ops(g);
  EXPECT_EQ(grouped_ops(g, groups),
            (std::vector<Strings>{{"Mul", "Relu", "ReduceMean", "Exp"}, {"Reshape"}}));
  EXPECT_EQ(groups[0].pattern, OpPattern::kReduction);
}

// A pooling window re-reads its input: a layout transform stays its own kernel.
TEST(FuseOps, LayoutTransformDoesNotFuseIntoAReduction) {
  GraphBuilder b(37);
  std::string x = b.input("x", {1, 8, 6, 6});
  std::string y = conv(b, "c", x, 8, 16, 3, pads(1));
  // A reduction over spatial dims in NCHW: the conv's output goes back to NCHW
  // for it, in a kernel of its own.
  b.output(b.node("ReduceSum", {y}, {{"axes", std::vector<int64_t>{2, 3}}}, "sum"));
  Graph g = b.graph();
  graph::apply_templates(g, graph::select_templates(g), {}, test::host_isa());
  graph::propagate_layout(g);
  auto groups = graph::fuse_ops(g);
  EXPECT_EQ(grouped_ops(g, groups), (std::vector<Strings>{{"kiln.LayoutTransform"},
                                                          {"kiln.Template", "Add"},
                                                          {"kiln.LayoutTransform"},
                                                          {"ReduceSum"}}));
}

// Pooling runs on the blocked data itself (propagate_layout): the transform
// back to NCHW comes after it.
TEST(FuseOps, PoolingOfABlockedConvRunsBlocked) {
  GraphBuilder b(38);
  std::string x = b.input("x", {1, 8, 6, 6});
  std::string y = conv(b, "c", x, 8, 16, 3, pads(1));
  b.output(b.node("MaxPool", {y}, {{"kernel_shape", std::vector<int64_t>{2, 2}}}, "pool"));
  Graph g = b.graph();
  graph::apply_templates(g, graph::select_templates(g), {}, test::host_isa());
  graph::propagate_layout(g);
  auto groups = graph::fuse_ops(g);
  EXPECT_EQ(grouped_ops(g, groups), (std::vector<Strings>{{"kiln.LayoutTransform"},
                                                          {"kiln.Template", "Add"},
                                                          {"MaxPool"},
                                                          {"kiln.LayoutTransform"}}));
}

}  // namespace
}  // namespace kiln
