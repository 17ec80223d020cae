// propagate_layout: elementwise operators and channel Concats between
// convolutions run in NCHW[x]c, transforms that undo each other cancel, and
// what this leaves dead goes; every graph checked against run_graph.
#include "graph/passes/propagate_layout.h"

#include <gtest/gtest.h>

#include "graph/passes/apply_templates.h"
#include "graph/passes/select_templates.h"
#include "graph_builder.h"
#include "layout_graphs.h"

namespace kiln {
namespace {

using graph::Graph;
using test::check_pass_preserves;
using test::conv;
using test::count_transforms;
using test::GraphBuilder;
using test::node_named;
using test::op_types;
using test::pads;
using test::producer;

// b's graph after apply_templates with `configs` (checked against run_graph).
Graph applied(const GraphBuilder& b, const std::map<std::string, std::string>& configs = {}) {
  return check_pass_preserves(
      b.graph(), b.inputs(),
      [&](Graph& g) {
        // A node's implementation with an explicit config is the one built
        // (as in driver::build); the rest take their untuned default.
        std::vector<graph::TemplateSelection> selected = graph::select_templates(g);
        std::map<std::string, double> configured;
        for (const auto& entry : configs) configured[entry.first] = 1;
        graph::choose_implementations(selected, configured);
        graph::apply_templates(g, selected, configs, test::host_isa());
      },
      1e-4);
}

// propagate_layout on `g`, checked against run_graph on b's inputs.
Graph propagated(const Graph& g, const GraphBuilder& b) {
  return check_pass_preserves(
      g, b.inputs(), [](Graph& h) { graph::propagate_layout(h); }, 1e-4);
}

bool blocked(const Graph& g, const std::string& value) {
  return g.type_of(value) && g.type_of(value)->shape.size() == 5;
}

// Every node output is read by a node or is a graph output; every constant is read.
void expect_nothing_dead(const Graph& g) {
  std::set<std::string> read(g.outputs.begin(), g.outputs.end());
  for (const graph::Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const graph::Node& n : g.nodes)
    for (const std::string& o : n.outputs) EXPECT_TRUE(read.count(o)) << n.name << " -> " << o;
  for (const auto& [name, init] : g.initializers) EXPECT_TRUE(read.count(name)) << name;
}

TEST(PropagateLayout, ElementwiseBetweenConvsRunsBlocked) {
  GraphBuilder b(21);
  std::string x = b.input("x", {1, 16, 6, 6});
  std::string y = conv(b, "c1", x, 16, 16, 3, pads(1));
  y = b.node("Relu", {y}, {}, "relu");
  y = b.node("Add", {y, b.random_constant("per_channel", {16, 1, 1})}, {}, "add");
  y = b.node("Mul", {y, b.random_constant("scalar", {1})}, {}, "mul");
  b.output(conv(b, "c2", y, 16, 16, 1));
  Graph before = applied(b);
  EXPECT_EQ(count_transforms(before), 4);  // into and out of each conv
  Graph g = propagated(before, b);
  EXPECT_EQ(count_transforms(g), 2);  // into c1 and out of c2 only
  EXPECT_EQ(op_types(g),
            (std::vector<std::string>{"kiln.LayoutTransform", "kiln.Template", "Add", "Relu", "Add",
                                      "Mul", "kiln.Template", "Add", "kiln.LayoutTransform"}));
  for (const char* n : {"relu", "add", "mul"}) {
    EXPECT_TRUE(blocked(g, node_named(g, n).inputs[0])) << n;
    EXPECT_TRUE(blocked(g, node_named(g, n).outputs[0])) << n;
  }
  // Constants re-laid out for NCHW[16]c; the NCHW ones are gone.
  const std::string& pc = node_named(g, "add").inputs[1];
  EXPECT_NE(pc.find("add/blocked_const/"), std::string::npos) << pc;
  EXPECT_EQ(g.initializers.at(pc).type.shape, (std::vector<int64_t>{1, 1, 1, 1, 16}));
  EXPECT_EQ(g.initializers.at(pc).as<float>(),
            b.graph().initializers.at("per_channel").as<float>());
  EXPECT_EQ(g.initializers.at(node_named(g, "mul").inputs[1]).type.shape,
            (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_FALSE(g.initializers.count("per_channel"));
  EXPECT_FALSE(g.initializers.count("scalar"));
  expect_nothing_dead(g);
}

TEST(PropagateLayout, ResidualAddRunsBlocked) {
  GraphBuilder b(22);
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string c1 = conv(b, "c1", x, 8, 16, 1);
  std::string c2 = conv(b, "c2", c1, 16, 16, 3, pads(1));
  std::string y = b.node("Add", {c2, c1}, {}, "residual");
  y = b.node("Relu", {y}, {}, "relu");
  b.output(conv(b, "c3", y, 16, 8, 1));
  Graph g = propagated(applied(b), b);
  EXPECT_EQ(count_transforms(g), 2);
  EXPECT_TRUE(blocked(g, node_named(g, "residual").inputs[0]));
  EXPECT_TRUE(blocked(g, node_named(g, "residual").inputs[1]));
  expect_nothing_dead(g);
}

// Squeeze-excitation: the activation times a per-channel gate computed from
// it (GlobalAveragePool, two 1x1 convs, Sigmoid). The gate [1, C, 1, 1] comes
// blocked out of its conv, so the Mul runs blocked on both; before, both
// went back to NCHW and the product forward again. A gate that is not per
// channel ([1, 1, H, W]) keeps the Mul in NCHW.
TEST(PropagateLayout, SqueezeExcitationMultiplyRunsBlocked) {
  for (bool spatial_gate : {false, true}) {
    GraphBuilder b(27);
    std::string x = b.input("x", {1, 8, 6, 6});
    std::string a = conv(b, "c1", x, 8, 16, 3, pads(1));
    std::string gate;
    if (spatial_gate) {
      gate = b.node("Sigmoid", {conv(b, "g1", a, 16, 1, 1)}, {}, "sig");
    } else {
      std::string s = b.node("GlobalAveragePool", {a}, {}, "squeeze");
      s = b.node("Relu", {conv(b, "g1", s, 16, 8, 1)}, {}, "relu");
      gate = b.node("Sigmoid", {conv(b, "g2", s, 8, 16, 1)}, {}, "sig");
    }
    std::string y = b.node("Mul", {a, gate}, {}, "excite");
    b.output(conv(b, "c2", y, 16, 8, 1));
    Graph g = propagated(applied(b), b);
    const graph::Node& mul = node_named(g, "excite");
    EXPECT_EQ(blocked(g, mul.inputs[0]), !spatial_gate);
    EXPECT_EQ(blocked(g, mul.inputs[1]), !spatial_gate);
    EXPECT_EQ(blocked(g, mul.outputs[0]), !spatial_gate);
    if (!spatial_gate) {
      EXPECT_EQ(count_transforms(g), 2);  // into c1, out of c2
    }
    expect_nothing_dead(g);
  }
}

TEST(PropagateLayout, DifferentBlocksMeetInOneBlockedToBlockedTransform) {
  GraphBuilder b(23);
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string c1 = conv(b, "c1", x, 8, 16, 1);  // oc_bn 16 (fallback)
  b.output(conv(b, "c2", c1, 16, 16, 3, pads(1)));
  // c2's direct implementation (the first; Winograd is its alternative).
  std::string key = graph::select_templates(b.graph()).at(1).implementations.at(0).key();
  Graph g = propagated(
      applied(b, {{key, test::conv_config_with_blocks("conv2d_NCHWc.x86", key, 8, 16)}}), b);
  EXPECT_EQ(count_transforms(g), 3);
  const graph::Node* lt = producer(g, node_named(g, "c2").inputs[0]);
  ASSERT_NE(lt, nullptr);
  EXPECT_EQ(lt->op_type, "kiln.LayoutTransform");
  EXPECT_EQ(lt->attr<int64_t>("src_block"), 16);
  EXPECT_EQ(lt->attr<int64_t>("dst_block"), 8);
  EXPECT_TRUE(blocked(g, lt->inputs[0]));
}

TEST(PropagateLayout, ChannelConcatOfLikeBlocksRunsBlocked) {
  GraphBuilder b(24);
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string l = conv(b, "left", x, 8, 16, 1);
  std::string r = conv(b, "right", x, 8, 16, 3, pads(1));
  std::string cat = b.node("Concat", {l, r}, {{"axis", int64_t{-3}}}, "cat");
  b.output(conv(b, "c3", cat, 32, 16, 1));
  Graph g = propagated(applied(b), b);
  EXPECT_EQ(count_transforms(g), 2);  // x (shared by both convs) in, c3 out
  const graph::Node& c = node_named(g, "cat");
  EXPECT_EQ(c.attr<int64_t>("axis"), 1);  // the channel-block axis of NCHW[b]c
  EXPECT_EQ(g.type_of(c.outputs[0])->shape, (std::vector<int64_t>{1, 2, 5, 5, 16}));
  expect_nothing_dead(g);
}

TEST(PropagateLayout, ConcatOfUnlikeBlocksAndNonChannelConstantsStayNCHW) {
  GraphBuilder b(25);
  std::string x = b.input("x", {1, 8, 5, 5});
  std::string l = conv(b, "left", x, 8, 8, 1);    // oc_bn 8
  std::string r = conv(b, "right", x, 8, 16, 1);  // oc_bn 16
  std::string cat = b.node("Concat", {l, r}, {{"axis", int64_t{1}}}, "cat");
  std::string y = b.node("Add", {cat, b.random_constant("full", {24, 5, 5})}, {}, "add");
  b.output(conv(b, "c3", y, 24, 8, 1));
  Graph before = applied(b);
  Graph g = propagated(before, b);
  EXPECT_EQ(count_transforms(g), count_transforms(before));
  EXPECT_FALSE(blocked(g, node_named(g, "cat").outputs[0]));
  EXPECT_FALSE(blocked(g, node_named(g, "add").outputs[0]));
}

TEST(PropagateLayout, GraphOutputsStayNCHW) {
  GraphBuilder b(26);
  std::string x = b.input("x", {1, 16, 5, 5});
  std::string c1 = conv(b, "c1", x, 16, 16, 1);
  std::string relu = b.node("Relu", {c1}, {}, "relu");
  b.output(c1);    // read by relu and returned
  b.output(relu);  // read by c2 and returned
  b.output(conv(b, "c2", relu, 16, 16, 1));
  Graph g = propagated(applied(b), b);
  for (const std::string& out : g.outputs) {
    EXPECT_EQ(g.type_of(out)->shape.size(), 4u) << out;
    const graph::Node* p = producer(g, out);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->op_type, "kiln.LayoutTransform") << out;
    EXPECT_EQ(p->attr<int64_t>("dst_block"), 0) << out;
  }
  EXPECT_TRUE(blocked(g, node_named(g, "relu").outputs[0]));
  EXPECT_TRUE(blocked(g, node_named(g, "c2").inputs[0]));  // no trip through NCHW
  EXPECT_EQ(count_transforms(g), 4);
}

// A Resize between two blocked convolutions is read only by a transform back
// to the blocked layout: marked kiln_reblocked (one interpolation stage in its
// fused kernel); one that produces a graph output is not.
TEST(PropagateLayout, ResizeReadOnlyByReblockingTransformsIsMarked) {
  GraphBuilder b(27);
  std::string x = b.input("x", {1, 16, 5, 5});
  std::string c1 = conv(b, "c1", x, 16, 16, 1);
  std::string scales = b.constant("scales", test::tensor_of<float>({4}, {1.f, 1.f, 2.f, 2.f}));
  std::string mid = b.node("Resize", {c1, "", scales}, {{"mode", std::string("linear")}}, "mid");
  b.output(conv(b, "c2", mid, 16, 16, 1));
  b.output(b.node("Resize", {c1, "", scales}, {{"mode", std::string("linear")}}, "head"));
  Graph g = propagated(applied(b), b);
  EXPECT_EQ(node_named(g, "mid").attr<int64_t>("kiln_reblocked").value_or(0), 1);
  EXPECT_FALSE(node_named(g, "head").attrs.count("kiln_reblocked"));
}

TEST(PropagateLayout, NothingToDoWithoutTemplates) {
  GraphBuilder b(28);
  std::string x = b.input("x", {1, 4, 3, 3});
  b.output(b.node("Relu", {b.node("Conv", {x, b.input("w", {4, 4, 1, 1})})}));
  Graph g = propagated(b.graph(), b);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Relu"}));
}

// A bottleneck whose grouped 3x3 has 8 groups of 4 input and 8 output
// channels (blocks of 4 and 8, group_conv2d_NCHWc.x86) between 1x1 convs
// (blocks of 16). The layouts disagree at each boundary: blocked-to-blocked
// transforms, never a round trip through NCHW, and the graph still
// computes what it did.
TEST(PropagateLayout, ResNeXtBlockKeepsBlockedLayoutsAcrossGroupBlocks) {
  GraphBuilder b(29);
  std::string x = b.input("x", {1, 32, 6, 6});
  std::string y = conv(b, "reduce", x, 32, 32, 1);
  y = b.node("Relu", {y}, {}, "relu1");
  y = conv(b, "grouped", y, 32, 64, 3,
           {{"group", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  y = b.node("Relu", {y}, {}, "relu2");
  y = conv(b, "expand", y, 64, 32, 1);
  b.output(y);
  Graph g = propagated(applied(b), b);
  EXPECT_EQ(node_named(g, "grouped").attr<std::string>("template"), "group_conv2d_NCHWc.x86");
  EXPECT_TRUE(blocked(g, node_named(g, "grouped").inputs[0]));
  EXPECT_TRUE(blocked(g, node_named(g, "expand").inputs[0]));
  for (const graph::Node& n : g.nodes)
    if (n.op_type == "kiln.LayoutTransform" && n.outputs[0] != y)
      EXPECT_NE(n.attr<int64_t>("dst_block").value_or(0), 0) << n.name << " goes back to NCHW";
  expect_nothing_dead(g);
}

// ResNeXt's own bottleneck (8 groups of 4 channels, equal widths): the lanes
// template keeps the 1x1 convs' block of 16, so the only transforms are into
// the first conv and out of the last.
TEST(PropagateLayout, ResNeXtBlockWithNarrowGroupsNeedsNoInnerTransform) {
  GraphBuilder b(30);
  std::string x = b.input("x", {1, 32, 6, 6});
  std::string y = conv(b, "reduce", x, 32, 32, 1);
  y = b.node("Relu", {y}, {}, "relu1");
  y = conv(b, "grouped", y, 32, 32, 3,
           {{"group", int64_t{8}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  y = b.node("Relu", {y}, {}, "relu2");
  y = conv(b, "expand", y, 32, 32, 1);
  b.output(y);
  Graph g = propagated(applied(b), b);
  EXPECT_EQ(node_named(g, "grouped").attr<std::string>("template"), "group_conv2d_lanes_NCHWc.x86");
  EXPECT_EQ(count_transforms(g), 2);
  expect_nothing_dead(g);
}

}  // namespace
}  // namespace kiln
