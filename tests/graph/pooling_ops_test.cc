// LpPool and MaxRoiPool: evaluate() against plain references written here
// from ONNX's operator text and reference (one loop per output, no shared
// code with src/graph/ops), compute() through the generic schedule and the
// JIT against them over shapes no vector width divides and attribute
// combinations, and LpPool's 1-D and 3-D forms through lift_1d_windows and
// lower_3d_windows (the interpreter before and after).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph/passes/lift_1d_windows.h"
#include "graph/passes/lower_3d_windows.h"
#include "graph_builder.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::expect_same;
using test::random_tensor;
using test::tensor_of;
using Shape = std::vector<int64_t>;

const float* floats(const Initializer& t) { return reinterpret_cast<const float*>(t.data.data()); }

// ---- LpPool -------------------------------------------------------------------------------

struct LpAttrs {
  Shape kernel, strides, pads;  // strides and pads may be empty: ONNX's defaults
  std::string auto_pad = "NOTSET";
  int64_t p = 2;
};

Node lp_node(const LpAttrs& a) {
  Node n = test::make_node("LpPool", 1);
  n.attrs["kernel_shape"] = a.kernel;
  if (!a.strides.empty()) n.attrs["strides"] = a.strides;
  if (!a.pads.empty()) n.attrs["pads"] = a.pads;
  if (a.auto_pad != "NOTSET") n.attrs["auto_pad"] = a.auto_pad;
  n.attrs["p"] = a.p;
  return n;
}

// ONNX's LpPool at any rank, in double: the output size and pads from the
// pooling rules (auto_pad SAME_*: ceil(in / stride) outputs, the odd padding
// pixel at the end for SAME_UPPER; VALID: no pads), then (sum of |x|^p over
// the window's taps inside X)^(1/p).
Initializer lp_reference(const Initializer& x, const LpAttrs& a) {
  const Shape& xs = x.type.shape;
  const size_t r = xs.size() - 2;
  Shape stride = a.strides.empty() ? Shape(r, 1) : a.strides;
  Shape begin(r, 0), out(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t in = xs[2 + d], k = a.kernel[d], s = stride[d];
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      out[d] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * s + k - in);
      begin[d] = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (a.auto_pad == "VALID") {
      out[d] = (in - k) / s + 1;
    } else {
      const int64_t pb = a.pads.empty() ? 0 : a.pads[d], pe = a.pads.empty() ? 0 : a.pads[r + d];
      begin[d] = pb;
      out[d] = (in + pb + pe - k) / s + 1;
    }
  }
  Shape ys = {xs[0], xs[1]};
  ys.insert(ys.end(), out.begin(), out.end());
  Initializer y = test::make_tensor("float32", ys);
  auto* yp = reinterpret_cast<float*>(y.data.data());
  const int64_t in_plane =
      graph::TensorType{"float32", Shape(xs.begin() + 2, xs.end())}.num_elements();
  const int64_t out_plane = graph::TensorType{"float32", out}.num_elements();
  for (int64_t plane = 0; plane < xs[0] * xs[1]; ++plane)
    for (int64_t o = 0; o < out_plane; ++o) {
      Shape oi(r), ki(r, 0);
      for (int64_t rest = o, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
        oi[d] = rest % out[d];
        rest /= out[d];
      }
      double sum = 0;
      while (true) {  // every tap of the window
        int64_t at = 0;
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
          const int64_t i = oi[d] * stride[d] - begin[d] + ki[d];
          inside = inside && i >= 0 && i < xs[2 + d];
          at = at * xs[2 + d] + i;
        }
        if (inside)
          sum += std::pow(std::fabs(double(floats(x)[plane * in_plane + at])), double(a.p));
        size_t d = r;
        while (d > 0 && ++ki[d - 1] == a.kernel[d - 1]) ki[--d] = 0;
        if (d == 0) break;
      }
      yp[plane * out_plane + o] = static_cast<float>(std::pow(sum, 1.0 / double(a.p)));
    }
  return y;
}

std::string describe(const Shape& x, const LpAttrs& a) {
  return "X " + graph::shape_str(x) + " kernel " + graph::shape_str(a.kernel) + " strides " +
         graph::shape_str(a.strides) + " pads " + graph::shape_str(a.pads) + " " + a.auto_pad +
         " p " + std::to_string(a.p);
}

// 2-D: evaluate and the kernel against the reference, p = 1 to 4 (4: the
// kernel's exp/log power), with explicit pads, every auto_pad, strides
// larger than the kernel, and the depth pool lower_3d_windows makes ([N, C,
// D, H * W] with a kernel of 1 along H * W).
TEST(LpPool, TwoDAgainstReferenceAndKernel) {
  std::mt19937_64 rng(71);
  struct Case {
    Shape x;
    LpAttrs a;
  };
  const Case cases[] = {
      {{1, 1, 5, 5}, {{2, 2}, {}, {}}},
      {{2, 3, 9, 13}, {{3, 2}, {2, 1}, {1, 0, 1, 1}}},
      {{1, 17, 7, 11}, {{3, 3}, {2, 2}, {}, "SAME_UPPER"}},
      {{2, 5, 8, 6}, {{2, 3}, {3, 2}, {}, "SAME_LOWER"}},
      {{1, 3, 10, 7}, {{4, 3}, {3, 2}, {}, "VALID"}},
      {{1, 2, 4, 4}, {{4, 4}, {1, 1}, {2, 2, 2, 2}}},
      {{2, 3, 6, 5}, {{1, 2}, {4, 3}, {0, 1, 0, 0}}},
      {{1, 3, 7, 54}, {{3, 1}, {2, 1}, {1, 0, 1, 0}}},
  };
  for (const Case& c : cases)
    for (int64_t p : {1, 2, 3, 4}) {
      LpAttrs a = c.a;
      a.p = p;
      const std::string what = describe(c.x, a);
      Initializer x = random_tensor("float32", c.x, rng, -2, 2);
      Node n = lp_node(a);
      Initializer want = lp_reference(x, a);
      expect_same(test::eval(n, {&x}).at(0), want, 1e-6, what + " evaluate");
      expect_same(test::run_compiled(n, {&x}).at(0), want, p > 3 ? 1e-5 : 2e-6, what + " kernel");
    }
}

// 1-D and 3-D: evaluate against the reference.
TEST(LpPool, OneAndThreeDEvaluate) {
  std::mt19937_64 rng(72);
  struct Case {
    Shape x;
    LpAttrs a;
  };
  const Case cases[] = {
      {{2, 3, 19}, {{3}, {2}, {1, 1}}},
      {{1, 4, 8}, {{4}, {3}, {}, "SAME_UPPER"}},
      {{1, 3, 7, 6, 9}, {{3, 2, 3}, {2, 2, 2}, {1, 0, 1, 1, 1, 1}}},
      {{2, 2, 5, 4, 6}, {{3, 3, 3}, {}, {}, "SAME_LOWER"}},
      {{1, 2, 6, 5, 7}, {{2, 3, 2}, {3, 1, 2}, {}, "VALID"}},
  };
  for (const Case& c : cases)
    for (int64_t p : {1, 2, 3}) {
      LpAttrs a = c.a;
      a.p = p;
      Initializer x = random_tensor("float32", c.x, rng, -2, 2);
      expect_same(test::eval(lp_node(a), {&x}).at(0), lp_reference(x, a), 1e-6, describe(c.x, a));
    }
}

int count_rank(const graph::Graph& g, const std::string& op, size_t rank) {
  int k = 0;
  for (const Node& n : g.nodes)
    k += n.op_type == op && g.type_of(n.inputs[0])->shape.size() == rank;
  return k;
}

// 1-D LpPool runs as a 2-D one on [N, C, 1, L].
TEST(LpPool, OneDIsLiftedTo2d) {
  test::GraphBuilder b(73);
  std::string x = b.input("x", {2, 3, 19});
  x = b.node("LpPool", {x},
             {{"kernel_shape", Shape{3}},
              {"strides", Shape{2}},
              {"pads", Shape{1, 1}},
              {"p", int64_t{3}}});
  b.output(b.node("LpPool", {x}, {{"kernel_shape", Shape{2}}, {"p", int64_t{1}}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lift_1d_windows(h), 2);
  });
  EXPECT_EQ(count_rank(g, "LpPool", 4), 2);
}

// 3-D LpPool: a depth pool and an H-W pool, both 2-D; ceil_mode and auto_pad
// keep their sizes.
TEST(LpPool, ThreeDIsTwo2dPools) {
  test::GraphBuilder b(74);
  std::string x = b.input("x", {1, 3, 7, 6, 9}, "float32", -2, 2);
  b.output(b.node("LpPool", {x},
                  {{"kernel_shape", Shape{3, 2, 3}},
                   {"strides", Shape{2, 2, 2}},
                   {"pads", Shape{1, 0, 1, 1, 1, 1}},
                   {"p", int64_t{2}}}));
  b.output(b.node("LpPool", {x},
                  {{"kernel_shape", Shape{3, 3, 3}},
                   {"auto_pad", std::string("SAME_UPPER")},
                   {"p", int64_t{3}}}));
  b.output(b.node("LpPool", {x},
                  {{"kernel_shape", Shape{2, 2, 2}},
                   {"strides", Shape{2, 2, 2}},
                   {"ceil_mode", int64_t{1}},
                   {"p", int64_t{1}}}));
  graph::Graph g = test::check_pass_preserves(b.graph(), b.inputs(), [](graph::Graph& h) {
    EXPECT_EQ(graph::passes::lower_3d_windows(h), 3);
  });
  EXPECT_EQ(count_rank(g, "LpPool", 5), 0);
  EXPECT_EQ(count_rank(g, "LpPool", 4), 6);
}

TEST(LpPool, BadInputNamesTheNode) {
  std::mt19937_64 rng(75);
  Initializer x = random_tensor("float32", {1, 2, 4, 4}, rng);
  LpAttrs a{{2, 2}, {}, {}};
  a.p = 0;
  for (const Node& n : {lp_node(a), test::make_node("LpPool", 1)}) {  // p 0; no kernel_shape
    try {
      test::eval(n, {&x});
      ADD_FAILURE() << "no error";
    } catch (const graph::OpError& e) {
      EXPECT_NE(std::string(e.what()).find("LpPool_test"), std::string::npos) << e.what();
    }
  }
  Initializer ints = random_tensor("int32", {1, 2, 4, 4}, rng, 0, 5);
  a.p = 2;
  EXPECT_THROW(test::eval(lp_node(a), {&ints}), graph::OpError);
}

// ---- MaxRoiPool ---------------------------------------------------------------------------

// ONNX's reference (op_max_roi_pool.py): corners scaled and rounded half
// away from zero, the box at least a pixel, bins from floor to ceil of
// p * size / pooled in float32, clamped to the map; an empty bin is 0.
Initializer roi_pool_reference(const Initializer& x, const Initializer& rois, int64_t ph_n,
                               int64_t pw_n, float scale) {
  const Shape& xs = x.type.shape;
  const int64_t n_rois = rois.type.shape[0], h = xs[2], w = xs[3];
  Initializer y = test::make_tensor("float32", {n_rois, xs[1], ph_n, pw_n});
  auto* yp = reinterpret_cast<float*>(y.data.data());
  auto clip = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
  for (int64_t r = 0; r < n_rois; ++r) {
    const float* roi = floats(rois) + r * 5;
    const auto b = static_cast<int64_t>(roi[0]);
    const auto x1 = static_cast<int64_t>(std::round(roi[1] * scale));
    const auto y1 = static_cast<int64_t>(std::round(roi[2] * scale));
    const auto x2 = static_cast<int64_t>(std::round(roi[3] * scale));
    const auto y2 = static_cast<int64_t>(std::round(roi[4] * scale));
    const float bin_h = static_cast<float>(std::max<int64_t>(y2 - y1 + 1, 1)) / float(ph_n);
    const float bin_w = static_cast<float>(std::max<int64_t>(x2 - x1 + 1, 1)) / float(pw_n);
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t ph = 0; ph < ph_n; ++ph)
        for (int64_t pw = 0; pw < pw_n; ++pw) {
          int64_t h0 = clip(static_cast<int64_t>(std::floor(float(ph) * bin_h)) + y1, h);
          int64_t h1 = clip(static_cast<int64_t>(std::ceil(float(ph + 1) * bin_h)) + y1, h);
          int64_t w0 = clip(static_cast<int64_t>(std::floor(float(pw) * bin_w)) + x1, w);
          int64_t w1 = clip(static_cast<int64_t>(std::ceil(float(pw + 1) * bin_w)) + x1, w);
          float m = -INFINITY;
          for (int64_t i = h0; i < h1; ++i)
            for (int64_t j = w0; j < w1; ++j)
              m = std::max(m, floats(x)[((b * xs[1] + c) * h + i) * w + j]);
          yp[((r * xs[1] + c) * ph_n + ph) * pw_n + pw] = h1 <= h0 || w1 <= w0 ? 0.0f : m;
        }
  }
  return y;
}

Node roi_pool_node(int64_t ph, int64_t pw, float scale) {
  Node n = test::make_node("MaxRoiPool", 2);
  n.attrs["pooled_shape"] = Shape{ph, pw};
  n.attrs["spatial_scale"] = scale;
  return n;
}

// Boxes (b, x1, y1, x2, y2) in image pixels (the map's size / scale): inside
// the image, across its borders, wholly outside it, inverted, tiny, and on
// half pixels (rounded away from zero, not to even).
Initializer random_rois(int64_t n, int64_t batch, double width, double height,
                        std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-0.3, 1.3);
  std::uniform_int_distribution<int64_t> image(0, batch - 1);
  std::vector<float> v;
  for (int64_t r = 0; r < n; ++r) {
    double a = u(rng) * width, b = u(rng) * height, c = u(rng) * width, d = u(rng) * height;
    if (r % 5 != 4) {  // mostly ordered; every fifth may be inverted
      if (a > c) std::swap(a, c);
      if (b > d) std::swap(b, d);
    }
    if (r % 7 == 3) c = a + 0.3, d = b + 0.2;                           // smaller than a pixel
    if (r % 6 == 2) a = std::round(a) + 0.5, d = -std::round(d) - 0.5;  // half pixels
    if (r % 9 == 5) a = -3 * width, c = -2 * width;                     // left of the image
    // A batch index as a float: int() truncates 1.7 to 1.
    const double bi = static_cast<double>(image(rng)) + (r % 4 == 1 ? 0.7 : 0.0);
    for (double e : {bi, a, b, c, d}) v.push_back(static_cast<float>(e));
  }
  return tensor_of<float>({n, 5}, v);
}

// MaxRoiPool compiled with its boxes as a graph constant (the kernel still
// reads them; the constant sizes the loops). want_status as run_compiled_as.
Initializer run_roi_pool_with_constant_rois(const Node& n, const Initializer& x,
                                            const Initializer& rois, const Shape& out) {
  graph::ComputeInputs in;
  ir::Tensor xt = ir::placeholder(test::shape_exprs(x.type.shape), ir::DataType::f32(), "x");
  ir::Tensor rt = ir::placeholder(test::shape_exprs(rois.type.shape), ir::DataType::f32(), "r");
  in.tensors = {xt, rt};
  in.constants = {nullptr, &rois};
  std::vector<ir::Tensor> outs = graph::get_op("MaxRoiPool").compute(n, in, {{"float32", out}});
  schedule::Schedule sch = ops::schedule_generic(outs, codegen::Target::host().float_lanes());
  ir::LoweredFunc f = schedule::lower(sch, {xt, rt, outs[0]}, "max_roi_pool");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  Initializer y = test::make_tensor("float32", out);
  std::vector<std::vector<uint8_t>> copies = {x.data, rois.data};
  std::vector<void*> ptrs;
  for (auto& c : copies) ptrs.push_back(c.data());
  ptrs.push_back(y.data.data());
  EXPECT_EQ(mod->get_function("max_roi_pool")(ptrs.data()), 0);
  return y;
}

// Evaluate, the kernel on boxes read at run time and the kernel on constant
// boxes, all against the reference (exactly: a maximum rounds nothing).
TEST(MaxRoiPool, AgainstReferenceAndKernel) {
  std::mt19937_64 rng(81);
  struct Case {
    Shape x;
    int64_t rois, ph, pw;
    float scale;
  };
  const Case cases[] = {{{1, 1, 10, 10}, 6, 2, 2, 1.0f},
                        {{2, 3, 9, 13}, 9, 3, 4, 0.5f},
                        {{3, 17, 6, 5}, 7, 7, 7, 0.25f},
                        {{1, 2, 1, 8}, 4, 1, 3, 1.0f},
                        {{2, 5, 14, 11}, 12, 1, 1, 0.0625f}};
  for (const Case& c : cases) {
    const std::string what = "X " + graph::shape_str(c.x) + " pooled " + std::to_string(c.ph) +
                             "x" + std::to_string(c.pw) + " scale " + std::to_string(c.scale);
    Initializer x = random_tensor("float32", c.x, rng);
    Initializer rois =
        random_rois(c.rois, c.x[0], double(c.x[3]) / c.scale, double(c.x[2]) / c.scale, rng);
    Node n = roi_pool_node(c.ph, c.pw, c.scale);
    Initializer want = roi_pool_reference(x, rois, c.ph, c.pw, c.scale);
    expect_same(test::eval(n, {&x, &rois}).at(0), want, 0, what + " evaluate");
    expect_same(test::run_compiled(n, {&x, &rois}).at(0), want, 0, what + " kernel");
    expect_same(run_roi_pool_with_constant_rois(n, x, rois, want.type.shape), want, 0,
                what + " kernel, constant boxes");
  }
}

// Rounding half away from zero, bins by floor and ceil, a box past the map.
TEST(MaxRoiPool, ByHand) {
  std::vector<float> v(4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 30;  // all negative
  Initializer x = tensor_of<float>({1, 1, 4, 6}, v);
  // x1 0.5 -> 1, y1 -0.5 -> -1, x2 4.5 -> 5, y2 1.5 -> 2: rows -1..2 (4), columns 1..5 (5);
  // 2 x 2 bins: rows [-1, 1) [1, 3) -> [0, 1) [1, 3), columns [1, 4) [3, 6).
  Initializer rois = tensor_of<float>({2, 5}, {0, 0.5f, -0.5f, 4.5f, 1.5f, 0, 7, 0, 9, 3});
  Node n = roi_pool_node(2, 2, 1.0f);
  const std::vector<float> want = {v[3], v[5], v[2 * 6 + 3], v[2 * 6 + 5], 0, 0, 0, 0};
  Initializer y = test::eval(n, {&x, &rois}).at(0);
  EXPECT_EQ(std::vector<float>(floats(y), floats(y) + 8), want);
  y = test::run_compiled(n, {&x, &rois}).at(0);
  EXPECT_EQ(std::vector<float>(floats(y), floats(y) + 8), want);
}

// A batch index outside [0, N) (int() of the float, no wrapping): evaluate
// and a constant box fail naming the node, a box read at run time stops the
// run as an index out of range.
TEST(MaxRoiPool, BadBatchIndex) {
  std::mt19937_64 rng(82);
  Initializer x = random_tensor("float32", {2, 3, 5, 5}, rng);
  Node n = roi_pool_node(2, 2, 1.0f);
  const std::vector<graph::TensorType> types = {{"float32", {1, 3, 2, 2}}};
  for (float b : {2.0f, -1.0f, 7.5f}) {
    SCOPED_TRACE(b);
    Initializer rois = tensor_of<float>({1, 5}, {b, 0, 0, 3, 3});
    try {
      test::eval(n, {&x, &rois});
      ADD_FAILURE() << "no error";
    } catch (const graph::OpError& e) {
      EXPECT_NE(std::string(e.what()).find("MaxRoiPool_test"), std::string::npos) << e.what();
    }
    test::run_compiled_as(n, {&x, &rois}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
    graph::ComputeInputs in;
    in.tensors = {ir::placeholder(test::shape_exprs({2, 3, 5, 5}), ir::DataType::f32(), "x"),
                  ir::placeholder(test::shape_exprs({1, 5}), ir::DataType::f32(), "r")};
    in.constants = {nullptr, &rois};
    EXPECT_THROW(graph::get_op("MaxRoiPool").compute(n, in, types), graph::OpError);
  }
  // -0.5 truncates to 0: in range, as in ONNX's reference.
  Initializer rois = tensor_of<float>({1, 5}, {-0.5f, 0, 0, 3, 3});
  expect_same(test::run_compiled(n, {&x, &rois}).at(0), roi_pool_reference(x, rois, 2, 2, 1.0f), 0);
  // A batch of one: every index but 0 fails.
  Initializer one = random_tensor("float32", {1, 3, 5, 5}, rng);
  Initializer bad = tensor_of<float>({1, 5}, {1, 0, 0, 3, 3});
  test::run_compiled_as(n, {&one, &bad}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
}

TEST(MaxRoiPool, BadAttributesNameTheNode) {
  std::mt19937_64 rng(83);
  Initializer x = random_tensor("float32", {1, 2, 4, 4}, rng);
  Initializer rois = tensor_of<float>({1, 5}, {0, 0, 0, 3, 3});
  Initializer four = tensor_of<float>({1, 4}, {0, 0, 3, 3});
  Node no_shape = test::make_node("MaxRoiPool", 2);
  Node zero = roi_pool_node(0, 2, 1.0f);
  Node negative_scale = roi_pool_node(2, 2, -1.0f);
  for (const Node* n : {&no_shape, &zero, &negative_scale})
    EXPECT_THROW(test::eval(*n, {&x, &rois}), graph::OpError);
  EXPECT_THROW(test::eval(roi_pool_node(2, 2, 1.0f), {&x, &four}), graph::OpError);
}

}  // namespace
}  // namespace kiln
