// GridSample, RoiAlign, MaxUnpool and MaxPool's Indices output: evaluate()
// against plain references written here from ONNX's operator text (double
// precision, one loop per output, no shared code with src/graph/ops), and
// compute() through the generic schedule and the JIT against evaluate() over
// shapes (sizes no vector width divides) and every attribute combination.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::check_node;
using test::expect_same;
using test::random_tensor;
using test::tensor_of;
using Shape = std::vector<int64_t>;

Node node_of(const std::string& op, size_t n_in, size_t n_out = 1) {
  return test::make_node(op, n_in, n_out);
}

const float* floats(const Initializer& t) { return reinterpret_cast<const float*>(t.data.data()); }
const int64_t* ints(const Initializer& t) {
  return reinterpret_cast<const int64_t*>(t.data.data());
}

Initializer float_tensor(Shape shape, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return tensor_of<float>(std::move(shape), f);
}

// ---- GridSample ---------------------------------------------------------------------------

// ONNX's reference (onnx/reference/ops/op_grid_sample.py) as it reads, in double.
struct GridRef {
  std::string mode, padding;
  bool align;

  double denormalize(double n, int64_t len) const {
    return align ? (n + 1) / 2.0 * static_cast<double>(len - 1)
                 : ((n + 1) * static_cast<double>(len) - 1) / 2.0;
  }
  static double reflect(double x, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0) return lo;
    if (x < lo) {
      double dx = lo - x;
      int64_t n = static_cast<int64_t>(dx / range);
      double r = dx - static_cast<double>(n) * range;
      return n % 2 == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
      double dx = x - hi;
      int64_t n = static_cast<int64_t>(dx / range);
      double r = dx - static_cast<double>(n) * range;
      return n % 2 == 0 ? hi - r : lo + r;
    }
    return x;
  }
  double pixel(const float* img, int64_t h, int64_t w, int64_t r, int64_t c) const {
    const double lo_x = align ? 0 : -0.5, hi_x = align ? static_cast<double>(w - 1) : w - 0.5;
    const double lo_y = align ? 0 : -0.5, hi_y = align ? static_cast<double>(h - 1) : h - 0.5;
    if (padding == "zeros") {
      if (c < 0 || c >= w || r < 0 || r >= h) return 0;
    } else if (padding == "border") {
      c = std::clamp<int64_t>(c, 0, w - 1);
      r = std::clamp<int64_t>(r, 0, h - 1);
    } else {
      c = static_cast<int64_t>(reflect(static_cast<double>(c), lo_x, hi_x));
      r = static_cast<int64_t>(reflect(static_cast<double>(r), lo_y, hi_y));
    }
    return img[r * w + c];
  }
  static void cubic(double x, double* c) {
    const double a = -0.75;
    x = std::fabs(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
  }
  double sample(const float* img, int64_t h, int64_t w, double gx, double gy) const {
    double x = denormalize(gx, w), y = denormalize(gy, h);
    if (mode == "nearest") {
      x = std::nearbyint(x);
      y = std::nearbyint(y);
    }
    if (padding == "border") {
      x = std::clamp(x, 0.0, static_cast<double>(w - 1));
      y = std::clamp(y, 0.0, static_cast<double>(h - 1));
    } else if (padding == "reflection") {
      x = reflect(x, align ? 0 : -0.5, align ? static_cast<double>(w - 1) : w - 0.5);
      y = reflect(y, align ? 0 : -0.5, align ? static_cast<double>(h - 1) : h - 0.5);
    }
    if (mode == "nearest")
      return pixel(img, h, w, static_cast<int64_t>(y), static_cast<int64_t>(x));
    if (mode == "bilinear") {
      auto x1 = static_cast<int64_t>(std::floor(x)), y1 = static_cast<int64_t>(std::floor(y));
      double dx1 = x - static_cast<double>(x1), dx2 = static_cast<double>(x1 + 1) - x;
      double dy1 = y - static_cast<double>(y1), dy2 = static_cast<double>(y1 + 1) - y;
      return dy2 * (dx2 * pixel(img, h, w, y1, x1) + dx1 * pixel(img, h, w, y1, x1 + 1)) +
             dy1 * (dx2 * pixel(img, h, w, y1 + 1, x1) + dx1 * pixel(img, h, w, y1 + 1, x1 + 1));
    }
    auto x0 = static_cast<int64_t>(std::floor(x)) - 1, y0 = static_cast<int64_t>(std::floor(y)) - 1;
    double cx[4], cy[4];
    cubic(x - static_cast<double>(x0) - 1, cx);
    cubic(y - static_cast<double>(y0) - 1, cy);
    double acc = 0;
    for (int i = 0; i < 4; ++i) {
      double row = 0;
      for (int j = 0; j < 4; ++j) row += cx[j] * pixel(img, h, w, y0 + i, x0 + j);
      acc += cy[i] * row;
    }
    return acc;
  }
};

Initializer grid_sample_ref(const GridRef& ref, const Initializer& x, const Initializer& grid) {
  const Shape& xs = x.type.shape;
  const Shape& gs = grid.type.shape;
  Initializer y = test::make_tensor("float32", {xs[0], xs[1], gs[1], gs[2]});
  auto* yp = reinterpret_cast<float*>(y.data.data());
  int64_t at = 0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t oy = 0; oy < gs[1]; ++oy)
        for (int64_t ox = 0; ox < gs[2]; ++ox, ++at) {
          const float* g = floats(grid) + ((n * gs[1] + oy) * gs[2] + ox) * 2;
          yp[at] = static_cast<float>(
              ref.sample(floats(x) + (n * xs[1] + c) * xs[2] * xs[3], xs[2], xs[3], g[0], g[1]));
        }
  return y;
}

Node grid_sample_node(const std::string& mode, const std::string& padding, bool align) {
  Node n = node_of("GridSample", 2);
  n.attrs["mode"] = mode;
  n.attrs["padding_mode"] = padding;
  n.attrs["align_corners"] = int64_t{align};
  return n;
}

// Bilinear, zeros, align_corners 0 by hand on X[r][c] = 4 r + c + 1 (linear inside the map).
TEST(GridSampleEval, BilinearByHand) {
  std::vector<double> xv;
  for (int i = 0; i < 16; ++i) xv.push_back(i + 1);
  Initializer x = float_tensor({1, 1, 4, 4}, xv);
  Initializer grid = float_tensor({1, 1, 3, 2}, {-1.0, -1.0, -0.5, -0.5, 0.2, 0.4});
  Initializer y = test::eval(grid_sample_node("bilinear", "zeros", false), {&x, &grid}).at(0);
  // (-1, -1) -> pixel (-0.5, -0.5): a quarter of X[0][0], the other corners are padding;
  // (-0.5, -0.5) -> (0.5, 0.5): the mean of 1, 2, 5, 6; (0.2, 0.4) -> column 1.9, row 2.3.
  const double want[] = {0.25, 3.5, 4 * 2.3 + 1.9 + 1};
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(floats(y)[k], want[k], 1e-5) << k;
}

// Every mode, padding and align_corners: evaluate against the plain reference,
// the kernel against evaluate, on grids reaching past the borders (reflection
// folds several times at 2.5).
TEST(GridSample, EveryModeAgainstReferenceAndKernel) {
  std::mt19937_64 rng(61);
  const Shape xs[] = {{1, 1, 4, 4}, {2, 3, 5, 7}, {1, 2, 1, 9}, {1, 17, 6, 3}};
  const Shape gs[] = {{1, 6, 6, 2}, {2, 3, 11, 2}, {1, 1, 5, 2}, {1, 4, 19, 2}};
  for (const char* mode : {"bilinear", "nearest", "bicubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (bool align : {false, true})
        for (size_t k = 0; k < std::size(xs); ++k) {
          const std::string what = std::string(mode) + "/" + padding + "/" + std::to_string(align) +
                                   " X " + graph::shape_str(xs[k]);
          Initializer x = random_tensor("float32", xs[k], rng);
          Initializer grid = random_tensor("float32", gs[k], rng, -2.5, 2.5);
          Node n = grid_sample_node(mode, padding, align);
          Initializer want = grid_sample_ref({mode, padding, align}, x, grid);
          expect_same(test::eval(n, {&x, &grid}).at(0), want, 1e-5, what + " evaluate");
          expect_same(test::run_compiled(n, {&x, &grid}).at(0), want, 1e-5, what + " kernel");
        }
}

// A bigger case: the plan stage and the sampling stage run in parallel loops.
TEST(GridSample, LargeBilinear) {
  std::mt19937_64 rng(62);
  Initializer x = random_tensor("float32", {2, 8, 33, 29}, rng);
  Initializer grid = random_tensor("float32", {2, 31, 37, 2}, rng, -1.1, 1.1);
  check_node(grid_sample_node("bilinear", "zeros", false), {&x, &grid});
  check_node(grid_sample_node("bicubic", "border", true), {&x, &grid});
}

TEST(GridSample, BadInputsNameTheNode) {
  std::mt19937_64 rng(63);
  Initializer x = random_tensor("float32", {1, 2, 4, 4}, rng);
  Initializer grid3 = random_tensor("float32", {1, 4, 4, 3}, rng);
  Initializer x5 = random_tensor("float32", {1, 2, 4, 4, 4}, rng);
  Initializer grid = random_tensor("float32", {1, 4, 4, 2}, rng);
  auto message = [&](const Node& n, const Initializer& a, const Initializer& b) {
    try {
      test::eval(n, {&a, &b});
    } catch (const graph::OpError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(grid_sample_node("bilinear", "zeros", false), x, grid3).find("GridSample_test"),
            std::string::npos);
  EXPECT_NE(message(grid_sample_node("bilinear", "zeros", false), x5, grid).find("4-D"),
            std::string::npos);
  EXPECT_NE(message(grid_sample_node("area", "zeros", false), x, grid).find("mode 'area'"),
            std::string::npos);
  EXPECT_NE(message(grid_sample_node("bilinear", "wrap", false), x, grid).find("'wrap'"),
            std::string::npos);
}

// ---- RoiAlign ------------------------------------------------------------------------------

// ONNX Runtime's RoiAlignForward (which ONNX's reference ports), in double, sample by sample.
struct RoiRef {
  std::string mode = "avg";
  bool half_pixel = true;
  int64_t ratio = 0, out_h = 1, out_w = 1;
  double scale = 1;

  static void bilinear(const float* img, int64_t h, int64_t w, double y, double x, double* v) {
    for (int k = 0; k < 4; ++k) v[k] = 0;
    if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return;
    y = std::max(y, 0.0);
    x = std::max(x, 0.0);
    auto yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x);
    int64_t yh = yl + 1, xh = xl + 1;
    if (yl >= h - 1) yh = yl = h - 1, y = static_cast<double>(yl);
    if (xl >= w - 1) xh = xl = w - 1, x = static_cast<double>(xl);
    double ly = y - static_cast<double>(yl), lx = x - static_cast<double>(xl);
    double hy = 1 - ly, hx = 1 - lx;
    v[0] = hy * hx * img[yl * w + xl];
    v[1] = hy * lx * img[yl * w + xh];
    v[2] = ly * hx * img[yh * w + xl];
    v[3] = ly * lx * img[yh * w + xh];
  }

  Initializer run(const Initializer& x, const Initializer& rois, const Shape& batch) const {
    const Shape& xs = x.type.shape;
    const int64_t n_rois = rois.type.shape[0];
    Initializer y = test::make_tensor("float32", {n_rois, xs[1], out_h, out_w});
    auto* yp = reinterpret_cast<float*>(y.data.data());
    const double off = half_pixel ? 0.5 : 0.0;
    for (int64_t r = 0; r < n_rois; ++r) {
      const float* b = floats(rois) + r * 4;
      double x0 = b[0] * scale - off, y0 = b[1] * scale - off;
      double rw = b[2] * scale - off - x0, rh = b[3] * scale - off - y0;
      if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
      double bh = rh / static_cast<double>(out_h), bw = rw / static_cast<double>(out_w);
      int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / out_h));
      int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / out_w));
      double count = std::max<double>(static_cast<double>(gh * gw), 1);
      for (int64_t c = 0; c < xs[1]; ++c) {
        const float* img = floats(x) + (batch[r] * xs[1] + c) * xs[2] * xs[3];
        for (int64_t ph = 0; ph < out_h; ++ph)
          for (int64_t pw = 0; pw < out_w; ++pw) {
            double acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < gh; ++iy)
              for (int64_t ix = 0; ix < gw; ++ix) {
                double yy = y0 + ph * bh + (iy + 0.5) * bh / gh;
                double xx = x0 + pw * bw + (ix + 0.5) * bw / gw;
                double v[4];
                bilinear(img, xs[2], xs[3], yy, xx, v);
                if (mode == "avg") {
                  acc += v[0] + v[1] + v[2] + v[3];
                } else {
                  double m = std::max({v[0], v[1], v[2], v[3]});
                  acc = first ? m : std::max(acc, m);
                  first = false;
                }
              }
            if (mode == "avg") acc /= count;
            yp[((r * xs[1] + c) * out_h + ph) * out_w + pw] = static_cast<float>(acc);
          }
      }
    }
    return y;
  }
};

Node roi_node(const RoiRef& r) {
  Node n = node_of("RoiAlign", 3);
  n.attrs["mode"] = r.mode;
  n.attrs["coordinate_transformation_mode"] =
      std::string(r.half_pixel ? "half_pixel" : "output_half_pixel");
  n.attrs["sampling_ratio"] = r.ratio;
  n.attrs["output_height"] = r.out_h;
  n.attrs["output_width"] = r.out_w;
  n.attrs["spatial_scale"] = static_cast<float>(r.scale);
  return n;
}

// Boxes (x1, y1, x2, y2) in image pixels (the map's size / scale): inside the
// image, across its borders, tiny and inverted ones.
// lo, hi: the corners' range as fractions of the image.
Initializer random_boxes(int64_t n, double width, double height, std::mt19937_64& rng,
                         double lo = -0.2, double hi = 1.2) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v;
  for (int64_t r = 0; r < n; ++r) {
    double a = u(rng) * width, b = u(rng) * height, c = u(rng) * width, d = u(rng) * height;
    if (r % 5 != 4) {  // mostly ordered; every fifth may be inverted
      if (a > c) std::swap(a, c);
      if (b > d) std::swap(b, d);
    }
    if (r % 7 == 3) c = a + 0.3, d = b + 0.2;  // smaller than a pixel
    for (double e : {a, b, c, d}) v.push_back(static_cast<float>(e));
  }
  return tensor_of<float>({n, 4}, v);
}

// Every mode, coordinate mode, fixed and adaptive grids and scales, on boxes
// read at run time: evaluate against the plain reference, the kernel against
// evaluate. Adaptive grids on boxes read at run time take boxes within the
// image (the kernel's sample loops are sized for those; see below).
TEST(RoiAlign, EveryModeAgainstReferenceAndKernel) {
  std::mt19937_64 rng(64);
  struct Case {
    Shape x;
    int64_t rois, out_h, out_w;
    double scale;
  };
  const Case cases[] = {{{1, 1, 10, 10}, 3, 5, 5, 1.0},
                        {{2, 3, 9, 13}, 7, 3, 4, 0.5},
                        {{3, 17, 6, 5}, 5, 2, 7, 0.25},
                        {{1, 2, 1, 8}, 4, 1, 3, 1.0}};
  for (const Case& c : cases)
    for (const char* mode : {"avg", "max"})
      for (bool half : {true, false})
        for (int64_t ratio : {0, 1, 2, 3}) {
          RoiRef ref;
          ref.mode = mode;
          ref.half_pixel = half;
          ref.ratio = ratio;
          ref.out_h = c.out_h;
          ref.out_w = c.out_w;
          ref.scale = c.scale;
          const std::string what = std::string(mode) + (half ? " half_pixel" : " output_half") +
                                   " ratio " + std::to_string(ratio) + " X " +
                                   graph::shape_str(c.x);
          Initializer x = random_tensor("float32", c.x, rng);
          Initializer rois = random_boxes(c.rois, c.x[3] / c.scale, c.x[2] / c.scale, rng,
                                          ratio ? -0.2 : 0.0, ratio ? 1.2 : 1.0);
          Initializer batch = random_tensor("int64", {c.rois}, rng, 0, c.x[0] - 1);
          Shape b(ints(batch), ints(batch) + c.rois);
          Node n = roi_node(ref);
          Initializer want = ref.run(x, rois, b);
          expect_same(test::eval(n, {&x, &rois, &batch}).at(0), want, 1e-5, what + " evaluate");
          expect_same(test::run_compiled(n, {&x, &rois, &batch}).at(0), want, 1e-5,
                      what + " kernel");
        }
}

// RoiAlign compiled with its boxes and batch indices as graph constants (the
// kernel still reads them; the constants size the sample loops).
Initializer run_roi_with_constants(const Node& n, const Initializer& x, const Initializer& rois,
                                   const Initializer& batch, const graph::TensorType& out) {
  graph::ComputeInputs in;
  ir::Tensor xt = ir::placeholder(test::shape_exprs(x.type.shape), ir::DataType::f32(), "x");
  ir::Tensor rt = ir::placeholder(test::shape_exprs(rois.type.shape), ir::DataType::f32(), "r");
  ir::Tensor bt = ir::placeholder(test::shape_exprs(batch.type.shape), ir::DataType::i64(), "b");
  in.tensors = {xt, rt, bt};
  in.constants = {nullptr, &rois, &batch};
  std::vector<ir::Tensor> outs = graph::get_op("RoiAlign").compute(n, in, {out});
  schedule::Schedule sch = ops::schedule_generic(outs, codegen::Target::host().float_lanes());
  ir::LoweredFunc f = schedule::lower(sch, {xt, rt, bt, outs[0]}, "roi_align");
  auto mod = codegen::jit_compile({f}, codegen::Target::host());
  Initializer y = test::make_tensor("float32", out.shape);
  std::vector<std::vector<uint8_t>> copies = {x.data, rois.data, batch.data};
  std::vector<void*> ptrs;
  for (auto& c : copies) ptrs.push_back(c.data());
  ptrs.push_back(y.data.data());
  EXPECT_EQ(mod->get_function("roi_align")(ptrs.data()), 0);
  return y;
}

// Constant boxes: the kernel's sample loops take the largest grid of the
// boxes, which may reach far outside the map.
TEST(RoiAlign, ConstantBoxes) {
  std::mt19937_64 rng(65);
  RoiRef ref;
  ref.out_h = 3;
  ref.out_w = 2;
  Initializer x = random_tensor("float32", {2, 4, 12, 11}, rng);
  Initializer rois = random_boxes(6, 11, 12, rng, -1.0, 2.0);
  Initializer batch = random_tensor("int64", {6}, rng, 0, 1);
  Shape b(ints(batch), ints(batch) + 6);
  for (const char* mode : {"avg", "max"}) {
    ref.mode = mode;
    Node n = roi_node(ref);
    expect_same(run_roi_with_constants(n, x, rois, batch, {"float32", {6, 4, 3, 2}}),
                ref.run(x, rois, b), 1e-5, mode);
  }
  // A constant batch index out of range fails the build, naming the node.
  Initializer bad = tensor_of<int64_t>({6}, {0, 1, 2, 0, 0, 0});
  graph::ComputeInputs in;
  in.tensors = {ir::placeholder(test::shape_exprs(x.type.shape), ir::DataType::f32(), "x"),
                ir::placeholder(test::shape_exprs({6, 4}), ir::DataType::f32(), "r"),
                ir::placeholder(test::shape_exprs({6}), ir::DataType::i64(), "b")};
  in.constants = {nullptr, &rois, &bad};
  try {
    graph::get_op("RoiAlign").compute(roi_node(ref), in, {{"float32", {6, 4, 3, 2}}});
    ADD_FAILURE() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("RoiAlign_test"), std::string::npos) << e.what();
  }
}

// Boxes read at run time: adaptive grids are sized for boxes up to a pixel
// beyond the map; a larger box stops the run instead of dropping samples,
// and so does a batch index out of range.
TEST(RoiAlign, RunTimeBoxBeyondTheKernelsGridFails) {
  std::mt19937_64 rng(66);
  RoiRef ref;
  ref.out_h = 2;
  ref.out_w = 2;
  Initializer x = random_tensor("float32", {1, 2, 6, 6}, rng);
  Initializer whole = float_tensor({1, 4}, {-0.5, -0.5, 6.5, 6.5});  // 7 pixels: fits
  Initializer batch = tensor_of<int64_t>({1}, {0});
  Node n = roi_node(ref);
  expect_same(test::run_compiled(n, {&x, &whole, &batch}).at(0), ref.run(x, whole, {0}), 1e-5);
  Initializer huge = float_tensor({1, 4}, {-10, -10, 30, 30});
  std::vector<graph::TensorType> types = {{"float32", {1, 2, 2, 2}}};
  {
    SCOPED_TRACE("a box larger than the kernel's grid");
    test::run_compiled_as(n, {&x, &huge, &batch}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
  }
  Initializer bad_batch = tensor_of<int64_t>({1}, {1});
  SCOPED_TRACE("a batch index out of range");
  test::run_compiled_as(n, {&x, &whole, &bad_batch}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
}

// ---- MaxPool's Indices and MaxUnpool ------------------------------------------------------

struct PoolAttrs {
  Shape kernel, stride, pads;
  int64_t storage_order = 0, ceil_mode = 0;
  Shape dilations = {1, 1};
};

Node max_pool_node(const PoolAttrs& a) {
  Node n = node_of("MaxPool", 1, 2);
  n.attrs["kernel_shape"] = a.kernel;
  n.attrs["strides"] = a.stride;
  n.attrs["pads"] = a.pads;
  n.attrs["dilations"] = a.dilations;
  n.attrs["storage_order"] = a.storage_order;
  n.attrs["ceil_mode"] = a.ceil_mode;
  return n;
}

// The first maximum of each window (in window order) and its flat position in X.
std::pair<Initializer, Initializer> max_pool_ref(const PoolAttrs& a, const Initializer& x,
                                                 const Shape& out) {
  const Shape& s = x.type.shape;
  Initializer y = test::make_tensor("float32", out), ind = test::make_tensor("int64", out);
  auto* yp = reinterpret_cast<float*>(y.data.data());
  auto* ip = reinterpret_cast<int64_t*>(ind.data.data());
  int64_t at = 0;
  for (int64_t p = 0; p < s[0] * s[1]; ++p)
    for (int64_t oh = 0; oh < out[2]; ++oh)
      for (int64_t ow = 0; ow < out[3]; ++ow, ++at) {
        bool any = false;
        for (int64_t ky = 0; ky < a.kernel[0]; ++ky)
          for (int64_t kx = 0; kx < a.kernel[1]; ++kx) {
            int64_t h = oh * a.stride[0] - a.pads[0] + ky * a.dilations[0];
            int64_t w = ow * a.stride[1] - a.pads[1] + kx * a.dilations[1];
            if (h < 0 || h >= s[2] || w < 0 || w >= s[3]) continue;
            float v = floats(x)[(p * s[2] + h) * s[3] + w];
            if (any && !(v > yp[at])) continue;
            any = true;
            yp[at] = v;
            ip[at] = p * s[2] * s[3] + (a.storage_order ? w * s[2] + h : h * s[3] + w);
          }
      }
  return {y, ind};
}

// Strides, pads, dilations, ceil_mode, both storage orders; ties (values
// drawn from a few integers) take the first tap.
TEST(MaxPoolIndices, AgainstReferenceAndKernel) {
  std::mt19937_64 rng(67);
  const Shape xs[] = {{1, 1, 5, 5}, {2, 3, 9, 11}, {1, 5, 17, 6}};
  const PoolAttrs attrs[] = {{{2, 2}, {2, 2}, {0, 0, 0, 0}},
                             {{5, 5}, {1, 1}, {2, 2, 2, 2}},
                             {{3, 2}, {2, 1}, {1, 0, 1, 1}},
                             {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1},
                             {{2, 3}, {1, 2}, {0, 1, 0, 1}, 0, 0, {2, 1}}};
  for (const Shape& x_shape : xs)
    for (PoolAttrs a : attrs)
      for (int64_t order : {0, 1})
        for (bool ties : {false, true}) {
          a.storage_order = order;
          Node n = max_pool_node(a);
          Initializer x = ties ? random_tensor("int64", x_shape, rng, -2, 2)
                               : random_tensor("float32", x_shape, rng);
          if (ties) {  // small integers as floats: many equal maxima
            Initializer f = test::make_tensor("float32", x_shape);
            for (int64_t k = 0; k < f.type.num_elements(); ++k)
              reinterpret_cast<float*>(f.data.data())[k] = static_cast<float>(ints(x)[k]);
            x = f;
          }
          std::vector<Initializer> got = test::eval(n, {&x});
          ASSERT_EQ(got.size(), 2u);
          auto [y, ind] = max_pool_ref(a, x, got[0].type.shape);
          const std::string what = graph::shape_str(x_shape) + " order " + std::to_string(order);
          expect_same(got[0], y, 0, what);
          expect_same(got[1], ind, 0, what + " indices");
          check_node(n, {&x}, 0);
        }
}

// Y.flat[I[j]] = X.flat[j] into zeros, the later j winning (ONNX's reference).
Initializer unpool_ref(const Initializer& x, const Initializer& ind, const Shape& out) {
  Initializer y = test::make_tensor("float32", out);
  for (int64_t j = 0; j < x.type.num_elements(); ++j)
    reinterpret_cast<float*>(y.data.data())[ints(ind)[j]] = floats(x)[j];
  return y;
}

Node unpool_node(const PoolAttrs& a, bool with_shape) {
  Node n = node_of("MaxUnpool", with_shape ? 3 : 2);
  n.attrs["kernel_shape"] = a.kernel;
  n.attrs["strides"] = a.stride;
  n.attrs["pads"] = a.pads;
  return n;
}

// MaxPool -> MaxUnpool round trips (also overlapping windows, whose indices
// repeat), with and without output_shape (one larger than the pool's input
// keeps its indices).
TEST(MaxUnpool, AgainstReferenceAndKernel) {
  std::mt19937_64 rng(68);
  const Shape xs[] = {{1, 1, 4, 4}, {2, 3, 9, 11}, {1, 4, 7, 17}};
  const PoolAttrs attrs[] = {{{2, 2}, {2, 2}, {0, 0, 0, 0}},
                             {{3, 3}, {2, 2}, {1, 1, 1, 1}},
                             {{3, 2}, {1, 2}, {0, 0, 0, 0}},
                             {{2, 2}, {3, 3}, {0, 0, 0, 0}}};
  for (const Shape& x_shape : xs)
    for (const PoolAttrs& a : attrs)
      for (bool with_shape : {false, true}) {
        Initializer x = random_tensor("float32", x_shape, rng);
        std::vector<Initializer> pooled = test::eval(max_pool_node(a), {&x});
        // The unpool's default output: (in - 1) * stride - pads + kernel.
        Shape out = {x_shape[0], x_shape[1]};
        for (int d = 0; d < 2; ++d)
          out.push_back((pooled[0].type.shape[d + 2] - 1) * a.stride[d] - a.pads[d] -
                        a.pads[d + 2] + a.kernel[d]);
        // Indices address the pool's input: without output_shape only where it has that size.
        if (!with_shape && out != x_shape) continue;
        Initializer shape = tensor_of<int64_t>({4}, x_shape);
        Node n = unpool_node(a, with_shape);
        std::vector<const Initializer*> in = {&pooled[0], &pooled[1]};
        if (with_shape) in.push_back(&shape);
        Initializer want = unpool_ref(pooled[0], pooled[1], x_shape);
        const std::string what = graph::shape_str(x_shape) + (with_shape ? " shaped" : "");
        expect_same(test::eval(n, in).at(0), want, 0, what + " evaluate");
        expect_same(test::run_compiled(n, in).at(0), want, 0, what + " kernel");
      }
}

// An index outside its own window: the reference writes it, the kernel
// (which gathers per window) fails the run instead of losing it; an index
// past the output is an error in both.
TEST(MaxUnpool, IndexOutsideItsWindow) {
  PoolAttrs a{{2, 2}, {2, 2}, {0, 0, 0, 0}};
  Initializer x = float_tensor({1, 1, 2, 2}, {1, 2, 3, 4});
  Initializer far = tensor_of<int64_t>({1, 1, 2, 2}, {0, 3, 8, 5});  // 5 lies in window 0
  Node n = unpool_node(a, false);
  Initializer want = unpool_ref(x, far, {1, 1, 4, 4});
  expect_same(test::eval(n, {&x, &far}).at(0), want, 0);
  std::vector<graph::TensorType> types = {{"float32", {1, 1, 4, 4}}};
  test::run_compiled_as(n, {&x, &far}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
  Initializer past = tensor_of<int64_t>({1, 1, 2, 2}, {0, 3, 8, 16});
  EXPECT_THROW(test::eval(n, {&x, &past}), graph::OpError);
  test::run_compiled_as(n, {&x, &past}, types, KILN_STATUS_INDEX_OUT_OF_RANGE);
}

}  // namespace
}  // namespace kiln
