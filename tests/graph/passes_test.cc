// Graph passes: each run on graphs built in C++, checked for the structural
// change it promises and, through run_graph, for unchanged outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fold_batch_norm.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph/passes/simplify.h"
#include "graph/passes/verify_graph.h"
#include "graph_builder.h"
#include "test_ops.h"

namespace kiln {
namespace {

using graph::Graph;
using graph::Initializer;
using test::check_pass_preserves;
using test::count_op;
using test::GraphBuilder;
namespace passes = graph::passes;

class Passes : public ::testing::Test {
 protected:
  void SetUp() override { test::register_test_ops(); }
};

// ---- verify_graph ----------------------------------------------------------

TEST_F(Passes, VerifyGraphCatchesBrokenInvariants) {
  GraphBuilder b;
  std::string x = b.input("x", {3});
  std::string y = b.node("KilnTestAffine", {x}, {}, "first");
  std::string z = b.node("KilnTestAffine", {y}, {}, "second");
  b.output(z);
  EXPECT_NO_THROW(passes::verify_graph(b.graph()));
  auto expect_invalid = [](const Graph& g, const std::string& part) {
    try {
      passes::verify_graph(g);
      ADD_FAILURE() << "accepted a graph that should fail with: " << part;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  Graph g = b.graph();
  std::swap(g.nodes[0], g.nodes[1]);
  expect_invalid(g, "'second'");
  g = b.graph();
  g.value_info.erase(y);
  expect_invalid(g, "has no value_info");
  g = b.graph();
  g.nodes[1].outputs[0] = y;
  expect_invalid(g, "defined twice");
  g = b.graph();
  g.value_info[z] = {"float32", {4}};
  EXPECT_NO_THROW(passes::verify_graph(g));  // node output types are run_graph's to check
  g.value_info[x] = {"float32", {4}};
  expect_invalid(g, "'x'");
  g = b.graph();
  g.outputs.push_back("ghost");
  expect_invalid(g, "'ghost'");
}

// ---- fold_constants ----------------------------------------------------------

TEST_F(Passes, FoldConstantsFoldsConstantChainsOnly) {
  GraphBuilder b(3);
  std::string x = b.input("x", {8});
  std::string c = b.random_constant("c", {8});
  std::string c2 = b.node("KilnTestAffine", {c}, {{"a", 3.0f}}, "c_times_3");
  std::string c3 = b.node("KilnTestAdd", {c2, c}, {}, "c_plus");
  std::string y = b.node("KilnTestAdd", {x, c3}, {}, "uses_input");
  std::string z = b.node("KilnTestAffine", {y}, {{"b", 1.0f}}, "after_input");
  b.output(z);
  b.output(c2);  // a folded value that is also a graph output keeps its name
  Graph after = check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) {
    auto stats = passes::fold_constants(g);
    EXPECT_EQ(stats.folded, 2);
  });
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].name, "uses_input");
  EXPECT_TRUE(after.initializers.count(c2));
  EXPECT_TRUE(after.initializers.count(c3));
  std::vector<float> cv = b.graph().initializers.at(c).as<float>();
  std::vector<float> folded = after.initializers.at(c3).as<float>();
  for (size_t i = 0; i < cv.size(); ++i) EXPECT_FLOAT_EQ(folded[i], 3 * cv[i] + cv[i]);
}

TEST_F(Passes, FoldConstantsMultiOutputAndOptionalInputs) {
  GraphBuilder b(4);
  std::string x = b.input("x", {3});
  std::string c = b.random_constant("c", {6});
  auto halves = b.node_n("KilnTestSplit2", {c}, 2);
  std::string y = b.node("KilnTestAdd", {x, halves[1]});
  b.output(y);
  Graph after =
      check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::fold_constants(g); });
  EXPECT_EQ(after.nodes.size(), 1u);
  EXPECT_TRUE(after.initializers.count(halves[0]));
  EXPECT_EQ(after.value_info.at(halves[1]), (graph::TensorType{"float32", {3}}));
}

TEST_F(Passes, FoldConstantsLeavesLargeBroadcastsOfSmallConstants) {
  for (int64_t times : {5, 50}) {
    GraphBuilder b(5);
    std::string c = b.random_constant("c", {10});
    std::string t = b.node("KilnTestTile", {c}, {{"times", times}}, "tile");
    std::string x = b.input("x", {10 * times});
    b.output(b.node("KilnTestAdd", {x, t}));
    passes::FoldConstantsOptions options;
    options.max_broadcast_elements = 100;
    Graph after = check_pass_preserves(b.graph(), b.inputs(), [&](Graph& g) {
      auto stats = passes::fold_constants(g, options);
      EXPECT_EQ(stats.skipped_too_large, times * 10 > 100 ? 1 : 0);
    });
    EXPECT_EQ(count_op(after, "KilnTestTile"), times * 10 > 100 ? 1 : 0) << times;
  }
}

TEST_F(Passes, FoldConstantsNamesTheNodeThatFails) {
  GraphBuilder b;
  std::string c = b.random_constant("c", {2});
  Graph g = b.graph();
  g.nodes.push_back({"KilnTestFail", "", "doomed", {c}, {"d"}, {}});
  g.value_info["d"] = {"float32", {2}};
  g.outputs = {"d"};
  try {
    passes::fold_constants(g);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'doomed'"), std::string::npos) << e.what();
  }
}

// Shape -> Gather/Slice -> Unsqueeze -> Concat -> Reshape, the subgraph that
// exporters emit for x.view(x.size(0), x.size(1), heads, -1), and
// ConstantOfShape(Shape(x)): all of it folds, only the data path stays.
TEST_F(Passes, FoldConstantsFoldsShapeSubgraphsFromValueInfo) {
  for (auto dims : {std::vector<int64_t>{2, 5, 12}, std::vector<int64_t>{1, 3, 8}}) {
    GraphBuilder b(dims[1]);
    std::string x = b.input("x", dims);
    std::string shape = b.node("Shape", {x});
    std::string i0 = b.constant("i0", test::tensor_of<int64_t>({}, {0}));
    std::string i1 = b.constant("i1", test::tensor_of<int64_t>({}, {1}));
    std::string axes = b.ints("axes", {0});
    std::string d0 =
        b.node("Unsqueeze", {b.node("Gather", {shape, i0}, {{"axis", int64_t{0}}}), axes});
    std::string d1 =
        b.node("Unsqueeze", {b.node("Gather", {shape, i1}, {{"axis", int64_t{0}}}), axes});
    std::string last = b.node("Slice", {shape, b.ints("st", {-1}), b.ints("en", {3})});
    std::string heads = b.ints("heads", {4});
    std::string per_head = b.node("Div", {last, heads});
    std::string target = b.node("Concat", {d0, d1, heads, per_head}, {{"axis", int64_t{0}}});
    std::string r = b.node("Reshape", {x, target});
    std::string zeros = b.node("ConstantOfShape", {b.node("Shape", {r})},
                               {{"value", test::tensor_of<float>({1}, {0.5f})}});
    b.output(b.node("Add", {r, zeros}));
    Graph after =
        check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::fold_constants(g); });
    std::vector<std::string> ops;
    for (const auto& n : after.nodes) ops.push_back(n.op_type);
    EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Add"}));
    EXPECT_EQ(after.initializers.at(target).as<int64_t>(),
              (std::vector<int64_t>{dims[0], dims[1], 4, dims[2] / 4}));
  }
}

TEST_F(Passes, FoldConstantsKeepsHugeExpandOfASmallConstant) {
  for (int64_t rows : {4, 2048}) {
    GraphBuilder b;
    std::string one = b.random_constant("one", {1});
    std::string big = b.node("Expand", {one, b.ints("to", {rows, 1024})});
    std::string x = b.input("x", {1, 1024});
    b.output(b.node("Add", {x, big}));
    graph::Graph g = b.graph();
    auto stats = passes::fold_constants(g);
    passes::verify_graph(g);
    EXPECT_EQ(count_op(g, "Expand"), rows * 1024 > (1 << 20) ? 1 : 0) << rows;
    EXPECT_EQ(stats.skipped_too_large, rows * 1024 > (1 << 20) ? 1 : 0) << rows;
  }
}

// ---- simplify ------------------------------------------------------------------

TEST_F(Passes, SimplifyRemovesNoOpNodes) {
  GraphBuilder b(8);
  std::string x = b.input("x", {2, 3, 4});
  std::string a = b.node("Relu", {x});
  std::string i1 = b.node("Identity", {a});
  std::string i2 = b.node("Identity", {i1});
  std::string d = b.node("Dropout", {i2, b.random_constant("ratio", {}, 0.1, 0.2)});
  std::string c = b.node("Cast", {d}, {{"to", int64_t{1}}});  // FLOAT to float32
  std::string r = b.node("Reshape", {c, b.ints("same", {2, 3, 4})});
  std::string t = b.node("Transpose", {r}, {{"perm", std::vector<int64_t>{0, 1, 2}}});
  std::string u = b.node("Concat", {t}, {{"axis", int64_t{1}}});
  std::string y = b.node("Add", {u, a});                 // a read twice, once through the chain
  std::string z = b.node("Identity", {y}, {}, "final");  // a graph output: y's producer renamed
  b.output(z);
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::simplify(g), 8); });
  ASSERT_EQ(after.nodes.size(), 2u);
  EXPECT_EQ(after.nodes[0].op_type, "Relu");
  EXPECT_EQ(after.nodes[1].op_type, "Add");
  EXPECT_EQ(after.nodes[1].inputs, (std::vector<std::string>{a, a}));
  EXPECT_EQ(after.nodes[1].outputs[0], "final");
  EXPECT_EQ(after.outputs, (std::vector<std::string>{"final"}));
  EXPECT_FALSE(after.value_info.count(i1));
  EXPECT_FALSE(after.value_info.count(y));
}

// DenseNet's transition pools come out of the exporter as Pad(pads = 0) ->
// AveragePool: that Pad goes (as an input of opset 11 or the older attribute,
// in any mode); a Pad that moves the data without changing the shape stays.
TEST_F(Passes, SimplifyRemovesPadsOfZero) {
  GraphBuilder b(10);
  std::string x = b.input("x", {1, 4, 6, 6});
  std::string p1 = b.node("Pad", {x, b.ints("zero_pads", {0, 0, 0, 0, 0, 0, 0, 0})},
                          {{"mode", std::string("constant")}});
  std::string p2 = b.node("Pad", {p1}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0}}});
  std::string p3 = b.node("Pad", {p2, b.ints("zero_pads_2", {0, 0, 0, 0, 0, 0, 0, 0})},
                          {{"mode", std::string("reflect")}});
  std::string pool = b.node(
      "AveragePool", {p3},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  // Same shape, data shifted one column left: real work.
  std::string shifted = b.node("Pad", {x, b.ints("shift", {0, 0, 0, -1, 0, 0, 0, 1})},
                               {{"mode", std::string("edge")}});
  b.output(pool);
  b.output(b.node("Relu", {shifted}));
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::simplify(g), 3); });
  EXPECT_EQ(count_op(after, "Pad"), 1);
  EXPECT_EQ(after.nodes[0].op_type, "AveragePool");
  EXPECT_EQ(after.nodes[0].inputs[0], x);
}

TEST_F(Passes, SimplifyKeepsGraphOutputNamesAndRealWork) {
  GraphBuilder b(9);
  std::string x = b.input("x", {3, 3});
  std::string w = b.random_constant("w", {3, 3});
  // input -> output: the copy must stay; a Dropout there becomes an Identity.
  std::string passthrough = b.node("Dropout", {x}, {}, "dropout_out");
  // constant -> output: stays too.
  std::string weight_out = b.node("Identity", {w}, {}, "weight_out");
  // two graph outputs naming the same value: one copy stays.
  std::string s = b.node("Sigmoid", {x});
  std::string s_copy = b.node("Identity", {s}, {}, "s_copy");
  // real work that looks like a no-op by type.
  std::string tr = b.node("Transpose", {x}, {{"perm", std::vector<int64_t>{1, 0}}});
  auto dm = b.node_n("Dropout", {tr}, 2, {}, "dropout_with_mask");
  std::string mask_f = b.node("Cast", {dm[1]}, {{"to", int64_t{1}}});
  b.output(passthrough);
  b.output(weight_out);
  b.output(s);
  b.output(s_copy);
  b.output(b.node("Add", {dm[0], mask_f}));
  Graph after = check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::simplify(g); });
  EXPECT_EQ(after.find_node("dropout_out")->op_type, "Identity");
  EXPECT_EQ(after.find_node("weight_out")->op_type, "Identity");
  EXPECT_NE(after.find_node("s_copy"), nullptr);
  EXPECT_EQ(count_op(after, "Transpose"), 1);
  EXPECT_NE(after.find_node("dropout_with_mask"), nullptr);
  EXPECT_EQ(after.outputs, b.graph().outputs);
}

TEST_F(Passes, SimplifyLeavesTrainingModeDropout) {
  GraphBuilder b;
  std::string x = b.input("x", {4});
  std::string y = b.node("Relu", {x});
  Graph g = b.graph();
  g.initializers["train"] = test::tensor_of<uint8_t>({}, {1});
  g.initializers["train"].type.dtype = "bool";
  g.value_info["train"] = g.initializers["train"].type;
  g.nodes.push_back({"Dropout", "", "drop", {y, "", "train"}, {"z"}, {}});
  g.value_info["z"] = g.value_info[y];
  g.outputs = {"z"};
  EXPECT_EQ(passes::simplify(g), 0);
  EXPECT_EQ(count_op(g, "Dropout"), 1);
  // Training mode with a constant ratio of 0 drops nothing (torchvision's Swin).
  g.initializers["ratio"] = test::tensor_of<float>({}, {0.25f});
  g.value_info["ratio"] = g.initializers["ratio"].type;
  g.nodes.back().inputs[1] = "ratio";
  EXPECT_EQ(passes::simplify(g), 0);
  g.initializers["ratio"] = test::tensor_of<float>({}, {0.0f});
  EXPECT_EQ(passes::simplify(g), 1);
  EXPECT_EQ(count_op(g, "Dropout"), 0);
  g.nodes.push_back({"Dropout", "", "drop2", {"z", "", "train"}, {"z2"}, {}});
  g.value_info["z2"] = g.value_info["z"];
  g.outputs = {"z2"};
  g.initializers["train"].data[0] = 0;
  EXPECT_EQ(passes::simplify(g), 1);
  passes::verify_graph(g);
  EXPECT_EQ(count_op(g, "Dropout"), 0);
  EXPECT_EQ(g.nodes[0].outputs[0], "z2");
}

// ---- fold_batch_norm -------------------------------------------------------------

using Attrs = std::map<std::string, graph::Attribute>;

// BatchNormalization's four [c] parameters, var kept away from 0.
std::vector<std::string> bn_params(GraphBuilder& b, const std::string& p, int64_t c) {
  return {b.random_constant(p + "_gamma", {c}, 0.5, 1.5), b.random_constant(p + "_beta", {c}),
          b.random_constant(p + "_mean", {c}), b.random_constant(p + "_var", {c}, 0.2, 1.5)};
}

std::string batch_norm(GraphBuilder& b, const std::string& x, const std::string& p, int64_t c,
                       float eps = 1e-5f) {
  std::vector<std::string> in = {x};
  for (auto& v : bn_params(b, p, c)) in.push_back(v);
  return b.node("BatchNormalization", in, {{"epsilon", eps}});
}

TEST_F(Passes, FoldBatchNormIntoConv) {
  struct Case {
    int64_t c, oc, hw, k, group;
    bool bias;
  };
  for (Case k : {Case{3, 8, 7, 3, 1, true}, Case{4, 6, 5, 1, 1, false}, Case{4, 6, 9, 3, 2, true},
                 Case{8, 8, 6, 3, 8, false}}) {
    GraphBuilder b(k.oc * 10 + k.group);
    std::string x = b.input("x", {2, k.c, k.hw, k.hw});
    std::vector<std::string> conv_in = {x, b.random_constant("w", {k.oc, k.c / k.group, k.k, k.k})};
    if (k.bias) conv_in.push_back(b.random_constant("b", {k.oc}));
    Attrs attrs = {{"group", k.group}, {"pads", std::vector<int64_t>(4, k.k / 2)}};
    std::string y = b.node("Conv", conv_in, attrs, "conv");
    std::string bn = batch_norm(b, y, "bn", k.oc, 1e-3f);
    b.output(b.node("Relu", {bn}));
    Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                       [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 1); });
    EXPECT_EQ(count_op(after, "BatchNormalization"), 0);
    const graph::Node* conv = after.find_node("conv");
    ASSERT_NE(conv, nullptr);
    ASSERT_EQ(conv->inputs.size(), 3u);
    EXPECT_EQ(after.initializers.at(conv->inputs[2]).type.shape, (std::vector<int64_t>{k.oc}));
    EXPECT_EQ(after.nodes.back().inputs[0], conv->outputs[0]);
    EXPECT_FALSE(after.value_info.count(y));
  }
}

TEST_F(Passes, FoldPerChannelMulAddChainIntoConv) {
  GraphBuilder b(21);
  const int64_t oc = 5;
  std::string x = b.input("x", {1, 3, 6, 6});
  std::string y = b.node("Conv", {x, b.random_constant("w", {oc, 3, 3, 3})}, {}, "conv");
  y = b.node("Mul", {y, b.random_constant("s", {oc, 1, 1})});
  y = b.node("Add", {b.random_constant("t", {1, oc, 1, 1}), y});  // constant first
  y = b.node("Div", {y, b.random_constant("d", {}, 0.5, 2.0)});
  y = b.node("Sub", {y, b.random_constant("u", {oc, 1, 1})});
  y = batch_norm(b, y, "bn", oc);
  y = b.node("Mul", {y, b.random_constant("s1", {1})});
  b.output(b.node("Relu", {y}));
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 6); });
  std::vector<std::string> ops;
  for (const auto& n : after.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Relu"}));
}

TEST_F(Passes, FoldBatchNormLeavesWhatItCannotFold) {
  GraphBuilder b(22);
  const int64_t oc = 4;
  std::string x = b.input("x", {1, 2, 5, 5});
  std::string w = b.random_constant("w", {oc, 2, 1, 1});
  // Conv output read twice: its BN stays.
  std::string c1 = b.node("Conv", {x, w}, {}, "conv_two_readers");
  std::string bn1 = batch_norm(b, c1, "bn1", oc);
  std::string r1 = b.node("Relu", {c1});
  // A spatial (not per-channel) constant.
  std::string c2 = b.node("Conv", {x, w}, {}, "conv_spatial");
  std::string m2 = b.node("Mul", {c2, b.random_constant("sp", {1, 1, 5, 5})}, {}, "mul_spatial");
  // A non-constant operand.
  std::string c3 = b.node("Conv", {x, w}, {}, "conv_dyn");
  std::string m3 = b.node("Mul", {c3, b.node("Sigmoid", {c3})}, {}, "mul_dyn");
  // Broadcasting the conv output up: [2, oc, 1, 1] against batch 1.
  std::string c4 = b.node("Conv", {x, w}, {}, "conv_grow");
  std::string a4 = b.node("Add", {c4, b.random_constant("grow", {2, oc, 1, 1})}, {}, "add_grow");
  // Weights that are not constant.
  std::string wi = b.input("w_in", {oc, 2, 1, 1});
  std::string c5 = b.node("Conv", {x, wi}, {}, "conv_dyn_w");
  std::string bn5 = batch_norm(b, c5, "bn5", oc);
  // A BN that follows no anchor, and a BN whose conv output is a graph output.
  std::string bn6 = batch_norm(b, b.node("Relu", {x}), "bn6", 2);
  std::string c7 = b.node("Conv", {x, w}, {}, "conv_out");
  std::string bn7 = batch_norm(b, c7, "bn7", oc);
  // c - y would need negated weights: only y - c is folded.
  std::string c8 = b.node("Conv", {x, w}, {}, "conv_rsub");
  std::string s8 = b.node("Sub", {b.random_constant("rs", {oc, 1, 1}), c8}, {}, "rsub");
  for (auto& v : {bn1, r1, m2, m3, a4, bn5, bn6, c7, bn7, s8}) b.output(v);
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 0); });
  EXPECT_EQ(after.nodes.size(), b.graph().nodes.size());
}

TEST_F(Passes, FoldBatchNormSharedWeightsStayIntact) {
  GraphBuilder b(23);
  std::string x = b.input("x", {1, 3, 4, 4});
  std::string w = b.random_constant("w", {6, 3, 3, 3});
  std::string bias = b.random_constant("bias", {6});
  std::string a = batch_norm(b, b.node("Conv", {x, w, bias}, {}, "conv_a"), "bn", 6);
  std::string c = b.node("Conv", {x, w, bias}, {}, "conv_b");
  b.output(b.node("Add", {a, c}));
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 1); });
  EXPECT_EQ(after.find_node("conv_b")->inputs, (std::vector<std::string>{x, w, bias}));
  EXPECT_NE(after.find_node("conv_a")->inputs[1], w);
}

TEST_F(Passes, FoldAffineIntoGemmAndMatMul) {
  for (int64_t trans_b : {0, 1}) {
    for (bool has_c : {false, true}) {
      GraphBuilder b(30 + trans_b * 2 + has_c);
      const int64_t m = 3, k = 7, n = 5;
      std::string x = b.input("x", {m, k});
      std::vector<std::string> in = {
          x, b.random_constant("B",
                               trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n})};
      if (has_c) in.push_back(b.random_constant("C", {n}));
      std::string y =
          b.node("Gemm", in, {{"transB", trans_b}, {"alpha", 2.0f}, {"beta", 0.5f}}, "gemm");
      y = b.node("Mul", {y, b.random_constant("s", {n})});
      y = b.node("Add", {y, b.random_constant("t", {1, n})});
      y = batch_norm(b, y, "bn", n);
      b.output(b.node("Relu", {y}));
      Graph after = check_pass_preserves(
          b.graph(), b.inputs(), [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 3); });
      EXPECT_EQ(after.nodes.size(), 2u);
      EXPECT_EQ(after.find_node("gemm")->attr<float>("beta"), 1.0f);
    }
  }
  GraphBuilder b(40);
  std::string x = b.input("x", {2, 3, 6});
  std::string y = b.node("MatMul", {x, b.random_constant("B", {6, 4})}, {}, "matmul");
  y = b.node("Mul", {y, b.random_constant("s", {4})});
  y = b.node("Div", {y, b.random_constant("d", {1, 1, 4}, 0.5, 2)});
  std::string z = b.node("Add", {y, b.random_constant("bias", {4})}, {}, "bias_add");
  b.output(z);
  Graph after = check_pass_preserves(b.graph(), b.inputs(),
                                     [](Graph& g) { EXPECT_EQ(passes::fold_batch_norm(g), 2); });
  std::vector<std::string> ops;
  for (const auto& n : after.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops,
            (std::vector<std::string>{"MatMul", "Add"}));  // MatMul has no bias to take the Add
}

// ---- eliminate_dead_code ---------------------------------------------------

TEST_F(Passes, EliminateDeadCodeRemovesUnreachableNodesAndConstants) {
  GraphBuilder b(6);
  std::string x = b.input("x", {4});
  std::string unused_in = b.input("unused", {2});
  std::string w = b.random_constant("w", {4});
  std::string dead_w = b.random_constant("dead_w", {4});
  b.random_constant("orphan", {7});
  std::string y = b.node("KilnTestAdd", {x, w}, {}, "live_add");
  std::string d1 = b.node("KilnTestAdd", {y, dead_w}, {}, "dead_add");
  b.node("KilnTestAffine", {d1}, {}, "dead_affine");
  auto halves = b.node_n("KilnTestSplit2", {y}, 2, {}, "half_live_split");
  std::string z = b.node("KilnTestAffine", {halves[0]}, {{"a", 2.0f}}, "live_affine");
  b.output(z);
  Graph after = check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) {
    auto stats = passes::eliminate_dead_code(g);
    EXPECT_EQ(stats.nodes_removed, 2);
    EXPECT_EQ(stats.initializers_removed, 2);
  });
  std::vector<std::string> names;
  for (const auto& n : after.nodes) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"live_add", "half_live_split", "live_affine"}));
  EXPECT_EQ(after.initializers.size(), 1u);
  EXPECT_TRUE(after.initializers.count(w));
  EXPECT_FALSE(after.value_info.count(d1));
  EXPECT_FALSE(after.value_info.count("orphan"));
  EXPECT_EQ(after.inputs.size(), 2u);  // the interface stays
  (void)unused_in;
}

TEST_F(Passes, EliminateDeadCodeKeepsConstantGraphOutputs) {
  GraphBuilder b;
  std::string x = b.input("x", {2});
  std::string c = b.random_constant("c", {2});
  b.output(b.node("KilnTestAffine", {x}));
  b.output(c);
  Graph after =
      check_pass_preserves(b.graph(), b.inputs(), [](Graph& g) { passes::eliminate_dead_code(g); });
  EXPECT_TRUE(after.initializers.count(c));
}

// ---- the default pipeline ------------------------------------------------------

TEST_F(Passes, DefaultPipelineOnASmallResidualClassifier) {
  for (int64_t batch : {1, 3}) {
    GraphBuilder b(50 + batch);
    const int64_t c = 4, hw = 6, classes = 5;
    std::string x = b.input("image", {batch, 3, hw, hw});
    std::string y = b.node("Identity", {x});
    y = b.node("Conv", {y, b.random_constant("w1", {c, 3, 3, 3}), b.random_constant("b1", {c})},
               {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    y = batch_norm(b, y, "bn1", c);
    std::string r = b.node("Relu", {y});
    y = b.node("Dropout", {r});
    y = b.node("Conv", {y, b.random_constant("w2", {c, c, 1, 1})});
    y = b.node("Mul", {y, b.random_constant("scale", {c, 1, 1})});
    y = b.node("Add", {y, r});
    b.node("Sigmoid", {y});  // dead
    std::string shape = b.node("Shape", {y});
    std::string n =
        b.node("Gather", {shape, b.constant("zero", test::tensor_of<int64_t>({1}, {0}))});
    std::string flat = b.node("Concat", {n, b.ints("minus_one", {-1})}, {{"axis", int64_t{0}}});
    y = b.node("Reshape", {y, flat});
    std::string wt = b.node("Transpose", {b.random_constant("fc_w", {classes, c * hw * hw})});
    y = b.node("Gemm", {y, wt, b.random_constant("fc_b", {classes})});
    b.output(b.node("Identity", {y}, {}, "logits"));
    Graph after = check_pass_preserves(b.graph(), b.inputs(), passes::run_default_passes);
    std::vector<std::string> ops;
    for (const auto& node : after.nodes) ops.push_back(node.op_type);
    EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "Relu", "Conv", "Add", "Reshape", "Gemm"}));
    EXPECT_EQ(after.nodes.back().outputs[0], "logits");
    // Only what the remaining nodes read is left: the 2 scaled conv weights, the
    // first conv's bias (the second has none: a Mul adds no shift), the reshape
    // target, the transposed fc weight and its bias.
    EXPECT_EQ(after.initializers.size(), 6u);
    std::set<std::string> values;
    for (const auto& in : after.inputs) values.insert(in.name);
    for (const auto& [name, init] : after.initializers) values.insert(name);
    for (const auto& node : after.nodes)
      for (const auto& o : node.outputs) values.insert(o);
    for (const auto& [name, type] : after.value_info)
      EXPECT_TRUE(values.count(name)) << "stale value_info for " << name;
  }
}

// Random DAGs of convs, BNs, per-channel constants, no-ops, constant chains
// and joins, with values read by several nodes and intermediate graph
// outputs: every pass and the pipeline keep the outputs and the invariants.
TEST_F(Passes, RandomGraphsKeepTheirOutputsThroughEveryPass) {
  std::mt19937_64 pick(77);
  for (int trial = 0; trial < 150; ++trial) {
    GraphBuilder b(1000 + trial);
    std::vector<std::pair<std::string, int64_t>> pool;  // value, channels ([1, C, 5, 5])
    pool.push_back({b.input("x", {1, 3, 5, 5}), 3});
    int steps = 4 + pick() % 10;
    for (int k = 0; k < steps; ++k) {
      // Mostly extend the chain (so that anchors have single readers), sometimes branch.
      auto [v, c] = pick() % 3 ? pool.back() : pool[pick() % pool.size()];
      std::string p = "k" + std::to_string(k);
      std::string out;
      int64_t oc = c;
      switch (pick() % 8) {
        case 0: {
          oc = 2 + pick() % 3;
          std::vector<std::string> in = {v, b.random_constant(p + "_w", {oc, c, 3, 3})};
          if (pick() % 2) in.push_back(b.random_constant(p + "_b", {oc}));
          out = b.node("Conv", in, {{"pads", std::vector<int64_t>(4, 1)}});
          break;
        }
        case 1: out = batch_norm(b, v, p, c); break;
        case 2: {
          std::vector<std::vector<int64_t>> shapes = {{c, 1, 1}, {1}, {1, c, 1, 1}, {}};
          std::string cst = b.random_constant(p + "_c", shapes[pick() % shapes.size()], 0.5, 1.5);
          const char* ops[] = {"Mul", "Add", "Sub", "Div"};
          out = b.node(ops[pick() % 4], {v, cst});
          break;
        }
        case 3: out = b.node(pick() % 2 ? "Identity" : "Dropout", {v}); break;
        case 4: out = b.node("Relu", {v}); break;
        case 5: {
          std::string a = b.random_constant(p + "_a", {c, 1, 1});
          std::string s = b.node("Mul", {a, b.random_constant(p + "_s", {1})});
          out = b.node("Add", {v, b.node("Identity", {s})});
          break;
        }
        default: {
          std::vector<std::string> same;
          for (auto& [u, uc] : pool)
            if (uc == c) same.push_back(u);
          out = b.node("Add", {v, same[pick() % same.size()]});
        }
      }
      pool.push_back({out, oc});
    }
    b.output(pool.back().first);
    if (pick() % 2) b.output(pool[1 + pick() % (pool.size() - 1)].first);
    if (b.graph().outputs.size() == 2 && b.graph().outputs[0] == b.graph().outputs[1])
      b.graph().outputs.pop_back();
    SCOPED_TRACE("trial " + std::to_string(trial));
    const Graph& g = b.graph();
    auto in = b.inputs();
    check_pass_preserves(g, in, [](Graph& h) { passes::simplify(h); });
    check_pass_preserves(g, in, [](Graph& h) { passes::fold_constants(h); });
    check_pass_preserves(g, in, [](Graph& h) { passes::fold_batch_norm(h); });
    check_pass_preserves(g, in, [](Graph& h) { passes::eliminate_dead_code(h); });
    Graph after = check_pass_preserves(g, in, passes::run_default_passes, 1e-4);
    EXPECT_EQ(after.outputs, g.outputs);
    EXPECT_EQ(count_op(after, "Dropout"), 0);
    for (const auto& n : after.nodes) {  // a copy stays only where two names must both exist
      if (n.op_type != "Identity") continue;
      const std::string& src = n.inputs[0];
      bool needed = src == "x" || after.initializers.count(src) ||
                    std::count(after.outputs.begin(), after.outputs.end(), src);
      EXPECT_TRUE(needed) << n.name << " copies " << src;
    }
    if (HasFailure()) return;
  }
}

// ---- memory_plan -------------------------------------------------------------

// Live range of every value as [first step, last step] (externals: the whole run).
std::map<std::string, std::pair<int, int>> live_ranges(const passes::MemoryPlanRequest& r) {
  std::map<std::string, std::pair<int, int>> live;
  const int end = static_cast<int>(r.steps.size());
  for (int k = 0; k < end; ++k) {
    for (const auto& o : r.steps[k].outputs) live[o] = {k, k};
    for (const auto& i : r.steps[k].inputs) live[i].second = k;
  }
  for (const auto& e : r.external) live[e] = {-1, end};
  return live;
}

// The plan's values that share bytes while both are live, except declared aliases.
void expect_no_live_overlap(const passes::MemoryPlanRequest& r, const passes::MemoryPlan& p) {
  auto live = live_ranges(r);
  // Alias chains share storage by design: give each value its root.
  std::map<std::string, std::string> root;
  for (const auto& a : r.aliases)
    if (!r.external.count(a.output)) root[a.output] = a.input;
  // A concat's inputs live inside its output's bytes: the output is their root.
  for (const auto& c : r.concats)
    for (const auto& in : c.inputs) root[in] = c.output;
  auto root_of = [&](std::string v) {
    while (root.count(v)) v = root[v];
    return v;
  };
  // An alias keeps its root's storage alive: extend the root's range (a
  // concat's storage is taken by the first of its inputs produced).
  for (const auto& [v, range] : live) {
    auto& rr = live[root_of(v)];
    rr.first = std::min(rr.first, range.first);
    rr.second = std::max(rr.second, range.second);
  }
  for (const auto& [a, ra] : live)
    for (const auto& [b, rb] : live) {
      if (a >= b || root_of(a) == root_of(b)) continue;
      const auto& sa = p.values.at(a);
      const auto& sb = p.values.at(b);
      if (sa.storage != sb.storage) continue;
      auto la = live[root_of(a)], lb = live[root_of(b)];
      bool time_overlap = !(la.second < lb.first || lb.second < la.first);
      bool byte_overlap =
          sa.offset < sb.offset + r.sizes.at(b) && sb.offset < sa.offset + r.sizes.at(a);
      EXPECT_FALSE(time_overlap && byte_overlap)
          << a << " and " << b << " share storage " << sa.storage;
    }
  for (const auto& [v, s] : p.values)
    EXPECT_LE(s.offset + r.sizes.at(v), p.storages.at(s.storage).size) << v;
  // External values own their storage: only views declared as their aliases join them.
  for (const auto& e : r.external) {
    const auto& s = p.values.at(e);
    EXPECT_TRUE(p.storages[s.storage].external) << e;
    for (const auto& [v, sv] : p.values)
      if (v != e && sv.storage == s.storage) {
        EXPECT_EQ(root_of(v), e) << v << " shares " << e;
      }
  }
}

size_t no_reuse_bytes(const passes::MemoryPlanRequest& r) {
  size_t total = 0;
  for (const auto& [v, s] : r.sizes)
    if (!r.external.count(v)) total += s;
  return total;
}

TEST_F(Passes, MemoryPlanChainReusesStorage) {
  passes::MemoryPlanRequest r;
  r.sizes["in"] = 400;
  r.sizes["w"] = 100;
  std::string prev = "in";
  for (int i = 0; i < 10; ++i) {
    std::string v = "t" + std::to_string(i);
    r.sizes[v] = 400 + 8 * (i % 3);
    r.steps.push_back({{prev, "w"}, {v}});
    prev = v;
  }
  r.steps.push_back({{prev}, {"out"}});
  r.sizes["out"] = 400;
  r.external = {"in", "w", "out"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  // A chain needs two buffers that ping-pong.
  EXPECT_LE(p.internal_bytes(), 2u * 416u);
  EXPECT_LT(p.internal_bytes(), no_reuse_bytes(r));
  EXPECT_EQ(p.total_bytes(), p.internal_bytes() + 900u);
}

TEST_F(Passes, MemoryPlanResidualDiamond) {
  // x -> a -> b -> c = add(b, x1) with x1 (skip) alive across the block, repeated.
  passes::MemoryPlanRequest r;
  r.sizes["x"] = 1000;
  std::string skip = "x";
  for (int blk = 0; blk < 4; ++blk) {
    std::string s = std::to_string(blk);
    r.steps.push_back({{skip}, {"a" + s}});
    r.steps.push_back({{"a" + s}, {"b" + s}});
    r.steps.push_back({{"b" + s, skip}, {"c" + s}});
    r.sizes["a" + s] = 500;
    r.sizes["b" + s] = 1000;
    r.sizes["c" + s] = 1000;
    skip = "c" + s;
  }
  r.steps.push_back({{skip}, {"y"}});
  r.sizes["y"] = 10;
  r.external = {"x", "y"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  EXPECT_LT(p.internal_bytes(), no_reuse_bytes(r) / 2);
  for (const auto& e : r.external) EXPECT_EQ(p.storages[p.values.at(e).storage].size, r.sizes[e]);
}

TEST_F(Passes, MemoryPlanRandomGraphsNeverOverlapLiveValues) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    passes::MemoryPlanRequest r;
    std::vector<std::string> values = {"in0", "in1", "p0"};
    r.external = {"in0", "in1", "p0"};
    std::uniform_int_distribution<size_t> size(1, 4096);
    for (auto& v : values) r.sizes[v] = size(rng);
    int steps = 1 + rng() % 30;
    for (int k = 0; k < steps; ++k) {
      passes::PlanStep s;
      int reads = 1 + rng() % 3;
      for (int i = 0; i < reads; ++i) s.inputs.push_back(values[rng() % values.size()]);
      int writes = 1 + rng() % 2;
      for (int i = 0; i < writes; ++i) {
        std::string v = "v" + std::to_string(k) + "_" + std::to_string(i);
        r.sizes[v] = size(rng);
        s.outputs.push_back(v);
        if (i == 0 && rng() % 4 == 0) {  // a reshape of the first input: same bytes
          r.sizes[v] = r.sizes[s.inputs[0]];
          r.aliases.push_back({v, s.inputs[0], 0});
        }
      }
      for (auto& v : s.outputs) values.push_back(v);
      r.steps.push_back(s);
      // Now and then a concat of two values produced by earlier steps that
      // are in no concat, no alias and not external: its own step, as the build makes.
      if (rng() % 3 == 0) {
        std::vector<std::string> free_values;
        for (const auto& v : values) {
          bool taken = r.external.count(v) > 0;
          for (const auto& a : r.aliases) taken = taken || a.output == v;
          for (const auto& c : r.concats)
            taken = taken || c.output == v ||
                    std::find(c.inputs.begin(), c.inputs.end(), v) != c.inputs.end();
          if (!taken) free_values.push_back(v);
        }
        if (free_values.size() >= 2) {
          std::string c = "cat" + std::to_string(k);
          std::string in0 = free_values[rng() % free_values.size()], in1 = in0;
          while (in1 == in0) in1 = free_values[rng() % free_values.size()];
          r.sizes[c] = r.sizes[in0] + r.sizes[in1];
          r.concats.push_back({c, {in0, in1}, {0, r.sizes[in0]}});
          r.steps.push_back({{in0, in1}, {c}});
          values.push_back(c);
        }
      }
    }
    r.steps.push_back({{values.back()}, {"gout"}});  // a graph output
    r.sizes["gout"] = size(rng);
    r.external.insert("gout");
    auto p = passes::plan_memory(r);
    expect_no_live_overlap(r, p);
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

TEST_F(Passes, MemoryPlanAliasesShareStorageAndKeepItAlive) {
  passes::MemoryPlanRequest r;
  r.sizes = {{"x", 64}, {"a", 256}, {"a2", 256}, {"b", 256}, {"c", 256}, {"y", 64}};
  r.steps = {
      {{"x"}, {"a"}}, {{"a"}, {"a2"}}, {{"a2"}, {"b"}}, {{"b", "a2"}, {"c"}}, {{"c"}, {"y"}}};
  r.aliases = {{"a2", "a", 0}};
  r.external = {"x", "y"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  EXPECT_EQ(p.values.at("a2").storage, p.values.at("a").storage);
  EXPECT_NE(p.values.at("b").storage, p.values.at("a").storage);  // a2 is read with b
  EXPECT_NE(p.values.at("c").storage, p.values.at("a").storage);  // read in c's own step
}

// Concat c = [a, b]: a and b are written in place inside c's storage, which
// stays taken from a's step (although a's other reader runs before b
// exists) until c's last reader; a temporary made between them lives
// elsewhere.
TEST_F(Passes, MemoryPlanConcatInputsLiveInsideTheirConcat) {
  passes::MemoryPlanRequest r;
  r.sizes = {{"x", 64}, {"a", 96}, {"n", 96}, {"t", 160}, {"b", 32}, {"c", 128}, {"y", 64}};
  r.steps = {{{"x"}, {"a"}}, {{"a"}, {"n"}},      {{"n"}, {"t"}},
             {{"t"}, {"b"}}, {{"a", "b"}, {"c"}}, {{"c", "n"}, {"y"}}};
  r.concats = {{"c", {"a", "b"}, {0, 96}}};
  r.external = {"x", "y"};
  auto p = passes::plan_memory(r);
  expect_no_live_overlap(r, p);
  const int s = p.values.at("c").storage;
  EXPECT_EQ(p.values.at("a").storage, s);
  EXPECT_EQ(p.values.at("b").storage, s);
  EXPECT_EQ(p.values.at("b").offset, p.values.at("c").offset + 96);
  EXPECT_NE(p.values.at("t").storage, s);
  EXPECT_GE(p.storages[s].size, 128u);
  // Members of two concats, a concat input that is external or too large.
  auto bad = r;
  bad.concats.push_back({"t", {"a"}, {0}});
  EXPECT_THROW(passes::plan_memory(bad), std::invalid_argument);
  bad = r;
  bad.concats[0].inputs[0] = "x";
  EXPECT_THROW(passes::plan_memory(bad), std::invalid_argument);
  bad = r;
  bad.concats[0].offsets[1] = 100;
  EXPECT_THROW(passes::plan_memory(bad), std::invalid_argument);
  bad = r;
  bad.steps[4].inputs = {"a"};  // the concat's step must read every input
  EXPECT_THROW(passes::plan_memory(bad), std::invalid_argument);
}

TEST_F(Passes, MemoryPlanRejectsInconsistentRequests) {
  passes::MemoryPlanRequest r;
  r.sizes = {{"x", 4}, {"y", 4}};
  r.steps = {{{"x"}, {"y"}}};
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // x never produced
  r.external = {"x"};
  EXPECT_NO_THROW(passes::plan_memory(r));
  r.steps.push_back({{"x"}, {"y"}});
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // y produced twice
  r.steps.pop_back();
  r.sizes.erase("y");
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // no size
  r.sizes["y"] = 8;
  r.aliases = {{"y", "x", 0}};
  EXPECT_THROW(passes::plan_memory(r), std::invalid_argument);  // 8 bytes do not fit in x
}

}  // namespace
}  // namespace kiln
