// fold_qdq and expand_quantized_ops (graph/passes/fold_qdq.h) on small
// graphs: the node counts each pattern should give, and the interpreter's
// outputs before and after. Folding swaps float arithmetic for the exact
// integer kind (and expanding swaps it back), so quantized outputs may differ
// by 1 unit where a value sits within float rounding of a half; the fraction
// of exact matches is printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "graph/interpreter.h"
#include "graph/ops/op_util.h"
#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/pipeline.h"
#include "graph/passes/verify_graph.h"
#include "graph_builder.h"

namespace kiln::test {
namespace {

using graph::Graph;
using graph::Initializer;

// Every output within `units` (quantized tensors) or rel 1e-5 (float); the
// fraction of exactly equal quantized elements is printed.
void expect_within(const std::map<std::string, Initializer>& got,
                   const std::map<std::string, Initializer>& want, int units,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    const Initializer& v = got.at(name);
    ASSERT_EQ(v.type, w.type) << what << " " << name;
    if (w.type.dtype == "float32") {
      expect_same_outputs({{name, v}}, {{name, w}});
      continue;
    }
    std::vector<double> a = graph::op_util::to_doubles(graph::Node{}, v);
    std::vector<double> b = graph::op_util::to_doubles(graph::Node{}, w);
    double worst = 0;
    size_t exact = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::fabs(a[i] - b[i]));
      exact += a[i] == b[i];
    }
    std::printf("%s %s: max diff %g units, %zu of %zu exact\n", what.c_str(), name.c_str(), worst,
                exact, a.size());
    EXPECT_LE(worst, units) << what << " " << name;
  }
}

// Runs fold_qdq on a copy of g; checks the invariants and the outputs.
Graph folded(const Graph& g, const std::map<std::string, Initializer>& inputs, int expect_folds) {
  graph::passes::verify_graph(g);
  Graph f = g;
  EXPECT_EQ(graph::passes::fold_qdq(f), expect_folds);
  graph::passes::eliminate_dead_code(f);
  EXPECT_NO_THROW(graph::passes::verify_graph(f));
  expect_within(graph::run_graph(f, inputs), graph::run_graph(g, inputs), 1, "folded");
  return f;
}

Graph expanded(const Graph& g, const std::map<std::string, Initializer>& inputs, int units) {
  Graph e = g;
  graph::passes::expand_quantized_ops(e);
  EXPECT_NO_THROW(graph::passes::verify_graph(e));
  expect_within(graph::run_graph(e, inputs), graph::run_graph(g, inputs), units, "expanded");
  return e;
}

Initializer scalar_f(float v) { return tensor_of<float>({}, {v}); }

struct ConvCase {
  std::string act;        // "", "Relu" or "Clip"
  float clip_hi = 6.0f;   // Clip's max
  float y_scale = 0.05f;  // Q's scale
  uint8_t y_zp = 0;       // Q's zero point
  bool bias = true;
  bool quantize_weight_in_graph = false;  // Q(float weight) -> DQ, as PyTorch writes it
};

// DQ(x u8) , DQ(w s8 per channel) , DQ(b i32) -> Conv -> [act] -> Q(u8).
GraphBuilder conv_graph(const ConvCase& c) {
  GraphBuilder b(7);
  std::string x = b.input("x", {1, 4, 9, 9}, "uint8", 0, 255);
  std::string xs = b.constant("xs", scalar_f(0.02f));
  std::string xz = b.constant("xz", tensor_of<uint8_t>({}, {120}));
  std::string xf = b.node("DequantizeLinear", {x, xs, xz});
  std::vector<float> wsv = {0.01f, 0.02f, 0.005f, 0.03f, 0.012f, 0.008f};
  std::string ws = b.constant("ws", tensor_of<float>({6}, wsv));
  std::string wz = b.constant("wz", tensor_of<int8_t>({6}, {0, 0, 0, 0, 0, 0}));
  std::string wq;
  if (c.quantize_weight_in_graph) {
    std::string wfloat = b.random_constant("w_float", {6, 4, 3, 3}, -2, 2);
    wq = b.node("QuantizeLinear", {wfloat, ws, wz}, {{"axis", int64_t{0}}});
  } else {
    wq = b.constant("wq", random_tensor("int8", {6, 4, 3, 3}, b.rng(), -127, 127));
  }
  std::string wf = b.node("DequantizeLinear", {wq, ws, wz}, {{"axis", int64_t{0}}});
  std::vector<std::string> conv_in = {xf, wf};
  if (c.bias) {
    std::vector<float> bsv;
    for (float s : wsv) bsv.push_back(0.02f * s);
    std::string bq = b.constant("bq", random_tensor("int32", {6}, b.rng(), -3000, 3000));
    std::string bs = b.constant("bs", tensor_of<float>({6}, bsv));
    conv_in.push_back(b.node("DequantizeLinear", {bq, bs}, {{"axis", int64_t{0}}}));
  }
  std::string y =
      b.node("Conv", conv_in,
             {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 1}}});
  if (c.act == "Relu") y = b.node("Relu", {y});
  if (c.act == "Clip")
    y = b.node("Clip",
               {y, b.constant("lo", scalar_f(0.0f)), b.constant("hi", scalar_f(c.clip_hi))});
  std::string ys = b.constant("ys", scalar_f(c.y_scale));
  std::string yz = b.constant("yz", tensor_of<uint8_t>({}, {c.y_zp}));
  b.output(b.node("QuantizeLinear", {y, ys, yz}));
  return b;
}

TEST(FoldQdq, ConvWithBiasAndReluBecomesOneQLinearConv) {
  GraphBuilder b = conv_graph({"Relu"});
  Graph f = folded(b.graph(), b.inputs(), 1);
  EXPECT_EQ(count_op(f, "QLinearConv"), 1);
  EXPECT_EQ(f.nodes.size(), 1u);            // the DQs, Conv, Relu and Q are gone
  EXPECT_EQ(f.nodes[0].inputs.size(), 9u);  // with the int32 bias
  EXPECT_EQ(f.nodes[0].inputs[8], "bq");
  // And back to float: DQ, DQ, Mul (bias scale), DQ, Conv, Q.
  Graph e = expanded(f, b.inputs(), 1);
  EXPECT_EQ(count_op(e, "QLinearConv"), 0);
  EXPECT_EQ(count_op(e, "Conv"), 1);
  EXPECT_EQ(count_op(e, "DequantizeLinear"), 3);
  EXPECT_EQ(count_op(e, "QuantizeLinear"), 1);
  // Kept for an int8 template: nothing changes.
  Graph k = f;
  EXPECT_EQ(graph::passes::expand_quantized_ops(
                k, [](const graph::Node& n) { return n.op_type == "QLinearConv"; }),
            0);
  EXPECT_EQ(count_op(k, "QLinearConv"), 1);
  EXPECT_EQ(k.nodes.size(), 1u);
  // The whole default pipeline (fold, expand, constant folding) keeps the outputs.
  Graph p = b.graph();
  graph::passes::run_default_passes(p);
  expect_within(graph::run_graph(p, b.inputs()), graph::run_graph(b.graph(), b.inputs()), 1,
                "pipeline");
  // The int8 template covers this QLinearConv (strategy.h's QLinear rows), so
  // the pipeline keeps it integer.
  EXPECT_EQ(count_op(p, "QLinearConv"), 1);
  EXPECT_EQ(count_op(p, "Conv"), 0);
  EXPECT_EQ(count_op(p, "DequantizeLinear"), 0);
}

TEST(FoldQdq, ActivationFoldsOnlyWhenQsSaturationIsExact) {
  // Relu before a Q whose zero point is above the range minimum: Relu matters.
  GraphBuilder relu = conv_graph({"Relu", 6.0f, 0.05f, 100});
  Graph f = folded(relu.graph(), relu.inputs(), 0);
  EXPECT_EQ(count_op(f, "Relu"), 1);
  // Clip(0, 6) before Q with range exactly [0, 6]: Q saturates there itself.
  GraphBuilder clip = conv_graph({"Clip", 6.0f, 6.0f / 255.0f, 0});
  f = folded(clip.graph(), clip.inputs(), 1);
  EXPECT_EQ(count_op(f, "Clip"), 0);
  // Clip(0, 6) before Q with range [0, 12]: values above 6 would change.
  GraphBuilder wide = conv_graph({"Clip", 6.0f, 12.0f / 255.0f, 0});
  f = folded(wide.graph(), wide.inputs(), 0);
  EXPECT_EQ(count_op(f, "Clip"), 1);
}

TEST(FoldQdq, WeightQuantizedInTheGraphAndNoBias) {
  ConvCase c;
  c.bias = false;
  c.quantize_weight_in_graph = true;
  GraphBuilder b = conv_graph(c);
  Graph f = folded(b.graph(), b.inputs(), 1);
  ASSERT_EQ(f.nodes.size(), 1u);
  EXPECT_EQ(f.nodes[0].op_type, "QLinearConv");
  EXPECT_EQ(f.nodes[0].inputs.size(), 8u);
  EXPECT_EQ(f.initializers.at(f.nodes[0].inputs[3]).type.dtype, "int8");
}

// PyTorch's exporter writes zero points as Cast(ConstantOfShape(...)): the pass
// evaluates such small constant subgraphs itself (fold_constants runs later).
TEST(FoldQdq, ComputedZeroPointsAreEvaluated) {
  GraphBuilder b(21);
  std::string x = b.input("x", {1, 3, 5, 5}, "uint8", 0, 255);
  std::string xs = b.constant("xs", scalar_f(0.04f));
  std::string xz = b.constant("xz", tensor_of<uint8_t>({}, {9}));
  std::string xf = b.node("DequantizeLinear", {x, xs, xz});
  std::string shape = b.ints("shape", {4});
  std::string zeros = b.node("ConstantOfShape", {shape}, {{"value", tensor_of<int32_t>({1}, {0})}});
  std::string wz = b.node("Cast", {zeros}, {{"to", int64_t{3}}});  // int8
  std::string wq = b.constant("wq", random_tensor("int8", {4, 3, 3, 3}, b.rng(), -127, 127));
  std::string ws = b.constant("ws", tensor_of<float>({4}, {0.01f, 0.02f, 0.03f, 0.04f}));
  std::string wf = b.node("DequantizeLinear", {wq, ws, wz}, {{"axis", int64_t{0}}});
  std::string y = b.node("Conv", {xf, wf});
  b.output(b.node("QuantizeLinear", {y, b.constant("ys", scalar_f(0.2f)),
                                     b.constant("yz", tensor_of<uint8_t>({}, {100}))}));
  Graph f = folded(b.graph(), b.inputs(), 1);
  ASSERT_EQ(count_op(f, "QLinearConv"), 1);
  EXPECT_EQ(count_op(f, "Cast"), 0);  // the zero point is an initializer now
}

TEST(FoldQdq, LeavesNonMatchingGraphsAlone) {
  // The conv output read twice (a graph output too): no fold.
  GraphBuilder b = conv_graph({""});
  for (const graph::Node& n : b.graph().nodes)
    if (n.op_type == "Conv") b.output(n.outputs[0]);
  ASSERT_EQ(b.graph().outputs.size(), 2u);
  folded(b.graph(), b.inputs(), 0);
  // A bias whose scale is not x_scale * w_scale: no fold.
  GraphBuilder s(3);
  std::string x = s.input("x", {1, 2, 4, 4}, "uint8", 0, 255);
  std::string xs = s.constant("xs", scalar_f(0.1f));
  std::string xf = s.node("DequantizeLinear", {x, xs});
  std::string wf = s.node("DequantizeLinear",
                          {s.constant("wq", random_tensor("int8", {3, 2, 1, 1}, s.rng(), -9, 9)),
                           s.constant("ws", scalar_f(0.5f))});
  std::string bf = s.node("DequantizeLinear", {s.constant("bq", tensor_of<int32_t>({3}, {1, 2, 3})),
                                               s.constant("bs", scalar_f(0.07f))});
  std::string y = s.node("Conv", {xf, wf, bf});
  s.output(s.node("QuantizeLinear", {y, s.constant("ys", scalar_f(0.3f))}));
  folded(s.graph(), s.inputs(), 0);
}

// DQ -> MaxPool -> Q with equal parameters: the MaxPool runs on the 8-bit
// values, and the interpreter's outputs equal the float path's exactly (the
// max commutes with the increasing DQ; padded taps never win). u8 and s8,
// odd sizes, padding on every side, a window that leaves the input.
TEST(FoldQdq, MaxPoolOfEqualParametersRunsOnTheQuantizedValues) {
  struct Case {
    std::string dtype;
    double lo, hi;
    std::vector<int64_t> pads, kernel, strides;
  };
  const Case cases[] = {
      {"uint8", 0, 255, {1, 1, 1, 1}, {3, 3}, {2, 2}},    // ResNet's stem pool
      {"int8", -128, 127, {0, 1, 2, 1}, {3, 2}, {1, 2}},  // asymmetric pads
      {"uint8", 0, 255, {0, 0, 0, 0}, {2, 2}, {2, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    GraphBuilder b(11);
    std::string x = b.input("x", {1, 5, 9, 10}, c.dtype, c.lo, c.hi);
    std::string s = b.constant("s", scalar_f(0.037f));
    std::string z = c.dtype == "uint8" ? b.constant("z", tensor_of<uint8_t>({}, {131}))
                                       : b.constant("z", tensor_of<int8_t>({}, {-7}));
    std::string p = b.node("MaxPool", {b.node("DequantizeLinear", {x, s, z})},
                           {{"kernel_shape", c.kernel}, {"strides", c.strides}, {"pads", c.pads}});
    // Q's parameters are other initializers with the same values.
    std::string s2 = b.constant("s2", scalar_f(0.037f));
    std::string z2 = c.dtype == "uint8" ? b.constant("z2", tensor_of<uint8_t>({}, {131}))
                                        : b.constant("z2", tensor_of<int8_t>({}, {-7}));
    b.output(b.node("QuantizeLinear", {p, s2, z2}));
    Graph f = folded(b.graph(), b.inputs(), 1);
    EXPECT_EQ(count_op(f, "DequantizeLinear"), 0);
    EXPECT_EQ(count_op(f, "QuantizeLinear"), 0);
    ASSERT_EQ(count_op(f, "MaxPool"), 1);
    auto got = graph::run_graph(f, b.inputs()), want = graph::run_graph(b.graph(), b.inputs());
    EXPECT_EQ(got.begin()->second.type.dtype, c.dtype);
    EXPECT_EQ(got.begin()->second.data, want.begin()->second.data);
  }
}

TEST(FoldQdq, MaxPoolWithOtherOutputParametersStaysFloat) {
  for (float ys : {0.037f, 0.05f}) {
    GraphBuilder b(12);
    std::string x = b.input("x", {1, 3, 6, 6}, "uint8", 0, 255);
    std::string p =
        b.node("MaxPool",
               {b.node("DequantizeLinear", {x, b.constant("s", scalar_f(0.037f)),
                                            b.constant("z", tensor_of<uint8_t>({}, {3}))})},
               {{"kernel_shape", std::vector<int64_t>{2, 2}}});
    // Another scale, or the same scale and another zero point.
    uint8_t yz = ys == 0.05f ? 3 : 4;
    b.output(b.node("QuantizeLinear", {p, b.constant("ys", scalar_f(ys)),
                                       b.constant("yz", tensor_of<uint8_t>({}, {yz}))}));
    Graph f = folded(b.graph(), b.inputs(), 0);
    EXPECT_EQ(count_op(f, "DequantizeLinear"), 1);
  }
}

TEST(FoldQdq, MatMulAndGemmBecomeQLinearMatMul) {
  GraphBuilder b(9);
  std::string a = b.input("a", {2, 3, 40}, "uint8", 0, 255);
  std::string as = b.constant("as", scalar_f(0.03f));
  std::string az = b.constant("az", tensor_of<uint8_t>({}, {7}));
  std::string af = b.node("DequantizeLinear", {a, as, az});
  std::vector<float> bsv = {0.01f, 0.02f, 0.03f, 0.015f, 0.005f};
  std::string bq = b.constant("bq", random_tensor("int8", {40, 5}, b.rng(), -127, 127));
  std::string bf = b.node("DequantizeLinear",
                          {bq, b.constant("bs", tensor_of<float>({5}, bsv)),
                           b.constant("bz", tensor_of<int8_t>({5}, {0, 0, 0, 0, 0}))},
                          {{"axis", int64_t{1}}});
  std::string y = b.node("MatMul", {af, bf});
  b.output(b.node("QuantizeLinear", {y, b.constant("ys", scalar_f(0.4f)),
                                     b.constant("yz", tensor_of<uint8_t>({}, {128}))}));
  // Gemm (transB = 1, weight [N, K] per row) on a 2-D activation, no bias.
  std::string g_in = b.input("g", {3, 40}, "uint8", 0, 255);
  std::string gf = b.node("DequantizeLinear", {g_in, as, az});
  std::string wq = b.constant("wq", random_tensor("int8", {5, 40}, b.rng(), -127, 127));
  std::string wf = b.node("DequantizeLinear", {wq, b.constant("ws", tensor_of<float>({5}, bsv))},
                          {{"axis", int64_t{0}}});
  std::string gy = b.node("Gemm", {gf, wf}, {{"transB", int64_t{1}}});
  b.output(b.node("QuantizeLinear", {gy, b.constant("gys", scalar_f(0.5f)),
                                     b.constant("gyz", tensor_of<int8_t>({}, {-3}))}));
  Graph f = folded(b.graph(), b.inputs(), 2);
  EXPECT_EQ(count_op(f, "QLinearMatMul"), 2);
  EXPECT_EQ(f.nodes.size(), 2u);
  Graph e = expanded(f, b.inputs(), 1);
  EXPECT_EQ(count_op(e, "MatMul"), 2);
}

// A Gemm's float C folds as kiln's int32 bias of QLinearMatMul, quantized at
// a_scale * w_scale (within 1 unit of the float result: folded() checks it);
// a C that does not fit in int32 at that scale stays float.
TEST(FoldQdq, GemmWithFloatBiasFoldsWhenItFitsInt32) {
  for (float c_scale : {1.0f, 1e9f}) {
    SCOPED_TRACE("bias scale " + std::to_string(c_scale));
    GraphBuilder b(4);
    std::string a = b.input("a", {2, 8}, "uint8", 0, 255);
    std::string af = b.node("DequantizeLinear", {a, b.constant("as", scalar_f(0.1f))});
    std::string wf =
        b.node("DequantizeLinear", {b.constant("wq", random_tensor("int8", {8, 3}, b.rng(), -9, 9)),
                                    b.constant("ws", scalar_f(0.2f))});
    Initializer c = tensor_of<float>({3}, {0.37f * c_scale, -1.21f * c_scale, 0.05f * c_scale});
    std::string y = b.node("Gemm", {af, wf, b.constant("c", c)});
    b.output(b.node("QuantizeLinear", {y, b.constant("ys", scalar_f(0.3f))}));
    bool fits = c_scale == 1.0f;
    Graph f = folded(b.graph(), b.inputs(), fits ? 1 : 0);
    EXPECT_EQ(count_op(f, "Gemm"), fits ? 0 : 1);
    if (!fits) continue;
    ASSERT_EQ(count_op(f, "QLinearMatMul"), 1);
    for (const auto& n : f.nodes) {
      if (n.op_type != "QLinearMatMul") continue;
      ASSERT_EQ(n.inputs.size(), 9u);
      // round_half_even(c / (0.1 * 0.2)) in float32's step.
      float step = 0.1f * 0.2f;
      std::vector<int32_t> want;
      for (float v : c.as<float>()) want.push_back(static_cast<int32_t>(std::nearbyint(v / step)));
      EXPECT_EQ(f.initializers.at(n.inputs[8]).as<int32_t>(), want);
    }
    expanded(f, b.inputs(), 1);
  }
}

// Between two folded convolutions ORT's format leaves Q -> DQ on the
// activation; the pipeline keeps both convolutions integer (the int8
// template's QLinearConv), so the pair folds away, and the pipeline's graph
// keeps the unfolded outputs.
TEST(FoldQdq, PipelineChainsTwoConvsThroughQuantizeDequantize) {
  GraphBuilder b(31);
  std::string x = b.input("x", {1, 3, 6, 6}, "float32", -2, 2);
  std::string s0 = b.constant("s0", scalar_f(4.0f / 255.0f));
  std::string z0 = b.constant("z0", tensor_of<uint8_t>({}, {128}));
  std::string h = b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, s0, z0}), s0, z0});
  for (int layer = 0; layer < 2; ++layer) {
    std::string l = std::to_string(layer);
    std::string wq = b.constant("wq" + l, random_tensor("int8", {3, 3, 3, 3}, b.rng(), -127, 127));
    std::string ws = b.constant("ws" + l, tensor_of<float>({3}, {0.01f, 0.02f, 0.015f}));
    std::string wf = b.node("DequantizeLinear", {wq, ws}, {{"axis", int64_t{0}}});
    std::string y =
        b.node("Relu", {b.node("Conv", {h, wf}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})});
    std::string ys = b.constant("ys" + l, scalar_f(0.01f));
    std::string yz = b.constant("yz" + l, tensor_of<uint8_t>({}, {0}));
    h = b.node("DequantizeLinear", {b.node("QuantizeLinear", {y, ys, yz}), ys, yz});
  }
  b.output(h);
  Graph p = b.graph();
  graph::passes::run_default_passes(p);
  EXPECT_NO_THROW(graph::passes::verify_graph(p));
  // Both convolutions stay QLinearConv for the int8 template, the uint8
  // activation between them passes from one to the other, and only the float
  // boundaries keep a QuantizeLinear (the input) and a DequantizeLinear (the
  // output). expand_quantized_ops' float lowering of the same graph is above.
  EXPECT_EQ(count_op(p, "QLinearConv"), 2);
  EXPECT_EQ(count_op(p, "Conv"), 0);
  EXPECT_EQ(count_op(p, "Relu"), 0);  // folded into Q's saturation
  EXPECT_EQ(count_op(p, "QuantizeLinear"), 1);
  EXPECT_EQ(count_op(p, "DequantizeLinear"), 1);
  EXPECT_EQ(count_op(p, "kiln.QuantizeDequantize"), 0);
  // The float output is DQ of a quantized tensor: within one step of 0.01.
  std::vector<float> got = graph::run_graph(p, b.inputs()).at(h).as<float>();
  std::vector<float> want = graph::run_graph(b.graph(), b.inputs()).at(h).as<float>();
  size_t exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs(got[i] - want[i]), 0.01f * 1.001f) << i;
    exact += got[i] == want[i];
  }
  std::printf("pipeline: %zu of %zu exact\n", exact, got.size());
}

// DynamicQuantizeLinear -> MatMulInteger / ConvInteger, as ORT's dynamic
// quantizer writes them: the expansion is exact (same float operations; the
// integer sums stay below 2^24).
TEST(ExpandQuantized, DynamicQuantizeAndIntegerOpsAreExact) {
  GraphBuilder b(12);
  std::string x = b.input("x", {4, 30}, "float32", -3, 5);
  auto dq = b.node_n("DynamicQuantizeLinear", {x}, 3);
  std::string w = b.constant("w", random_tensor("int8", {30, 6}, b.rng(), -127, 127));
  std::string wz = b.constant("wz", tensor_of<int8_t>({6}, {0, 1, 2, 3, -4, -128}));
  b.output(b.node("MatMulInteger", {dq[0], w, dq[2], wz}));
  b.output(dq[1]);
  std::string img = b.input("img", {1, 3, 5, 5}, "float32", -1, 1);
  auto dqi = b.node_n("DynamicQuantizeLinear", {img}, 3);
  std::string k = b.constant("k", random_tensor("int8", {2, 3, 3, 3}, b.rng(), -127, 127));
  b.output(
      b.node("ConvInteger", {dqi[0], k, dqi[2]}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  graph::passes::verify_graph(b.graph());
  Graph e = expanded(b.graph(), b.inputs(), 0);
  EXPECT_EQ(count_op(e, "DynamicQuantizeLinear"), 0);
  EXPECT_EQ(count_op(e, "MatMulInteger"), 0);
  EXPECT_EQ(count_op(e, "ConvInteger"), 0);
  EXPECT_EQ(count_op(e, "Cast"), 2);
}

}  // namespace
}  // namespace kiln::test
