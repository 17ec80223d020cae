// The quantized operators (graph/ops/quantize.cc): evaluate against values
// worked out by hand and against plain loops written here, QuantizeLinear /
// DequantizeLinear compiled through the generic schedule against evaluate
// (bit-exact), and bad input named by node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln::test {
namespace {

using graph::Initializer;
using graph::Node;

Node make_node(const std::string& op, size_t n_in,
               std::map<std::string, graph::Attribute> attrs = {}) {
  Node n;
  n.op_type = op;
  n.name = "n_" + op;
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"out"};
  n.attrs = std::move(attrs);
  return n;
}

std::vector<Initializer> eval(const Node& n, const std::vector<const Initializer*>& ins) {
  return graph::get_op(n.op_type).evaluate(n, ins);
}

template <typename T>
std::vector<T> values(const Initializer& t) {
  return t.as<T>();
}

Initializer scalar_f(float v) { return tensor_of<float>({}, {v}); }
Initializer scalar_u8(uint8_t v) { return tensor_of<uint8_t>({}, {v}); }
Initializer scalar_s8(int8_t v) { return tensor_of<int8_t>({}, {v}); }

// The error message of evaluating n, or "" when it does not throw.
std::string eval_error(const Node& n, const std::vector<const Initializer*>& ins) {
  try {
    eval(n, ins);
  } catch (const graph::OpError& e) {
    return e.what();
  }
  return "";
}

TEST(QuantizeOps, QuantizeRoundsHalfToEvenAndSaturates) {
  Node q = make_node("QuantizeLinear", 3);
  Initializer x = tensor_of<float>({8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.f, -7.f, 2.4999f});
  Initializer s = scalar_f(1.0f), z = scalar_u8(0);
  EXPECT_EQ(values<uint8_t>(eval(q, {&x, &s, &z})[0]),
            (std::vector<uint8_t>{0, 2, 2, 0, 0, 255, 0, 2}));
  // int8 with zero point -3: round(x / 0.5) - 3, saturated to [-128, 127].
  Initializer s2 = scalar_f(0.5f), z2 = scalar_s8(-3);
  EXPECT_EQ(values<int8_t>(eval(q, {&x, &s2, &z2})[0]),
            (std::vector<int8_t>{-2, 0, 2, -4, -6, 127, -17, 2}));
  // No zero point: uint8 with zero point 0.
  EXPECT_EQ(eval(q, {&x, &s})[0].type.dtype, "uint8");
}

TEST(QuantizeOps, PerAxisQuantizeAndDequantize) {
  // x [2, 3] quantized along axis 1 (opset 13), and along axis 0.
  Initializer x = tensor_of<float>({2, 3}, {1.f, 2.f, 3.f, -1.f, -2.f, -3.f});
  Initializer s = tensor_of<float>({3}, {1.f, 0.5f, 0.25f});
  Initializer z = tensor_of<int8_t>({3}, {0, 1, -1});
  Node q = make_node("QuantizeLinear", 3, {{"axis", int64_t{1}}});
  Initializer y = eval(q, {&x, &s, &z})[0];
  EXPECT_EQ(values<int8_t>(y), (std::vector<int8_t>{1, 5, 11, -1, -3, -13}));
  Node dq = make_node("DequantizeLinear", 3, {{"axis", int64_t{-1}}});
  Initializer back = eval(dq, {&y, &s, &z})[0];
  EXPECT_EQ(values<float>(back), (std::vector<float>{1.f, 2.f, 3.f, -1.f, -2.f, -3.f}));
  Initializer s0 = tensor_of<float>({2}, {1.f, 2.f});
  Initializer z0 = tensor_of<uint8_t>({2}, {10, 20});
  Node q0 = make_node("QuantizeLinear", 3, {{"axis", int64_t{0}}});
  EXPECT_EQ(values<uint8_t>(eval(q0, {&x, &s0, &z0})[0]),
            (std::vector<uint8_t>{11, 12, 13, 20, 19, 18}));
  // DequantizeLinear of int32 (a bias) with a per-axis scale and no zero point.
  Initializer b = tensor_of<int32_t>({3}, {100, -7, 3});
  Node dqb = make_node("DequantizeLinear", 2, {{"axis", int64_t{0}}});
  EXPECT_EQ(values<float>(eval(dqb, {&b, &s})[0]), (std::vector<float>{100.f, -3.5f, 0.75f}));
}

TEST(QuantizeOps, BadParametersNameTheNode) {
  Initializer x = tensor_of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Node q = make_node("QuantizeLinear", 3);
  Initializer s4 = tensor_of<float>({4}, {1, 1, 1, 1});
  std::string e = eval_error(q, {&x, &s4});
  EXPECT_NE(e.find("node 'n_QuantizeLinear' (QuantizeLinear)"), std::string::npos) << e;
  EXPECT_NE(e.find("y_scale has 4 values but axis 1"), std::string::npos) << e;
  Initializer s = scalar_f(1.f);
  Initializer z16 = make_tensor("int64", {});
  e = eval_error(q, {&x, &s, &z16});
  EXPECT_NE(e.find("y_zero_point has dtype int64"), std::string::npos) << e;
  e = eval_error(q, {&x, nullptr});
  EXPECT_NE(e.find("y_scale) is missing"), std::string::npos) << e;
  Initializer s2d = make_tensor("float32", {1, 3});
  e = eval_error(q, {&x, &s2d});
  EXPECT_NE(e.find("must be a scalar or a 1-D tensor"), std::string::npos) << e;
  Node dq = make_node("DequantizeLinear", 3);
  Initializer xf = make_tensor("float32", {3});
  e = eval_error(dq, {&xf, &s});
  EXPECT_NE(e.find("x has dtype float32"), std::string::npos) << e;
  Initializer xi = make_tensor("int32", {3});
  Initializer zi = tensor_of<int32_t>({}, {4});
  e = eval_error(dq, {&xi, &s, &zi});
  EXPECT_NE(e.find("zero point 0"), std::string::npos) << e;
}

TEST(QuantizeOps, DynamicQuantizeLinearMatchesOnnxExample) {
  // ONNX's DynamicQuantizeLinear example: x = [0, 2, -3, -2.5, 1.34, 0.5].
  Node n = make_node("DynamicQuantizeLinear", 1);
  n.outputs = {"y", "s", "z"};
  Initializer x = tensor_of<float>({6}, {0.f, 2.f, -3.f, -2.5f, 1.34f, 0.5f});
  auto r = eval(n, {&x});
  EXPECT_FLOAT_EQ(values<float>(r[1])[0], 5.0f / 255.0f);
  EXPECT_EQ(values<uint8_t>(r[2])[0], 153);
  EXPECT_EQ(values<uint8_t>(r[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  Initializer zeros = make_tensor("float32", {3});
  auto rz = eval(n, {&zeros});
  EXPECT_EQ(values<float>(rz[1])[0], 1.0f);
  EXPECT_EQ(values<uint8_t>(rz[0]), (std::vector<uint8_t>{0, 0, 0}));
}

// Plain int32 matmul (a - za) (b - zb) over [M, K] x [K, N].
std::vector<int32_t> plain_matmul(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                  int m, int k, int n, int za, const std::vector<int>& zb) {
  std::vector<int32_t> y(static_cast<size_t>(m * n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int kk = 0; kk < k; ++kk) y[i * n + j] += (a[i * k + kk] - za) * (b[kk * n + j] - zb[j]);
  return y;
}

template <typename T>
std::vector<int32_t> ints_of(const Initializer& t) {
  std::vector<int32_t> v;
  for (T x : t.as<T>()) v.push_back(x);
  return v;
}

TEST(QuantizeOps, MatMulIntegerAndQLinearMatMulAreExact) {
  std::mt19937_64 rng(3);
  const int m = 5, k = 300, n = 7;  // large K: sums past 2^16, exact in int32
  Initializer a = random_tensor("uint8", {m, k}, rng, 0, 255);
  Initializer b = random_tensor("int8", {k, n}, rng, -128, 127);
  Initializer za = scalar_u8(131);
  Initializer zb = tensor_of<int8_t>({n}, {0, 1, -2, 3, -4, 5, 127});
  Node mi = make_node("MatMulInteger", 4);
  Initializer y = eval(mi, {&a, &b, &za, &zb})[0];
  std::vector<int32_t> want = plain_matmul(ints_of<uint8_t>(a), ints_of<int8_t>(b), m, k, n, 131,
                                           {0, 1, -2, 3, -4, 5, 127});
  EXPECT_EQ(y.type, (graph::TensorType{"int32", {m, n}}));
  EXPECT_EQ(values<int32_t>(y), want);

  // QLinearMatMul: per-column b scales, requantized as ONNX Runtime does.
  Initializer as = scalar_f(0.02f), ys = scalar_f(3.0f), yz = scalar_u8(128);
  Initializer bs = tensor_of<float>({n}, {0.01f, 0.02f, 0.03f, 0.005f, 0.011f, 0.013f, 0.007f});
  Node ql = make_node("QLinearMatMul", 8);
  Initializer q = eval(ql, {&a, &as, &za, &b, &bs, &zb, &ys, &yz})[0];
  std::vector<uint8_t> got = values<uint8_t>(q);
  std::vector<float> bsv = values<float>(bs);
  for (int i = 0; i < m * n; ++i) {
    float mult = 0.02f * bsv[i % n] / 3.0f;
    float v = std::nearbyint(static_cast<float>(want[i]) * mult) + 128.0f;
    EXPECT_EQ(got[i], static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f))) << i;
  }
}

TEST(QuantizeOps, ConvIntegerAndQLinearConvAreExact) {
  std::mt19937_64 rng(5);
  // x [1, 4, 6, 5], w [6, 2, 3, 3], group 2, stride 2, pads 1: every window rule at once.
  Initializer x = random_tensor("uint8", {1, 4, 6, 5}, rng, 0, 255);
  Initializer w = random_tensor("int8", {6, 2, 3, 3}, rng, -128, 127);
  Initializer xz = scalar_u8(100);
  Initializer wz = tensor_of<int8_t>({6}, {0, 1, 2, -1, -2, 0});
  std::map<std::string, graph::Attribute> attrs = {{"group", int64_t{2}},
                                                   {"strides", std::vector<int64_t>{2, 2}},
                                                   {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  Node ci = make_node("ConvInteger", 4, attrs);
  Initializer acc = eval(ci, {&x, &w, &xz, &wz})[0];
  ASSERT_EQ(acc.type, (graph::TensorType{"int32", {1, 6, 3, 3}}));
  // The same through float32 Conv on (x - zx) and (w - zw): exact here (|sums| < 2^24).
  std::vector<float> xf, wf;
  for (uint8_t v : x.as<uint8_t>()) xf.push_back(static_cast<float>(v) - 100.0f);
  std::vector<int8_t> wv = w.as<int8_t>();
  std::vector<int> wzv = {0, 1, 2, -1, -2, 0};
  for (size_t i = 0; i < wv.size(); ++i) wf.push_back(static_cast<float>(wv[i] - wzv[i / 18]));
  Initializer xf_t = tensor_of<float>({1, 4, 6, 5}, xf), wf_t = tensor_of<float>({6, 2, 3, 3}, wf);
  Node conv = make_node("Conv", 2, attrs);
  std::vector<float> ref = values<float>(eval(conv, {&xf_t, &wf_t})[0]);
  std::vector<int32_t> got = values<int32_t>(acc);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(got[i], static_cast<int32_t>(ref[i])) << i;

  // QLinearConv with an int32 bias and per-channel weight scales.
  Initializer xs = scalar_f(0.05f), ys = scalar_f(0.7f), yz = scalar_s8(-5);
  Initializer ws = tensor_of<float>({6}, {0.01f, 0.02f, 0.015f, 0.03f, 0.004f, 0.02f});
  Initializer b = tensor_of<int32_t>({6}, {1000, -2000, 0, 7, -70000, 123});
  Node ql = make_node("QLinearConv", 9, attrs);
  Initializer y = eval(ql, {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &b})[0];
  ASSERT_EQ(y.type, (graph::TensorType{"int8", {1, 6, 3, 3}}));
  std::vector<int8_t> yv = values<int8_t>(y);
  std::vector<float> wsv = values<float>(ws);
  std::vector<int32_t> bv = values<int32_t>(b);
  for (size_t i = 0; i < got.size(); ++i) {
    size_t c = i / 9;
    float mult = 0.05f * wsv[c] / 0.7f;
    float v = std::nearbyint(static_cast<float>(got[i] + bv[c]) * mult) - 5.0f;
    EXPECT_EQ(yv[i], static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f))) << i;
  }
  // A weight scale of the wrong length names the node and the input.
  Initializer ws_bad = tensor_of<float>({4}, {1, 1, 1, 1});
  Initializer wz_bad = tensor_of<int8_t>({4}, {0, 0, 0, 0});
  std::string e = eval_error(ql, {&x, &xs, &xz, &w, &ws_bad, &wz_bad, &ys, &yz, &b});
  EXPECT_NE(e.find("node 'n_QLinearConv' (QLinearConv): w_scale has 4 values but axis 0"),
            std::string::npos)
      << e;
}

// The kernels: QuantizeLinear / DequantizeLinear compiled through the generic
// schedule give exactly evaluate's bytes, halves and saturation included.
TEST(QuantizeOps, CompiledQuantizeAndDequantizeMatchEvaluate) {
  std::mt19937_64 rng(11);
  Initializer x = random_tensor("float32", {2, 3, 5, 7}, rng, -4, 4);
  // Exact halves of the scale 0.25 (x / 0.25 = k + 0.5) and far out-of-range values.
  auto* xp = reinterpret_cast<float*>(x.data.data());
  for (int i = 0; i < 40; ++i) xp[i] = (static_cast<float>(i) - 20.5f) * 0.25f;
  xp[50] = 1e9f;
  xp[51] = -1e9f;
  // Just below and above halves (where v + 0.5 is inexact: floor(v + 0.5)
  // rounds 0.50000006 to 0), signed zeros, tiny values and the range's ends,
  // in units of the scale.
  const float edge[] = {0.49999997f, -0.49999997f, 0.50000006f, -0.50000006f, 1.4999999f,
                        -1.4999999f, 0.0f,         -0.0f,       1e-30f,       -1e-30f,
                        254.5f,      255.5f,       -127.5f,     -128.5f};
  for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); ++i) xp[60 + i] = edge[i] * 0.25f;
  Initializer s = scalar_f(0.25f);
  Initializer su = scalar_u8(3), ss = scalar_s8(-7);
  check_node(make_node("QuantizeLinear", 3), {&x, &s, &su});
  check_node(make_node("QuantizeLinear", 3), {&x, &s, &ss});
  check_node(make_node("QuantizeLinear", 2), {&x, &s});
  Initializer sc = tensor_of<float>({3}, {0.25f, 0.5f, 0.125f});
  Initializer zc = tensor_of<int8_t>({3}, {0, -1, 4});
  Node q_axis = make_node("QuantizeLinear", 3, {{"axis", int64_t{1}}});
  check_node(q_axis, {&x, &sc, &zc});
  Initializer xq = eval(q_axis, {&x, &sc, &zc})[0];
  check_node(make_node("DequantizeLinear", 3, {{"axis", int64_t{1}}}), {&xq, &sc, &zc}, 0.0);
  Initializer xu = random_tensor("uint8", {4, 9}, rng, 0, 255);
  check_node(make_node("DequantizeLinear", 3), {&xu, &s, &su}, 0.0);
  Initializer xi = random_tensor("int32", {4, 9}, rng, -100000, 100000);
  check_node(make_node("DequantizeLinear", 2), {&xi, &s}, 0.0);
}

// kiln.QuantizeDequantize is exactly DequantizeLinear(QuantizeLinear(x)), on
// the host and compiled, u8 and s8 ranges, halves and saturation included.
TEST(QuantizeOps, QuantizeDequantizeIsExactlyDqOfQ) {
  std::mt19937_64 rng(17);
  Initializer x = random_tensor("float32", {3, 4, 6, 5}, rng, -30, 30);
  auto* xp = reinterpret_cast<float*>(x.data.data());
  for (int i = 0; i < 40; ++i) xp[i] = (static_cast<float>(i) - 20.5f) * 0.125f;
  Initializer s = scalar_f(0.125f);
  for (bool s8 : {false, true}) {
    Initializer z = s8 ? scalar_s8(-9) : scalar_u8(77);
    Initializer zf = tensor_of<float>({}, {s8 ? -9.0f : 77.0f});
    Initializer q = eval(make_node("QuantizeLinear", 3), {&x, &s, &z})[0];
    Initializer want = eval(make_node("DequantizeLinear", 3), {&q, &s, &z})[0];
    Node fq = make_node("kiln.QuantizeDequantize", 3,
                        {{"qmin", int64_t{s8 ? -128 : 0}}, {"qmax", int64_t{s8 ? 127 : 255}}});
    EXPECT_EQ(eval(fq, {&x, &s, &zf})[0].data, want.data);
    check_node(fq, {&x, &s, &zf}, 0.0);
  }
}

}  // namespace
}  // namespace kiln::test
