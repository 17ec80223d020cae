// Shape and injective operators: evaluate() against hand-computed values
// (Pad and Resize values from numpy.pad and torch interpolate), then compute()
// (through the JIT) against evaluate() over shape and attribute sweeps.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::check_node;
using test::eval;
using test::make_node;
using test::random_tensor;
using test::tensor_of;
using Shape = std::vector<int64_t>;

template <typename T>
std::vector<T> values(const Initializer& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

template <typename T>
Initializer iota(Shape shape, T start = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), start);
  return tensor_of<T>(std::move(shape), v);
}

Initializer ints(std::vector<int64_t> v) {
  return tensor_of<int64_t>({static_cast<int64_t>(v.size())}, v);
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// ---- Reshape family ---------------------------------------------------------------

TEST(ShapeEval, ReshapeZeroAndMinusOne) {
  Initializer x = iota<float>({2, 3, 4});
  Node r = make_node("Reshape", 2);
  Initializer s = ints({0, -1});
  auto out = eval(r, {&x, &s});
  EXPECT_EQ(out[0].type.shape, (Shape{2, 12}));
  EXPECT_EQ(out[0].data, x.data);
  s = ints({-1, 0, 2});
  EXPECT_EQ(eval(r, {&x, &s})[0].type.shape, (Shape{4, 3, 2}));
  s = ints({4, 0, 2});  // 0 copies the input's axis 1
  EXPECT_EQ(eval(r, {&x, &s})[0].type.shape, (Shape{4, 3, 2}));
  s = ints({-1, -1});
  EXPECT_THROW(eval(r, {&x, &s}), graph::OpError);
  s = ints({5, -1});
  EXPECT_THROW(eval(r, {&x, &s}), graph::OpError);
  // allowzero: 0 is a real zero-sized axis.
  Initializer e = iota<float>({0, 3});
  Node az = make_node("Reshape", 2);
  az.attrs["allowzero"] = int64_t{1};
  s = ints({3, 0});
  EXPECT_EQ(eval(az, {&e, &s})[0].type.shape, (Shape{3, 0}));
  s = ints({0, 3});
  EXPECT_EQ(eval(r, {&e, &s})[0].type.shape, (Shape{0, 3}));
  Initializer i64 = iota<int64_t>({6});
  s = ints({3, 2});
  auto o = eval(r, {&i64, &s});
  EXPECT_EQ(o[0].type, (graph::TensorType{"int64", {3, 2}}));
  EXPECT_EQ(values<int64_t>(o[0]), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(ShapeEval, FlattenSqueezeUnsqueeze) {
  Initializer x = iota<float>({2, 3, 4, 5});
  auto flat = [&](int64_t axis) {
    Node n = make_node("Flatten", 1);
    n.attrs["axis"] = axis;
    return eval(n, {&x})[0].type.shape;
  };
  EXPECT_EQ(flat(0), (Shape{1, 120}));
  EXPECT_EQ(flat(1), (Shape{2, 60}));
  EXPECT_EQ(flat(3), (Shape{24, 5}));
  EXPECT_EQ(flat(4), (Shape{120, 1}));
  EXPECT_EQ(flat(-1), (Shape{24, 5}));
  EXPECT_EQ(eval(make_node("Flatten", 1), {&x})[0].type.shape, (Shape{2, 60}));

  Initializer y = iota<float>({1, 3, 1, 2, 1});
  EXPECT_EQ(eval(make_node("Squeeze", 1), {&y})[0].type.shape, (Shape{3, 2}));
  Initializer ax = ints({0, -1});
  EXPECT_EQ(eval(make_node("Squeeze", 2), {&y, &ax})[0].type.shape, (Shape{3, 1, 2}));
  Node sq_attr = make_node("Squeeze", 1);
  sq_attr.attrs["axes"] = std::vector<int64_t>{2};
  EXPECT_EQ(eval(sq_attr, {&y})[0].type.shape, (Shape{1, 3, 2, 1}));
  Initializer none = ints({});
  EXPECT_EQ(eval(make_node("Squeeze", 2), {&y, &none})[0].type.shape, (Shape{3, 2}));
  Initializer bad = ints({1});
  EXPECT_THROW(eval(make_node("Squeeze", 2), {&y, &bad}), graph::OpError);

  Initializer z = iota<float>({3, 2});
  Initializer uax = ints({0, -1, 2});
  EXPECT_EQ(eval(make_node("Unsqueeze", 2), {&z, &uax})[0].type.shape, (Shape{1, 3, 1, 2, 1}));
  Node us_attr = make_node("Unsqueeze", 1);
  us_attr.attrs["axes"] = std::vector<int64_t>{1};
  EXPECT_EQ(eval(us_attr, {&z})[0].type.shape, (Shape{3, 1, 2}));
  Initializer s = tensor_of<int64_t>({}, {7});
  Initializer zero = ints({0});
  auto u = eval(make_node("Unsqueeze", 2), {&s, &zero});
  EXPECT_EQ(u[0].type, (graph::TensorType{"int64", {1}}));
  EXPECT_EQ(values<int64_t>(u[0]), (std::vector<int64_t>{7}));
}

TEST(ShapeEval, TransposeConcatSplit) {
  Initializer x = iota<float>({2, 3});
  auto t = eval(make_node("Transpose", 1), {&x});
  EXPECT_EQ(t[0].type.shape, (Shape{3, 2}));
  EXPECT_EQ(values<float>(t[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Initializer y = iota<float>({2, 3, 4});
  Node p = make_node("Transpose", 1);
  p.attrs["perm"] = std::vector<int64_t>{1, 2, 0};
  auto ty = eval(p, {&y});
  EXPECT_EQ(ty[0].type.shape, (Shape{3, 4, 2}));
  auto tv = values<float>(ty[0]);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(tv[(i * 4 + j) * 2 + k], k * 12 + i * 4 + j);

  Initializer a = iota<int64_t>({2, 2}), b = iota<int64_t>({2, 1}, 10);
  Node c = make_node("Concat", 2);
  c.attrs["axis"] = int64_t{-1};
  auto cc = eval(c, {&a, &b});
  EXPECT_EQ(cc[0].type.shape, (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>(cc[0]), (std::vector<int64_t>{0, 1, 10, 2, 3, 11}));
  c.attrs["axis"] = int64_t{0};
  EXPECT_THROW(eval(c, {&a, &b}), graph::OpError);
  Initializer s1 = ints({1, 3}), s2 = ints({}), s3 = ints({5});
  Node c3 = make_node("Concat", 3);
  c3.attrs["axis"] = int64_t{0};
  EXPECT_EQ(values<int64_t>(eval(c3, {&s1, &s2, &s3})[0]), (std::vector<int64_t>{1, 3, 5}));

  Initializer v = iota<float>({2, 7});
  Node sp = make_node("Split", 2, 3);
  sp.attrs["axis"] = int64_t{1};
  Initializer sizes = ints({2, 4, 1});
  auto parts = eval(sp, {&v, &sizes});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(values<float>(parts[0]), (std::vector<float>{0, 1, 7, 8}));
  EXPECT_EQ(values<float>(parts[1]), (std::vector<float>{2, 3, 4, 5, 9, 10, 11, 12}));
  EXPECT_EQ(values<float>(parts[2]), (std::vector<float>{6, 13}));
  Node sa = make_node("Split", 1, 2);
  sa.attrs["axis"] = int64_t{-1};
  sa.attrs["split"] = std::vector<int64_t>{5, 2};
  EXPECT_EQ(eval(sa, {&v})[1].type.shape, (Shape{2, 2}));
  Node sn = make_node("Split", 1, 3);
  sn.attrs["axis"] = int64_t{1};
  sn.attrs["num_outputs"] = int64_t{3};  // 7 -> 3, 3, 1
  auto pn = eval(sn, {&v});
  EXPECT_EQ(pn[0].type.shape, (Shape{2, 3}));
  EXPECT_EQ(pn[2].type.shape, (Shape{2, 1}));
  EXPECT_EQ(values<float>(pn[2]), (std::vector<float>{6, 13}));
  Node se = make_node("Split", 1, 2);  // equal split of axis 0
  auto pe = eval(se, {&v});
  EXPECT_EQ(values<float>(pe[1]), (std::vector<float>{7, 8, 9, 10, 11, 12, 13}));
  Node bad = make_node("Split", 1, 3);
  bad.attrs["axis"] = int64_t{1};
  EXPECT_THROW(eval(bad, {&v}), graph::OpError);
}

TEST(ShapeEval, SliceNegativeStepsAndClamping) {
  Initializer x = iota<int64_t>({10});
  auto slice = [&](std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> st) {
    Initializer a = ints(s), b = ints(e), ax = ints({0}), c = ints(st);
    return values<int64_t>(eval(make_node("Slice", 5), {&x, &a, &b, &ax, &c})[0]);
  };
  const int64_t kMax = std::numeric_limits<int64_t>::max(),
                kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(slice({-1}, {kMin}, {-2}), (std::vector<int64_t>{9, 7, 5, 3, 1}));
  EXPECT_EQ(slice({kMax}, {-11}, {-3}), (std::vector<int64_t>{9, 6, 3, 0}));
  EXPECT_EQ(slice({8}, {2}, {-1}), (std::vector<int64_t>{8, 7, 6, 5, 4, 3}));
  EXPECT_EQ(slice({2}, {kMax}, {3}), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(slice({-3}, {100}, {1}), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(slice({-100}, {2}, {1}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(slice({5}, {2}, {1}), (std::vector<int64_t>{}));
  EXPECT_EQ(slice({20}, {-20}, {-1}).size(), 10u);

  Initializer y = iota<float>({3, 4});
  Initializer s = ints({1, -1}), e = ints({kMax, 0}), ax = ints({1, 0}), st = ints({2, -1});
  auto o = eval(make_node("Slice", 5), {&y, &s, &e, &ax, &st});
  // rows 2, 1 (axis 0: -1 -> 2 down to 0 exclusive); cols 1, 3
  EXPECT_EQ(o[0].type.shape, (Shape{2, 2}));
  EXPECT_EQ(values<float>(o[0]), (std::vector<float>{9, 11, 5, 7}));
  Initializer s2 = ints({0}), e2 = ints({2});  // no axes/steps: leading axes, step 1
  EXPECT_EQ(eval(make_node("Slice", 3), {&y, &s2, &e2})[0].type.shape, (Shape{2, 4}));
}

TEST(ShapeEval, GatherExpandShapeConstantOfShape) {
  Initializer x = iota<float>({3, 4});
  Initializer idx = tensor_of<int64_t>({2}, {-1, 0});
  auto g0 = eval(make_node("Gather", 2), {&x, &idx});
  EXPECT_EQ(g0[0].type.shape, (Shape{2, 4}));
  EXPECT_EQ(values<float>(g0[0]), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  Node g1 = make_node("Gather", 2);
  g1.attrs["axis"] = int64_t{1};
  Initializer idx2 = tensor_of<int32_t>({2, 2}, {3, -4, 1, 1});
  auto g = eval(g1, {&x, &idx2});
  EXPECT_EQ(g[0].type.shape, (Shape{3, 2, 2}));
  EXPECT_EQ(values<float>(g[0]), (std::vector<float>{3, 0, 1, 1, 7, 4, 5, 5, 11, 8, 9, 9}));
  Initializer scalar = tensor_of<int64_t>({}, {-2});
  auto gs = eval(make_node("Gather", 2), {&x, &scalar});
  EXPECT_EQ(gs[0].type.shape, (Shape{4}));
  EXPECT_EQ(values<float>(gs[0]), (std::vector<float>{4, 5, 6, 7}));
  Initializer oob = tensor_of<int64_t>({1}, {3});
  EXPECT_THROW(eval(make_node("Gather", 2), {&x, &oob}), graph::OpError);
  Initializer shp = ints({2, 3, 4, 5});
  Initializer i1 = ints({1});
  EXPECT_EQ(values<int64_t>(eval(make_node("Gather", 2), {&shp, &i1})[0]),
            (std::vector<int64_t>{3}));

  Initializer col = tensor_of<float>({3, 1}, {1, 2, 3});
  Initializer es = ints({2, 1, 2});
  auto ex = eval(make_node("Expand", 2), {&col, &es});
  EXPECT_EQ(ex[0].type.shape, (Shape{2, 3, 2}));
  EXPECT_EQ(values<float>(ex[0]), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Initializer es2 = ints({1});  // shape of lower rank: bidirectional broadcast
  EXPECT_EQ(eval(make_node("Expand", 2), {&col, &es2})[0].type.shape, (Shape{3, 1}));

  // Shape reads only the type: the constant folder passes no data.
  Initializer typed;
  typed.type = {"float32", {2, 3, 5, 7}};
  auto sh = [&](std::optional<int64_t> s, std::optional<int64_t> e) {
    Node n = make_node("Shape", 1);
    if (s) n.attrs["start"] = *s;
    if (e) n.attrs["end"] = *e;
    auto o = eval(n, {&typed});
    EXPECT_EQ(o[0].type.dtype, "int64");
    return values<int64_t>(o[0]);
  };
  EXPECT_EQ(sh({}, {}), (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(sh(1, {}), (std::vector<int64_t>{3, 5, 7}));
  EXPECT_EQ(sh(-2, {}), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(sh(0, -1), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(sh(-10, 10), (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(sh(3, 1), (std::vector<int64_t>{}));

  Initializer cs = ints({2, 3});
  auto c0 = eval(make_node("ConstantOfShape", 1), {&cs});
  EXPECT_EQ(c0[0].type, (graph::TensorType{"float32", {2, 3}}));
  EXPECT_EQ(values<float>(c0[0]), std::vector<float>(6, 0));
  Node ci = make_node("ConstantOfShape", 1);
  ci.attrs["value"] = tensor_of<int64_t>({1}, {-4});
  auto c1 = eval(ci, {&cs});
  EXPECT_EQ(c1[0].type.dtype, "int64");
  EXPECT_EQ(values<int64_t>(c1[0]), std::vector<int64_t>(6, -4));
  Initializer empty = ints({});
  auto c2 = eval(ci, {&empty});
  EXPECT_EQ(c2[0].type.shape, Shape{});
  EXPECT_EQ(values<int64_t>(c2[0]), std::vector<int64_t>{-4});
}

TEST(ShapeEval, PadModes) {
  Initializer x = iota<float>({3, 4}, 1);
  Node pad = make_node("Pad", 2);
  pad.attrs["mode"] = std::string("reflect");
  Initializer pr = ints({2, 3, 1, 2});
  auto r = eval(pad, {&x, &pr});
  EXPECT_EQ(r[0].type.shape, (Shape{6, 9}));
  std::vector<float> reflect = {12, 11, 10, 9, 10, 11, 12, 11, 10, 8, 7, 6, 5, 6, 7, 8, 7, 6,
                                4,  3,  2,  1, 2,  3,  4,  3,  2,  8, 7, 6, 5, 6, 7, 8, 7, 6,
                                12, 11, 10, 9, 10, 11, 12, 11, 10, 8, 7, 6, 5, 6, 7, 8, 7, 6};
  EXPECT_EQ(values<float>(r[0]), reflect);  // numpy.pad(x, ((2, 1), (3, 2)), 'reflect')
  pad.attrs["mode"] = std::string("edge");
  Initializer pe = ints({0, 1, 2, 3});
  std::vector<float> edge = {1,  1,  2,  3,  4,  4,  4,  4,  5,  5,  6,  7, 8,  8,
                             8,  8,  9,  9,  10, 11, 12, 12, 12, 12, 9,  9, 10, 11,
                             12, 12, 12, 12, 9,  9,  10, 11, 12, 12, 12, 12};
  EXPECT_EQ(values<float>(eval(pad, {&x, &pe})[0]),
            edge);  // numpy.pad(x, ((0, 2), (1, 3)), 'edge')
  Node pc = make_node("Pad", 3);
  Initializer pcp = ints({1, -1, 0, -2});  // crop one column from each end... and two at the end
  Initializer v = tensor_of<float>({}, {-5});
  auto c = eval(pc, {&x, &pcp, &v});
  EXPECT_EQ(c[0].type.shape, (Shape{4, 1}));
  EXPECT_EQ(values<float>(c[0]), (std::vector<float>{-5, 2, 6, 10}));
  Initializer xi = iota<int64_t>({2});
  Initializer pi = ints({2, 1});
  EXPECT_EQ(values<int64_t>(eval(make_node("Pad", 2), {&xi, &pi})[0]),
            (std::vector<int64_t>{0, 0, 0, 1, 0}));
  Node p18 = make_node("Pad", 4);  // opset 18 axes
  Initializer pa = ints({1, 0}), axes = ints({-1});
  auto a = eval(p18, {&x, &pa, &v, &axes});
  EXPECT_EQ(a[0].type.shape, (Shape{3, 5}));
  EXPECT_EQ(values<float>(a[0])[5], -5);
  EXPECT_EQ(values<float>(a[0])[6], 5);
}

TEST(ShapeEval, ResizeKnownValues) {
  Initializer x = tensor_of<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  Initializer scales = tensor_of<float>({4}, {1, 1, 2, 2});
  Node lin = make_node("Resize", 3);
  lin.attrs["mode"] = std::string("linear");
  auto r = eval(lin, {&x, nullptr, &scales});
  EXPECT_EQ(r[0].type.shape, (Shape{1, 1, 4, 4}));
  expect_near(values<float>(r[0]),
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
  lin.attrs["coordinate_transformation_mode"] = std::string("align_corners");
  expect_near(values<float>(eval(lin, {&x, nullptr, &scales})[0]),
              {1, 4 / 3.f, 5 / 3.f, 2, 5 / 3.f, 2, 7 / 3.f, 8 / 3.f, 7 / 3.f, 8 / 3.f, 3, 10 / 3.f,
               3, 10 / 3.f, 11 / 3.f, 4});
  // ONNX's resize_downsample_scales_linear / _nearest.
  Initializer y = iota<float>({1, 1, 2, 4}, 1);
  Initializer down = tensor_of<float>({4}, {1, 1, 0.6f, 0.6f});
  Node l2 = make_node("Resize", 3);
  l2.attrs["mode"] = std::string("linear");
  expect_near(values<float>(eval(l2, {&y, nullptr, &down})[0]), {2.6666665f, 4.3333331f});
  EXPECT_EQ(values<float>(eval(make_node("Resize", 3), {&y, nullptr, &down})[0]),
            (std::vector<float>{1, 3}));
  // ONNX's resize_upsample_scales_nearest.
  Initializer up = tensor_of<float>({4}, {1, 1, 2, 3});
  EXPECT_EQ(
      values<float>(eval(make_node("Resize", 3), {&x, nullptr, &up})[0]),
      (std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));

  // torch.nn.functional.interpolate on a 3x5 ramp, sizes (4, 7) / (5, 8).
  Initializer t = iota<float>({1, 1, 3, 5}, 1);
  Initializer sizes = ints({1, 1, 4, 7});
  Node tl = make_node("Resize", 4);
  tl.attrs["mode"] = std::string("linear");
  expect_near(values<float>(eval(tl, {&t, nullptr, nullptr, &sizes})[0]),
              {1.0,   1.5714285, 2.2857144, 3.0,   3.7142859, 4.4285717, 5.0,
               4.125, 4.6964288, 5.4107141, 6.125, 6.8392859, 7.5535717, 8.125,
               7.875, 8.4464283, 9.1607141, 9.875, 10.589286, 11.303572, 11.875,
               11.0,  11.571428, 12.285714, 13.0,  13.714286, 14.428572, 15.0});
  tl.attrs["coordinate_transformation_mode"] = std::string("align_corners");
  expect_near(values<float>(eval(tl, {&t, nullptr, nullptr, &sizes})[0]),
              {1.0,       1.6666667, 2.3333335, 3.0,       3.6666667, 4.3333335, 5.0,
               4.3333335, 5.0,       5.6666665, 6.3333335, 7.0,       7.666667,  8.333334,
               7.666667,  8.333333,  9.0,       9.666667,  10.333334, 11.0,      11.666667,
               11.0,      11.666666, 12.333333, 13.0,      13.666666, 14.333333, 15.0});
  Node tn = make_node("Resize", 4);  // torch 'nearest' = asymmetric + floor
  tn.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  tn.attrs["nearest_mode"] = std::string("floor");
  Initializer sizes2 = ints({1, 1, 5, 8});
  EXPECT_EQ(
      values<float>(eval(tn, {&t, nullptr, nullptr, &sizes2})[0]),
      (std::vector<float>{1, 1, 2, 2,  3, 4, 4, 5, 1, 1, 2, 2,  3,  4,  4,  5,  6,  6,  7,  7,
                          8, 9, 9, 10, 6, 6, 7, 7, 8, 9, 9, 10, 11, 11, 12, 12, 13, 14, 14, 15}));
  // Nearest rounding modes on x = 0.5 / 1.5 (asymmetric, scale 2/3 -> coords 0, 1.5, 3).
  Initializer r4 = iota<float>({4});
  Initializer s23 = tensor_of<float>({1}, {0.75f});  // out 3, coords i / 0.75 = 0, 1.333, 2.667
  Node nm = make_node("Resize", 3);
  nm.attrs["coordinate_transformation_mode"] = std::string("asymmetric");
  EXPECT_EQ(values<float>(eval(nm, {&r4, nullptr, &s23})[0]), (std::vector<float>{0, 1, 3}));
  nm.attrs["nearest_mode"] = std::string("ceil");
  EXPECT_EQ(values<float>(eval(nm, {&r4, nullptr, &s23})[0]), (std::vector<float>{0, 2, 3}));
  Initializer half = tensor_of<float>({1}, {2.0f});  // coords 0, .5, 1, 1.5, ...
  nm.attrs["nearest_mode"] = std::string("round_prefer_floor");
  EXPECT_EQ(values<float>(eval(nm, {&r4, nullptr, &half})[0]),
            (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3}));
  nm.attrs["nearest_mode"] = std::string("round_prefer_ceil");
  EXPECT_EQ(values<float>(eval(nm, {&r4, nullptr, &half})[0]),
            (std::vector<float>{0, 1, 1, 2, 2, 3, 3, 3}));

  Node bad = make_node("Resize", 3);
  bad.attrs["coordinate_transformation_mode"] = std::string("tf_crop_and_resize");
  EXPECT_THROW(eval(bad, {&x, nullptr, &scales}), graph::OpError);
  Node cubic = make_node("Resize", 3);
  cubic.attrs["mode"] = std::string("cubic");
  EXPECT_THROW(eval(cubic, {&x, nullptr, &scales}), graph::OpError);
}

// ---- compute against evaluate -----------------------------------------------------

TEST(ShapeCompute, ReshapeLikeSweep) {
  std::mt19937_64 rng(11);
  Initializer x = random_tensor("float32", {2, 3, 20}, rng);
  for (auto s : std::vector<std::vector<int64_t>>{{0, -1}, {-1}, {5, 4, 6}, {3, 1, 40}, {120, 1}}) {
    Initializer shape = ints(s);
    check_node(make_node("Reshape", 2), {&x, &shape});
  }
  Initializer xi = random_tensor("int64", {4, 1, 5}, rng, -9, 9);
  Initializer si = ints({5, 4});
  check_node(make_node("Reshape", 2), {&xi, &si});
  for (int64_t axis : {0, 1, 2, 3, -2}) {
    Node f = make_node("Flatten", 1);
    f.attrs["axis"] = axis;
    check_node(f, {&x});
  }
  Initializer y = random_tensor("float32", {1, 7, 1, 17, 1}, rng);
  check_node(make_node("Squeeze", 1), {&y});
  Initializer ax = ints({0, 4});
  check_node(make_node("Squeeze", 2), {&y, &ax});
  Initializer b = random_tensor("bool", {7, 17}, rng);
  Initializer uax = ints({0, 2, -1});
  check_node(make_node("Unsqueeze", 2), {&b, &uax});
  Initializer s = random_tensor("float32", {}, rng);
  Initializer ax0 = ints({0});
  check_node(make_node("Unsqueeze", 2), {&s, &ax0});
  Initializer one = random_tensor("float32", {1, 1}, rng);
  check_node(make_node("Squeeze", 1), {&one});
}

// Reshapes whose axes split into several groups (compute_reshape maps each
// group on its own): a channel shuffle's split and merge, axes kept at either
// end, unit axes inside and around groups, a group whose both sides have
// several axes, and one group covering everything.
TEST(ShapeCompute, ReshapeByGroupsOfAxes) {
  std::mt19937_64 rng(12);
  struct Case {
    std::vector<int64_t> in, out;
  };
  for (const Case& c : std::vector<Case>{{{1, 48, 7, 5}, {1, 2, 24, 7, 5}},
                                         {{1, 24, 2, 7, 5}, {1, 48, 7, 5}},
                                         {{2, 6, 10}, {2, 3, 2, 10}},
                                         {{2, 6, 10}, {2, 6, 2, 5}},
                                         {{4, 6, 1, 3}, {1, 4, 3, 2, 3, 1}},
                                         {{6, 4}, {4, 6}},
                                         {{6, 4}, {2, 12}},
                                         {{3, 1, 4, 1}, {1, 3, 4}},
                                         {{2, 3, 4, 5}, {6, 20}},
                                         {{1, 1}, {1}}}) {
    SCOPED_TRACE(::testing::PrintToString(c.in) + " -> " + ::testing::PrintToString(c.out));
    Initializer x = random_tensor("float32", c.in, rng);
    Initializer shape = ints(c.out);
    check_node(make_node("Reshape", 2), {&x, &shape});
  }
}

TEST(ShapeCompute, TransposeConcatSplitSweep) {
  std::mt19937_64 rng(12);
  Initializer x = random_tensor("float32", {2, 3, 5, 17}, rng);
  for (auto perm : std::vector<std::vector<int64_t>>{{0, 1, 3, 2}, {3, 2, 1, 0}, {1, 3, 0, 2}}) {
    Node t = make_node("Transpose", 1);
    t.attrs["perm"] = perm;
    check_node(t, {&x});
  }
  check_node(make_node("Transpose", 1), {&x});
  Initializer v = random_tensor("float32", {33}, rng);
  check_node(make_node("Transpose", 1), {&v});

  for (int64_t axis : {0, 1, -1}) {
    Shape sa = {3, 4, 17}, sb = sa, sc = sa;
    int64_t a = axis < 0 ? axis + 3 : axis;
    sb[a] = 1;
    sc[a] = 6;
    Initializer p = random_tensor("float32", sa, rng), q = random_tensor("float32", sb, rng),
                r = random_tensor("float32", sc, rng);
    Node c = make_node("Concat", 3);
    c.attrs["axis"] = axis;
    check_node(c, {&p, &q, &r});
    Node c1 = make_node("Concat", 1);
    c1.attrs["axis"] = axis;
    check_node(c1, {&p});
  }
  Initializer i1 = random_tensor("int64", {2}, rng, 0, 9),
              i2 = random_tensor("int64", {3}, rng, -9, 9),
              i3 = random_tensor("int64", {1}, rng, 0, 9);
  Node ci = make_node("Concat", 3);
  ci.attrs["axis"] = int64_t{0};
  check_node(ci, {&i1, &i2, &i3});

  Initializer s = random_tensor("float32", {4, 21}, rng);
  Node sp = make_node("Split", 2, 3);
  sp.attrs["axis"] = int64_t{-1};
  Initializer sizes = ints({3, 17, 1});
  check_node(sp, {&s, &sizes});
  Node sn = make_node("Split", 1, 4);
  sn.attrs["axis"] = int64_t{1};
  sn.attrs["num_outputs"] = int64_t{4};
  check_node(sn, {&s});
  check_node(make_node("Split", 1, 2), {&s});
}

TEST(ShapeCompute, SliceGatherExpandSweep) {
  std::mt19937_64 rng(13);
  Initializer x = random_tensor("float32", {4, 9, 35}, rng);
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case {
    std::vector<int64_t> s, e, a, st;
  };
  for (const Case& c : std::vector<Case>{{{1}, {-1}, {1}, {1}},
                                         {{-1, 0}, {-kMax, kMax}, {2, 0}, {-3, 2}},
                                         {{0, 8, 3}, {4, -100, 30}, {0, 1, 2}, {1, -2, 5}},
                                         {{2}, {2}, {0}, {1}}}) {
    Initializer s = ints(c.s), e = ints(c.e), a = ints(c.a), st = ints(c.st);
    check_node(make_node("Slice", 5), {&x, &s, &e, &a, &st});
  }
  Initializer xi = random_tensor("int64", {6}, rng, 0, 99);
  Initializer s0 = ints({-3}), e0 = ints({kMax});
  check_node(make_node("Slice", 3), {&xi, &s0, &e0});

  // Embedding lookup: int64 ids read at run time, negative ids wrap.
  Initializer w = random_tensor("float32", {50, 33}, rng);
  Initializer ids = random_tensor("int64", {2, 7}, rng, -50, 49);
  check_node(make_node("Gather", 2), {&w, &ids});
  Initializer ids32 = random_tensor("int32", {5}, rng, -9, 8);
  Node g1 = make_node("Gather", 2);
  g1.attrs["axis"] = int64_t{-2};
  Initializer y = random_tensor("float32", {3, 9, 17}, rng);
  check_node(g1, {&y, &ids32});
  Initializer one = tensor_of<int64_t>({}, {-1});
  g1.attrs["axis"] = int64_t{2};
  check_node(g1, {&y, &one});
  Initializer shp = random_tensor("int64", {4}, rng, 1, 100);
  check_node(make_node("Gather", 2), {&shp, &one});

  Initializer col = random_tensor("float32", {3, 1}, rng);
  for (auto target : std::vector<std::vector<int64_t>>{{3, 19}, {2, 1, 1}, {2, 3, 17}, {1}}) {
    Initializer t = ints(target);
    check_node(make_node("Expand", 2), {&col, &t});
  }
  Initializer b = random_tensor("bool", {1, 5}, rng);
  Initializer tb = ints({4, 5});
  check_node(make_node("Expand", 2), {&b, &tb});
}

TEST(ShapeCompute, PadSweep) {
  std::mt19937_64 rng(14);
  Initializer x = random_tensor("float32", {2, 5, 19}, rng);
  Initializer v = tensor_of<float>({}, {0.75f});
  for (const char* mode : {"constant", "reflect", "edge"}) {
    for (auto pads : std::vector<std::vector<int64_t>>{
             {0, 1, 2, 0, 3, 4}, {0, 0, 0, 0, 0, 17}, {1, 4, 3, 1, 0, 18}, {0, -1, 2, 0, 1, -3}}) {
      Node p = make_node("Pad", 3);
      p.attrs["mode"] = std::string(mode);
      Initializer pd = ints(pads);
      SCOPED_TRACE(std::string(mode) + " " + graph::shape_str(pads));
      check_node(p, {&x, &pd, &v});
    }
  }
  Initializer xi = random_tensor("int64", {3, 4}, rng, -9, 9);
  Initializer pi = ints({1, 1, 2, 2}), vi = tensor_of<int64_t>({}, {-7});
  check_node(make_node("Pad", 3), {&xi, &pi, &vi});
  Initializer ax = ints({1}), pa = ints({2, 3});
  check_node(make_node("Pad", 4), {&x, &pa, nullptr, &ax});
}

TEST(ShapeCompute, ResizeSweep) {
  std::mt19937_64 rng(15);
  Initializer x = random_tensor("float32", {1, 3, 7, 10}, rng);
  for (const char* mode : {"nearest", "linear"}) {
    for (const char* ct : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
      for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
        if (std::string(mode) == "linear" && std::string(nm) != "floor") continue;
        Node r = make_node("Resize", 4);
        r.attrs["mode"] = std::string(mode);
        r.attrs["coordinate_transformation_mode"] = std::string(ct);
        r.attrs["nearest_mode"] = std::string(nm);
        Initializer scales = tensor_of<float>({4}, {1, 1, 2.5f, 0.5f});
        Initializer sizes = ints({1, 3, 17, 1});
        SCOPED_TRACE(std::string(mode) + " " + ct + " " + nm);
        check_node(r, {&x, nullptr, &scales, nullptr});
        Initializer empty = tensor_of<float>({0}, {});
        check_node(r, {&x, nullptr, &empty, &sizes});
      }
    }
  }
  // Linear over three axes and nearest on int64.
  Initializer v = random_tensor("float32", {2, 4, 5, 6}, rng);
  Node l = make_node("Resize", 3);
  l.attrs["mode"] = std::string("linear");
  Initializer s3 = tensor_of<float>({4}, {1, 1.5f, 2, 0.7f});
  check_node(l, {&v, nullptr, &s3});
  Initializer vi = random_tensor("int64", {1, 1, 3, 4}, rng, -9, 9);
  Initializer s2 = tensor_of<float>({4}, {1, 1, 2, 2});
  check_node(make_node("Resize", 3), {&vi, nullptr, &s2});
}

}  // namespace
// Range and ScatterND fold constants (evaluate only).
TEST(ShapeOps, RangeAndScatterND) {
  Initializer start = tensor_of<int64_t>({}, {1}), limit = tensor_of<int64_t>({}, {10}),
              delta = tensor_of<int64_t>({}, {3});
  EXPECT_EQ(eval(make_node("Range", 3), {&start, &limit, &delta})[0].as<int64_t>(),
            (std::vector<int64_t>{1, 4, 7}));
  Initializer fs = tensor_of<float>({}, {1}), fl = tensor_of<float>({}, {0}),
              fd = tensor_of<float>({}, {-0.25f});
  EXPECT_EQ(eval(make_node("Range", 3), {&fs, &fl, &fd})[0].as<float>(),
            (std::vector<float>{1, 0.75f, 0.5f, 0.25f}));
  Initializer empty_limit = tensor_of<int64_t>({}, {0});
  EXPECT_EQ(eval(make_node("Range", 3), {&start, &empty_limit, &delta})[0].type.shape,
            (std::vector<int64_t>{0}));
  // Rows 2 and 0 of a [3, 2] tensor replaced; a negative index counts from the end.
  Initializer data = tensor_of<float>({3, 2}, {1, 2, 3, 4, 5, 6});
  Initializer idx = tensor_of<int64_t>({2, 1}, {2, -3});
  Initializer upd = tensor_of<float>({2, 2}, {10, 20, 30, 40});
  EXPECT_EQ(eval(make_node("ScatterND", 3), {&data, &idx, &upd})[0].as<float>(),
            (std::vector<float>{30, 40, 3, 4, 10, 20}));
  Initializer points = tensor_of<int64_t>({2, 2}, {0, 1, 1, 0});
  Initializer vals = tensor_of<float>({2}, {-1, -2});
  EXPECT_EQ(eval(make_node("ScatterND", 3), {&data, &points, &vals})[0].as<float>(),
            (std::vector<float>{1, -1, -2, 4, 5, 6}));
  Initializer bad = tensor_of<int64_t>({1, 1}, {3});
  Initializer one_row = tensor_of<float>({1, 2}, {0, 0});
  EXPECT_THROW(eval(make_node("ScatterND", 3), {&data, &bad, &one_row}), graph::OpError);
}

TEST(ShapeOps, Tile) {
  Initializer x = tensor_of<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Initializer reps = tensor_of<int64_t>({2}, {2, 2});
  EXPECT_EQ(
      eval(make_node("Tile", 2), {&x, &reps})[0].as<float>(),
      (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  std::mt19937_64 rng(160);
  for (auto [shape, r] : {std::pair{Shape{3, 1, 5}, Shape{2, 4, 1}}, std::pair{Shape{7}, Shape{3}},
                          std::pair{Shape{2, 3, 2, 3}, Shape{1, 2, 3, 1}}}) {
    Initializer t = random_tensor("float32", shape, rng);
    Initializer rt = tensor_of<int64_t>({static_cast<int64_t>(r.size())}, r);
    check_node(make_node("Tile", 2), {&t, &rt});
  }
}

}  // namespace kiln
