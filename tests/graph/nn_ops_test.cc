// Conv, ConvTranspose, Gemm and MatMul: every compute against its evaluate
// over sweeps of shapes and attributes (check_node), and every evaluate
// against an independent reference (ops::reference, hand-computed cases,
// algebraic identities).
#include <gtest/gtest.h>

#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"
#include "ops/reference.h"

namespace kiln {
namespace {

using graph::Attribute;
using graph::Initializer;
using graph::Node;
using test::check_node;
using test::random_tensor;
using test::tensor_of;

Node make_node(const std::string& op, int n_inputs, std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.op_type = op;
  n.name = op + "_under_test";
  for (int i = 0; i < n_inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  n.outputs = {"y"};
  n.attrs = std::move(attrs);
  return n;
}

std::vector<Initializer> evaluate(const Node& n, const std::vector<const Initializer*>& in) {
  return graph::get_op(n.op_type).evaluate(n, in);
}

std::vector<float> values(const Initializer& t) { return t.as<float>(); }

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

using Ints = std::vector<int64_t>;

// ---- Conv -------------------------------------------------------------------------

TEST(ConvOp, EvaluateMatchesReferenceConv2d) {
  std::mt19937_64 rng(1);
  struct Case {
    int64_t n, c, h, w, m, kh, kw, stride, pad, dil;
  };
  for (Case k : {Case{1, 3, 7, 9, 4, 3, 3, 1, 1, 1}, Case{2, 2, 8, 5, 3, 3, 2, 2, 0, 1},
                 Case{1, 4, 9, 9, 2, 3, 3, 3, 2, 2}, Case{1, 1, 5, 6, 1, 1, 1, 1, 0, 1},
                 Case{1, 5, 11, 7, 3, 5, 3, 2, 2, 1}}) {
    Initializer x = random_tensor("float32", {k.n, k.c, k.h, k.w}, rng);
    Initializer w = random_tensor("float32", {k.m, k.c, k.kh, k.kw}, rng);
    Node node = make_node("Conv", 2,
                          {{"strides", Ints{k.stride, k.stride}},
                           {"pads", Ints{k.pad, k.pad, k.pad, k.pad}},
                           {"dilations", Ints{k.dil, k.dil}}});
    auto got = evaluate(node, {&x, &w});
    ops::reference::Conv2DParams p{k.n, k.c, k.h, k.w, k.m, k.kh, k.kw};
    p.stride_h = p.stride_w = k.stride;
    p.pad_h = p.pad_w = k.pad;
    p.dilation_h = p.dilation_w = k.dil;
    ASSERT_EQ(got[0].type.shape, (Ints{k.n, k.m, p.out_height(), p.out_width()}));
    std::vector<float> want(got[0].type.num_elements());
    auto xv = values(x), wv = values(w);
    ops::reference::conv2d_nchw(xv.data(), wv.data(), want.data(), p);
    expect_close(values(got[0]), want, 1e-5, "conv " + std::to_string(k.h));
  }
}

// Asymmetric pads = the reference on an explicitly zero-padded input; groups =
// the reference per group; bias added per output channel.
TEST(ConvOp, EvaluateAsymmetricPadsGroupsAndBias) {
  std::mt19937_64 rng(2);
  int64_t n = 1, c = 4, h = 6, w = 7, m = 6, g = 2, kh = 3, kw = 2;
  Ints pads = {2, 0, 1, 3};  // top, left, bottom, right
  Initializer x = random_tensor("float32", {n, c, h, w}, rng);
  Initializer wt = random_tensor("float32", {m, c / g, kh, kw}, rng);
  Initializer b = random_tensor("float32", {m}, rng);
  Node node =
      make_node("Conv", 3, {{"pads", pads}, {"group", int64_t{g}}, {"strides", Ints{1, 2}}});
  auto got = evaluate(node, {&x, &wt, &b});

  int64_t hp = h + pads[0] + pads[2], wp = w + pads[1] + pads[3];
  std::vector<float> xv = values(x), wv = values(wt), bv = values(b);
  int64_t cg = c / g, mg = m / g;
  ops::reference::Conv2DParams p{n, cg, hp, wp, mg, kh, kw};
  p.stride_w = 2;
  ASSERT_EQ(got[0].type.shape, (Ints{n, m, p.out_height(), p.out_width()}));
  int64_t plane = p.out_height() * p.out_width();
  std::vector<float> want(got[0].type.num_elements());
  for (int64_t gi = 0; gi < g; ++gi) {
    std::vector<float> xg(cg * hp * wp, 0.0f), out(mg * plane);
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t xx = 0; xx < w; ++xx)
          xg[(ci * hp + y + pads[0]) * wp + xx + pads[1]] = xv[((gi * cg + ci) * h + y) * w + xx];
    ops::reference::conv2d_nchw(xg.data(), wv.data() + gi * mg * cg * kh * kw, out.data(), p);
    for (int64_t mi = 0; mi < mg; ++mi)
      for (int64_t j = 0; j < plane; ++j)
        want[(gi * mg + mi) * plane + j] = out[mi * plane + j] + bv[gi * mg + mi];
  }
  expect_close(values(got[0]), want, 1e-5, "grouped conv");
}

// auto_pad: output size ceil(in / stride) with the odd pixel at the end
// (SAME_UPPER) or the beginning (SAME_LOWER), i.e. the explicit-pads conv.
TEST(ConvOp, AutoPadEqualsExplicitPads) {
  std::mt19937_64 rng(3);
  Initializer x = random_tensor("float32", {1, 2, 7, 8}, rng);
  Initializer w = random_tensor("float32", {3, 2, 3, 4}, rng);
  Ints strides = {2, 3};
  // H: out 4, total pad (4-1)*2+3-7 = 2 -> 1/1. W: out 3, total (3-1)*3+4-8 = 2 -> 1/1.
  // With dilation 2 on W: extent 7, total (3-1)*3+7-8 = 5 -> upper 2/3, lower 3/2.
  struct Case {
    std::string mode;
    Ints dil, pads;
  };
  for (const Case& k :
       {Case{"SAME_UPPER", {1, 1}, {1, 1, 1, 1}}, Case{"SAME_UPPER", {1, 2}, {1, 2, 1, 3}},
        Case{"SAME_LOWER", {1, 2}, {1, 3, 1, 2}}, Case{"VALID", {1, 2}, {0, 0, 0, 0}}}) {
    Node autop =
        make_node("Conv", 2, {{"auto_pad", k.mode}, {"strides", strides}, {"dilations", k.dil}});
    Node expl =
        make_node("Conv", 2, {{"pads", k.pads}, {"strides", strides}, {"dilations", k.dil}});
    auto a = evaluate(autop, {&x, &w});
    auto e = evaluate(expl, {&x, &w});
    if (k.mode != "VALID") {
      EXPECT_EQ(a[0].type.shape, (Ints{1, 3, 4, 3})) << k.mode;
    }
    EXPECT_EQ(a[0].type, e[0].type) << k.mode;
    EXPECT_EQ(a[0].data, e[0].data) << k.mode;
  }
}

TEST(ConvOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(4);
  struct Case {
    Ints x;
    int64_t m, group;
    Ints k, strides, dil, pads;
    std::string auto_pad;
    bool bias;
  };
  std::vector<Case> cases = {
      {{1, 3, 9, 11}, 4, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, "", true},
      {{2, 4, 7, 6}, 6, 2, {3, 2}, {2, 1}, {1, 2}, {2, 0, 1, 3}, "", false},
      {{1, 6, 10, 9}, 6, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, "", true},  // depthwise
      {{1, 4, 13, 8}, 8, 4, {5, 3}, {3, 3}, {2, 1}, {0, 0, 0, 0}, "", false},
      {{1, 3, 7, 7}, 5, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, "", true},
      {{1, 2, 9, 10}, 3, 1, {3, 4}, {2, 3}, {1, 2}, {}, "SAME_UPPER", true},
      {{1, 2, 9, 10}, 3, 1, {3, 4}, {2, 3}, {2, 1}, {}, "SAME_LOWER", false},
      {{2, 4, 8, 9}, 4, 2, {3, 3}, {2, 2}, {1, 1}, {}, "VALID", true},
      {{1, 5, 6, 17}, 7, 1, {2, 3}, {1, 2}, {2, 2}, {3, 1, 0, 2}, "", true},
  };
  for (const Case& k : cases) {
    std::map<std::string, Attribute> attrs = {
        {"strides", k.strides}, {"dilations", k.dil}, {"group", k.group}, {"kernel_shape", k.k}};
    if (k.auto_pad.empty())
      attrs["pads"] = k.pads;
    else
      attrs["auto_pad"] = k.auto_pad;
    Node node = make_node("Conv", k.bias ? 3 : 2, attrs);
    Initializer x = random_tensor("float32", k.x, rng);
    Initializer w = random_tensor("float32", {k.m, k.x[1] / k.group, k.k[0], k.k[1]}, rng);
    Initializer b = random_tensor("float32", {k.m}, rng);
    SCOPED_TRACE("conv x " + graph::shape_str(k.x) + " group " + std::to_string(k.group) + " " +
                 k.auto_pad);
    if (k.bias)
      check_node(node, {&x, &w, &b});
    else
      check_node(node, {&x, &w});
  }
}

TEST(ConvOp, RejectsBadShapesWithNodeName) {
  std::mt19937_64 rng(5);
  Initializer x = random_tensor("float32", {1, 3, 5, 5}, rng);
  Initializer w = random_tensor("float32", {4, 2, 3, 3}, rng);  // 2 != 3 / group 1
  Node node = make_node("Conv", 2);
  try {
    evaluate(node, {&x, &w});
    FAIL() << "expected OpError";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("Conv_under_test"), std::string::npos) << e.what();
  }
  Initializer x1 = random_tensor("float32", {1, 3, 5}, rng);
  Initializer w1_2d = random_tensor("float32", {4, 3, 1, 3}, rng);
  EXPECT_THROW(evaluate(node, {&x1, &w1_2d}), graph::OpError);  // a 1-D input, a 2-D weight
  Initializer w2 = random_tensor("float32", {4, 3, 7, 7}, rng);
  EXPECT_THROW(evaluate(node, {&x, &w2}), graph::OpError);  // kernel larger than input
}

// A 1-D conv (and pool) evaluates as its 2-D form on [N, C, 1, L].
TEST(ConvOp, OneDimensionalAsTwoDimensional) {
  std::mt19937_64 rng(6);
  Initializer x = random_tensor("float32", {2, 4, 11}, rng);
  Initializer w = random_tensor("float32", {6, 2, 3}, rng);
  Node node = make_node("Conv", 2);
  node.attrs = {{"group", int64_t{2}},
                {"strides", std::vector<int64_t>{2}},
                {"pads", std::vector<int64_t>{1, 2}},
                {"dilations", std::vector<int64_t>{2}}};
  Node node_2d = make_node("Conv", 2);
  node_2d.attrs = {{"group", int64_t{2}},
                   {"strides", std::vector<int64_t>{1, 2}},
                   {"pads", std::vector<int64_t>{0, 1, 0, 2}},
                   {"dilations", std::vector<int64_t>{1, 2}}};
  Initializer x_2d = x, w_2d = w;
  x_2d.type.shape = {2, 4, 1, 11};
  w_2d.type.shape = {6, 2, 1, 3};
  Initializer y = evaluate(node, {&x, &w}).at(0);
  Initializer y_2d = evaluate(node_2d, {&x_2d, &w_2d}).at(0);
  EXPECT_EQ(y.type.shape, (std::vector<int64_t>{2, 6, 5}));
  EXPECT_EQ(y.data, y_2d.data);
}

// ---- ConvTranspose ---------------------------------------------------------------------

// ONNX's backend test cases (convtranspose, convtranspose_pads).
TEST(ConvTransposeOp, HandComputedCases) {
  Initializer x = tensor_of<float>({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Initializer w = tensor_of<float>({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  auto y = evaluate(make_node("ConvTranspose", 2), {&x, &w});
  ASSERT_EQ(y[0].type.shape, (Ints{1, 2, 5, 5}));
  std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  expect_close(values(y[0]), want, 0, "convtranspose");

  Node padded =
      make_node("ConvTranspose", 2, {{"strides", Ints{3, 2}}, {"pads", Ints{1, 2, 1, 2}}});
  y = evaluate(padded, {&x, &w});
  ASSERT_EQ(y[0].type.shape, (Ints{1, 2, 7, 3}));
  plane = {1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4, 9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
  want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  expect_close(values(y[0]), want, 0, "convtranspose_pads");
}

double dot(const Initializer& a, const Initializer& b) {
  auto av = values(a), bv = values(b);
  double s = 0;
  for (size_t i = 0; i < av.size(); ++i) s += static_cast<double>(av[i]) * bv[i];
  return s;
}

// ConvTranspose is the adjoint of Conv with the same weight tensor:
// <Conv(z), y> == <ConvTranspose(y), z>, output_padding restoring z's size.
TEST(ConvTransposeOp, IsTheAdjointOfConv) {
  std::mt19937_64 rng(6);
  struct Case {
    Ints z;
    int64_t m, group;
    Ints k, strides, dil, pads;
  };
  for (const Case& k : {Case{{1, 2, 7, 8}, 3, 1, {3, 3}, {2, 3}, {1, 1}, {1, 0, 2, 1}},
                        Case{{2, 4, 9, 6}, 6, 2, {3, 2}, {3, 1}, {2, 1}, {0, 1, 1, 0}},
                        Case{{1, 3, 6, 6}, 3, 3, {2, 2}, {2, 2}, {1, 2}, {1, 1, 1, 1}}}) {
    Initializer z = random_tensor("float32", k.z, rng);
    Initializer w = random_tensor("float32", {k.m, k.z[1] / k.group, k.k[0], k.k[1]}, rng);
    Node conv = make_node(
        "Conv", 2,
        {{"strides", k.strides}, {"dilations", k.dil}, {"pads", k.pads}, {"group", k.group}});
    Initializer cz = evaluate(conv, {&z, &w})[0];
    Ints out_pad(2);
    for (int d = 0; d < 2; ++d) {
      int64_t ext = (k.k[d] - 1) * k.dil[d] + 1;
      out_pad[d] = (k.z[2 + d] + k.pads[d] + k.pads[2 + d] - ext) % k.strides[d];
    }
    Initializer y = random_tensor("float32", cz.type.shape, rng);
    Node convt = make_node("ConvTranspose", 2,
                           {{"strides", k.strides},
                            {"dilations", k.dil},
                            {"pads", k.pads},
                            {"group", k.group},
                            {"output_padding", out_pad}});
    Initializer ty = evaluate(convt, {&y, &w})[0];
    ASSERT_EQ(ty.type.shape, z.type.shape);
    double lhs = dot(cz, y), rhs = dot(ty, z);
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
  }
}

// output_shape and SAME_* derive the pads: the result is a window of the
// unpadded transposed convolution.
TEST(ConvTransposeOp, OutputShapeAndAutoPadCropTheFullResult) {
  std::mt19937_64 rng(7);
  Initializer x = random_tensor("float32", {1, 2, 4, 5}, rng);
  Initializer w = random_tensor("float32", {2, 3, 3, 3}, rng);
  Ints strides = {2, 2};
  Initializer full = evaluate(make_node("ConvTranspose", 2, {{"strides", strides}}), {&x, &w})[0];
  ASSERT_EQ(full.type.shape, (Ints{1, 3, 9, 11}));
  auto crop = [&](int64_t top, int64_t left, int64_t oh, int64_t ow) {
    auto f = values(full);
    std::vector<float> out;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) out.push_back(f[(c * 9 + top + y) * 11 + left + xx]);
    return out;
  };
  // output_shape [8, 10]: total pads 1 and 1, the odd one at the beginning (NOTSET).
  Node os = make_node("ConvTranspose", 2, {{"strides", strides}, {"output_shape", Ints{8, 10}}});
  auto y = evaluate(os, {&x, &w})[0];
  ASSERT_EQ(y.type.shape, (Ints{1, 3, 8, 10}));
  expect_close(values(y), crop(1, 1, 8, 10), 0, "output_shape");
  // SAME_UPPER: out = in * stride = [8, 10]; the odd pad at the end.
  Node su = make_node("ConvTranspose", 2,
                      {{"strides", strides}, {"auto_pad", std::string("SAME_UPPER")}});
  y = evaluate(su, {&x, &w})[0];
  ASSERT_EQ(y.type.shape, (Ints{1, 3, 8, 10}));
  expect_close(values(y), crop(0, 0, 8, 10), 0, "SAME_UPPER");
  Node sl = make_node("ConvTranspose", 2,
                      {{"strides", strides}, {"auto_pad", std::string("SAME_LOWER")}});
  y = evaluate(sl, {&x, &w})[0];
  expect_close(values(y), crop(1, 1, 8, 10), 0, "SAME_LOWER");
  // Explicit asymmetric pads.
  Node ep = make_node("ConvTranspose", 2, {{"strides", strides}, {"pads", Ints{2, 0, 1, 3}}});
  y = evaluate(ep, {&x, &w})[0];
  ASSERT_EQ(y.type.shape, (Ints{1, 3, 6, 8}));
  expect_close(values(y), crop(2, 0, 6, 8), 0, "pads");
}

TEST(ConvTransposeOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(8);
  struct Case {
    Ints x;
    int64_t m, group;
    Ints k;
    std::map<std::string, Attribute> attrs;
    bool bias;
  };
  std::vector<Case> cases = {
      {{1, 2, 5, 4}, 3, 1, {3, 3}, {}, true},
      {{1, 4, 4, 5}, 6, 2, {3, 2}, {{"strides", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}}, false},
      {{2, 3, 3, 4},
       3,
       3,
       {2, 3},
       {{"strides", Ints{2, 2}}, {"dilations", Ints{2, 1}}, {"output_padding", Ints{1, 0}}},
       true},
      {{1, 2, 4, 4},
       2,
       1,
       {3, 3},
       {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}},
       true},
      {{1, 2, 4, 3}, 4, 2, {4, 3}, {{"strides", Ints{3, 2}}, {"output_shape", Ints{12, 6}}}, false},
  };
  for (const Case& k : cases) {
    auto attrs = k.attrs;
    attrs["group"] = k.group;
    Node node = make_node("ConvTranspose", k.bias ? 3 : 2, attrs);
    Initializer x = random_tensor("float32", k.x, rng);
    Initializer w = random_tensor("float32", {k.x[1], k.m / k.group, k.k[0], k.k[1]}, rng);
    Initializer b = random_tensor("float32", {k.m}, rng);
    SCOPED_TRACE("convtranspose x " + graph::shape_str(k.x));
    if (k.bias)
      check_node(node, {&x, &w, &b});
    else
      check_node(node, {&x, &w});
  }
}

// ---- Gemm -------------------------------------------------------------------------------

TEST(GemmOp, EvaluateMatchesReferenceDense) {
  std::mt19937_64 rng(9);
  for (Ints mnk : {Ints{1, 1, 1}, Ints{5, 7, 3}, Ints{17, 9, 33}}) {
    int64_t m = mnk[0], n = mnk[1], k = mnk[2];
    Initializer a = random_tensor("float32", {m, k}, rng);
    Initializer b = random_tensor("float32", {k, n}, rng);
    std::vector<float> want(m * n);
    auto av = values(a), bv = values(b);
    ops::reference::dense(av.data(), bv.data(), want.data(), m, n, k);
    expect_close(values(evaluate(make_node("Gemm", 2), {&a, &b})[0]), want, 1e-5, "gemm");
    // transA/transB of the transposed operands give the same product.
    std::vector<float> atv(m * k), btv(k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) atv[j * m + i] = av[i * k + j];
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) btv[j * k + i] = bv[i * n + j];
    Initializer at = tensor_of<float>({k, m}, atv), bt = tensor_of<float>({n, k}, btv);
    Node tt = make_node("Gemm", 2, {{"transA", int64_t{1}}, {"transB", int64_t{1}}});
    expect_close(values(evaluate(tt, {&at, &bt})[0]), want, 1e-5, "gemm transA transB");
  }
}

TEST(GemmOp, AlphaBetaAndBroadcastC) {
  Initializer a = tensor_of<float>({2, 2}, {1, 2, 3, 4});
  Initializer b = tensor_of<float>({2, 2}, {5, 6, 7, 8});  // a*b = [19 22; 43 50]
  Initializer c = tensor_of<float>({2, 1}, {1, -1});
  Node node = make_node("Gemm", 3, {{"alpha", 2.0f}, {"beta", 0.5f}});
  expect_close(values(evaluate(node, {&a, &b, &c})[0]), {38.5f, 44.5f, 85.5f, 99.5f}, 0, "gemm");
  Initializer cs = tensor_of<float>({}, {10});
  expect_close(values(evaluate(node, {&a, &b, &cs})[0]), {43, 49, 91, 105}, 0, "scalar C");
  Initializer bad = tensor_of<float>({3}, {1, 2, 3});
  EXPECT_THROW(evaluate(node, {&a, &b, &bad}), graph::OpError);
}

TEST(GemmOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(10);
  int64_t m = 7, n = 19, k = 13;
  std::vector<Ints> c_shapes = {{}, {n}, {1, n}, {m, 1}, {m, n}, {1}, {1, 1}};
  int idx = 0;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Initializer a = random_tensor("float32", ta ? Ints{k, m} : Ints{m, k}, rng);
      Initializer b = random_tensor("float32", tb ? Ints{n, k} : Ints{k, n}, rng);
      Node plain = make_node("Gemm", 2, {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}});
      SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb));
      check_node(plain, {&a, &b});
      // Two C shapes per transpose combination, plus alpha/beta.
      for (int j = 0; j < 2; ++j, ++idx) {
        const Ints& cs = c_shapes[idx % c_shapes.size()];
        Initializer c = random_tensor("float32", cs, rng);
        Node node = make_node(
            "Gemm", 3,
            {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}, {"alpha", 0.75f}, {"beta", -1.5f}});
        SCOPED_TRACE("C " + graph::shape_str(cs));
        check_node(node, {&a, &b, &c});
      }
    }
}

// ---- MatMul -----------------------------------------------------------------------------

TEST(MatMulOp, EvaluateHandCasesAndNumpyShapes) {
  Initializer v = tensor_of<float>({3}, {1, 2, 3});
  Initializer u = tensor_of<float>({3}, {4, 5, 6});
  auto y = evaluate(make_node("MatMul", 2), {&v, &u})[0];
  EXPECT_EQ(y.type.shape, Ints{});
  expect_close(values(y), {32}, 0, "dot");
  Initializer m = tensor_of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  y = evaluate(make_node("MatMul", 2), {&v, &m})[0];  // row vector times matrix
  EXPECT_EQ(y.type.shape, Ints{2});
  expect_close(values(y), {22, 28}, 0, "vec-mat");
  Initializer mt = tensor_of<float>({2, 3}, {1, 3, 5, 2, 4, 6});
  y = evaluate(make_node("MatMul", 2), {&mt, &v})[0];  // matrix times column vector
  EXPECT_EQ(y.type.shape, Ints{2});
  expect_close(values(y), {22, 28}, 0, "mat-vec");

  std::mt19937_64 rng(11);
  auto shape_of = [&](Ints a, Ints b) {
    Initializer x = random_tensor("float32", a, rng), z = random_tensor("float32", b, rng);
    return evaluate(make_node("MatMul", 2), {&x, &z})[0].type.shape;
  };
  EXPECT_EQ(shape_of({2, 1, 3, 4}, {5, 4, 6}), (Ints{2, 5, 3, 6}));
  EXPECT_EQ(shape_of({4}, {2, 4, 6}), (Ints{2, 6}));
  EXPECT_EQ(shape_of({2, 3, 4}, {4}), (Ints{2, 3}));
  Initializer x = random_tensor("float32", {2, 3, 4}, rng),
              z = random_tensor("float32", {3, 4, 5}, rng);
  EXPECT_THROW(evaluate(make_node("MatMul", 2), {&x, &z}), graph::OpError);
}

// Batched, broadcast MatMul = reference::dense on every (broadcast) slice.
TEST(MatMulOp, EvaluateBatchesMatchReferenceDense) {
  std::mt19937_64 rng(12);
  Initializer a = random_tensor("float32", {2, 1, 3, 5}, rng);
  Initializer b = random_tensor("float32", {3, 5, 4}, rng);
  auto y = evaluate(make_node("MatMul", 2), {&a, &b})[0];
  ASSERT_EQ(y.type.shape, (Ints{2, 3, 3, 4}));
  auto av = values(a), bv = values(b), yv = values(y);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      std::vector<float> want(12);
      ops::reference::dense(av.data() + i * 15, bv.data() + j * 20, want.data(), 3, 4, 5);
      std::vector<float> got(yv.begin() + (i * 3 + j) * 12, yv.begin() + (i * 3 + j + 1) * 12);
      expect_close(got, want, 1e-5, "batch slice");
    }
}

TEST(MatMulOp, CompiledMatchesEvaluate) {
  std::mt19937_64 rng(13);
  std::vector<std::pair<Ints, Ints>> cases = {
      {{7}, {7}},
      {{9}, {9, 5}},
      {{6, 9}, {9}},
      {{5, 17}, {17, 33}},
      {{3, 4, 6}, {6, 5}},
      {{6}, {2, 6, 3}},
      {{2, 1, 3, 5}, {3, 5, 4}},
      {{1, 4, 7}, {3, 7, 2}},
      {{2, 3, 4, 5}, {5}},
      {{2, 3, 1, 5}, {1, 3, 5, 18}},
  };
  for (auto& [sa, sb] : cases) {
    Initializer a = random_tensor("float32", sa, rng);
    Initializer b = random_tensor("float32", sb, rng);
    SCOPED_TRACE("matmul " + graph::shape_str(sa) + " x " + graph::shape_str(sb));
    check_node(make_node("MatMul", 2), {&a, &b});
  }
}

TEST(NnOps, RegisteredAsAnchors) {
  for (const char* op : {"Conv", "ConvTranspose", "Gemm", "MatMul"}) {
    const graph::OpDef* d = graph::find_op(op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->pattern, graph::OpPattern::kAnchor) << op;
    EXPECT_TRUE(d->evaluate && d->compute) << op;
  }
}

}  // namespace
}  // namespace kiln
