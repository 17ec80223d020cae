// Sampling operators: GridSample (opset 16: 4-D input; bilinear, nearest and
// bicubic; zeros, border and reflection padding; align_corners), RoiAlign
// (opsets 10 and 16: avg and max, half_pixel and output_half_pixel, a fixed or
// an adaptive sampling grid) and MaxRoiPool (opset 1).
//
// All read their input at positions computed from data (the grid, the
// boxes). The coordinate arithmetic (denormalizing, padding, reflection, the
// taps and their weights) is written once, as templates over the scalar
// type: float for the reference evaluate and ir::Expr for the kernel, so that
// both compute it in the same float32 operations and a sample exactly on a
// pixel boundary takes the same taps in both. The references follow ONNX's
// (GridSample) and ONNX Runtime's (RoiAlign, which ONNX's reference ports)
// loops and accumulate in double.
//
// The kernels compute every output pixel's taps once, in a "plan" stage (per
// axis and tap: the pixel index and its weight), and every channel then reads
// the plan: the coordinate work is paid once per pixel, not per channel.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;
using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers
using Inputs = std::vector<const Initializer*>;
using Outputs = std::vector<TensorType>;

// ---- one arithmetic for the reference and the kernel ---------------------------------
// The host (float, bool) and IR (Expr) forms of what the templates below use;
// operators + - * / < <= > >= work on both as they are.

float pick(bool c, float a, float b) { return c ? a : b; }
Expr pick(const Expr& c, const Expr& a, const Expr& b) { return ir::select(c, a, b); }
float floor_of(float x) { return std::floor(x); }
Expr floor_of(const Expr& x) { return ir::floor(x); }
float ceil_of(float x) { return std::ceil(x); }
Expr ceil_of(const Expr& x) { return ir::ceil(x); }
// Toward zero, as C's and Python's int() of a float.
float trunc_of(float x) { return std::trunc(x); }
Expr trunc_of(const Expr& x) {
  return ir::cast(ir::DataType::f32(), ir::cast(ir::DataType::i64(), x));
}
// Half to even, as numpy's rint (the default rounding mode of the host).
float rint_of(float x) { return std::nearbyint(x); }
Expr rint_of(const Expr& x) { return ir::round_even(x); }
float min_of(float a, float b) { return std::min(a, b); }
Expr min_of(const Expr& a, const Expr& b) { return ir::min(a, b); }
float max_of(float a, float b) { return std::max(a, b); }
Expr max_of(const Expr& a, const Expr& b) { return ir::max(a, b); }
bool all_of(bool a, bool b) { return a && b; }
Expr all_of(const Expr& a, const Expr& b) { return ir::logical_and(a, b); }
bool equal(float a, float b) { return a == b; }
Expr equal(const Expr& a, const Expr& b) { return ir::eq(a, b); }
float abs_of(float x) { return std::fabs(x); }
Expr abs_of(const Expr& x) { return ir::fabs(x); }

template <typename F>
F clamp_of(const F& x, float lo, float hi) {
  return min_of(max_of(x, F(lo)), F(hi));
}

// A stage computed into its own buffer (a reduction over one tap, which the
// generic schedule never inlines): the plans, read by every channel.
Tensor materialize(const Shape& shape, const std::function<Expr(const std::vector<Var>&)>& fn,
                   const std::string& name) {
  IterVar one = ir::reduce_axis(Expr(int64_t{1}), "one");
  return ir::compute(
      shape_exprs(shape), [&](const std::vector<Var>& i) { return ir::sum(fn(i), {one}); }, name);
}

// values[k] where the integer expression k equals it (a chain of selects that
// unswitch_selects turns into one copy of the loop body per k).
Expr select_by(const Expr& k, const std::vector<Expr>& values) {
  Expr v = values.back();
  for (size_t j = values.size() - 1; j-- > 0;)
    v = ir::select(ir::eq(k, Expr(static_cast<int64_t>(j))), values[j], v);
  return v;
}

// ---- GridSample -------------------------------------------------------------------------
// Y[n, c, oy, ox] samples X[n, c] at grid[n, oy, ox] = (x, y), both
// normalized to [-1, 1] over the width and the height. Per axis the sample
// reads 1 (nearest), 2 (bilinear) or 4 (bicubic) pixels; the 2-D sample is
// the product of the two axes' taps (separable in every mode and padding).

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridSpec {
  GridMode mode = GridMode::kBilinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
  int64_t n = 0, c = 0, h = 0, w = 0, out_h = 0, out_w = 0;
  int taps() const { return mode == GridMode::kNearest ? 1 : mode == GridMode::kBilinear ? 2 : 4; }
  Shape out_shape() const { return {n, c, out_h, out_w}; }
};

GridSpec grid_spec(const Node& node, const Shape& x, const Shape& grid) {
  GridSpec s;
  const std::string mode = attr_string(node, "mode", "bilinear");
  if (mode == "bilinear")
    s.mode = GridMode::kBilinear;
  else if (mode == "nearest")
    s.mode = GridMode::kNearest;
  else if (mode == "bicubic")
    s.mode = GridMode::kBicubic;
  else
    fail(node, "mode '" + mode + "' is not supported (bilinear, nearest, bicubic)");
  const std::string padding = attr_string(node, "padding_mode", "zeros");
  if (padding == "zeros")
    s.padding = GridPadding::kZeros;
  else if (padding == "border")
    s.padding = GridPadding::kBorder;
  else if (padding == "reflection")
    s.padding = GridPadding::kReflection;
  else
    fail(node, "padding_mode '" + padding + "' is not supported (zeros, border, reflection)");
  s.align_corners = attr_int(node, "align_corners", 0) != 0;
  if (x.size() != 4) fail(node, "X must be 4-D [N, C, H, W] (opset 16); got " + shape_str(x));
  if (grid.size() != 4 || grid[0] != x[0] || grid[3] != 2)
    fail(node, "Grid must have shape [N, H_out, W_out, 2] with X's N = " + std::to_string(x[0]) +
                   "; got " + shape_str(grid));
  if (x[2] < 1 || x[3] < 1) fail(node, "X has an empty spatial dim: " + shape_str(x));
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.out_h = grid[1];
  s.out_w = grid[2];
  return s;
}

// x reflected into [lo, hi] by its bounds, as many times as it takes (ONNX's
// _gs_reflect). An axis of one pixel with align_corners has lo == hi.
template <typename F>
F reflect(const F& x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0) return F(lo);
  auto is_even = [](const F& k) { return equal(floor_of(k * 0.5f) * 2.0f, k); };
  F below = F(lo) - x, above = x - hi;
  F kb = floor_of(below / range), ka = floor_of(above / range);
  F rb = below - kb * range, ra = above - ka * range;
  F from_below = pick(is_even(kb), F(lo) + rb, F(hi) - rb);
  F from_above = pick(is_even(ka), F(hi) - ra, F(lo) + ra);
  return pick(x < F(lo), from_below, pick(x > F(hi), from_above, x));
}

// One axis' taps of a sample: the pixel index of each (a whole number;
// -1 where zeros padding reads no pixel) and its weight.
template <typename F>
struct AxisTaps {
  F index[4];
  F weight[4];
};

// Bicubic weights of the 4 taps around a sample at fraction t in [0, 1)
// past the second tap (ONNX's _gs_get_cubic_coeffs, A = -0.75).
template <typename F>
void cubic_weights(const F& t, F* w) {
  const float a = -0.75f;
  F t1 = t + 1.0f, u = F(1.0f) - t, u1 = F(2.0f) - t;
  w[0] = ((t1 * a - 5.0f * a) * t1 + 8.0f * a) * t1 - 4.0f * a;
  w[1] = (t * (a + 2.0f) - (a + 3.0f)) * t * t + 1.0f;
  w[2] = (u * (a + 2.0f) - (a + 3.0f)) * u * u + 1.0f;
  w[3] = ((u1 * a - 5.0f * a) * u1 + 8.0f * a) * u1 - 4.0f * a;
}

// The taps along an axis of `len` pixels of the normalized coordinate g
// (ONNX's reference: denormalize, round for nearest, pad the coordinate,
// then map each tap's pixel by the padding).
template <typename F>
AxisTaps<F> grid_axis_taps(const GridSpec& s, const F& g, int64_t len) {
  const float n = static_cast<float>(len);
  F x = s.align_corners ? (g + 1.0f) / 2.0f * (n - 1.0f) : ((g + 1.0f) * n - 1.0f) / 2.0f;
  const float lo = s.align_corners ? 0.0f : -0.5f;
  const float hi = s.align_corners ? n - 1.0f : n - 0.5f;
  if (s.mode == GridMode::kNearest) x = rint_of(x);
  if (s.padding == GridPadding::kBorder) x = clamp_of(x, 0.0f, n - 1.0f);
  if (s.padding == GridPadding::kReflection) x = reflect(x, lo, hi);
  auto pixel = [&](const F& c) -> F {
    switch (s.padding) {
      case GridPadding::kZeros: return pick(all_of(c >= F(0.0f), c <= F(n - 1.0f)), c, F(-1.0f));
      case GridPadding::kBorder: return clamp_of(c, 0.0f, n - 1.0f);
      case GridPadding::kReflection: break;
    }
    return clamp_of(trunc_of(reflect(c, lo, hi)), 0.0f, n - 1.0f);
  };
  AxisTaps<F> t;
  switch (s.mode) {
    case GridMode::kNearest:
      t.index[0] = pixel(trunc_of(x));
      t.weight[0] = F(1.0f);
      break;
    case GridMode::kBilinear: {
      F x1 = floor_of(x);
      t.index[0] = pixel(x1);
      t.index[1] = pixel(x1 + 1.0f);
      t.weight[0] = x1 + 1.0f - x;
      t.weight[1] = x - x1;
      break;
    }
    case GridMode::kBicubic: {
      F x0 = floor_of(x) - 1.0f;
      for (int k = 0; k < 4; ++k) t.index[k] = pixel(x0 + static_cast<float>(k));
      cubic_weights(x - x0 - 1.0f, t.weight);
      break;
    }
  }
  return t;
}

std::vector<Initializer> eval_grid_sample(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& grid = required_input(node, ins, 1);
  require_f32(node, x, "X");
  require_f32(node, grid, "Grid");
  const GridSpec s = grid_spec(node, x.type.shape, grid.type.shape);
  Initializer y = make_tensor("float32", s.out_shape());
  const float* xp = data_of<float>(x);
  const float* gp = data_of<float>(grid);
  float* yp = data_of<float>(y);
  const int taps = s.taps();
  const int64_t pixels = s.out_h * s.out_w;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t p = 0; p < pixels; ++p) {
      const float* g = gp + (n * pixels + p) * 2;
      AxisTaps<float> tx = grid_axis_taps(s, g[0], s.w), ty = grid_axis_taps(s, g[1], s.h);
      for (int64_t c = 0; c < s.c; ++c) {
        const float* plane = xp + (n * s.c + c) * s.h * s.w;
        double acc = 0;
        for (int i = 0; i < taps; ++i)
          for (int j = 0; j < taps; ++j) {
            if (ty.index[i] < 0 || tx.index[j] < 0) continue;  // zeros padding
            const auto at =
                static_cast<int64_t>(ty.index[i]) * s.w + static_cast<int64_t>(tx.index[j]);
            acc += static_cast<double>(ty.weight[i]) * tx.weight[j] * plane[at];
          }
        yp[(n * s.c + c) * pixels + p] = static_cast<float>(acc);
      }
    }
  return {std::move(y)};
}

// plan[n, k, p] for output pixel p = oy * W_out + ox: k = axis * 2T + tap * 2
// + (0: the pixel index, 1: its weight), axis 0 the rows (y), 1 the columns
// (x). Pixels innermost: the output's vectorized columns read it contiguously.
Tensor grid_plan(const GridSpec& s, const Tensor& grid) {
  const int taps = s.taps();
  return materialize(
      {s.n, 4 * taps, s.out_h * s.out_w},
      [&](const std::vector<Var>& i) {
        Expr oy = ir::floordiv(i[2], Expr(s.out_w)), ox = ir::floormod(i[2], Expr(s.out_w));
        Expr gx = ir::read(grid, {i[0], oy, ox, Expr(int64_t{0})});
        Expr gy = ir::read(grid, {i[0], oy, ox, Expr(int64_t{1})});
        AxisTaps<Expr> ty = grid_axis_taps(s, gy, s.h), tx = grid_axis_taps(s, gx, s.w);
        std::vector<Expr> values;
        for (const AxisTaps<Expr>* t : {&ty, &tx})
          for (int k = 0; k < taps; ++k) {
            values.push_back(t->index[k]);
            values.push_back(t->weight[k]);
          }
        return select_by(i[1], values);
      },
      "GridSample.plan");
}

std::vector<Tensor> compute_grid_sample(const Node& node, const ComputeInputs& in,
                                        const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& grid = required_tensor(node, in, 1);
  if (!(x->dtype == ir::DataType::f32()) || !(grid->dtype == ir::DataType::f32()))
    fail(node, "X and Grid must be float32");
  const GridSpec s = grid_spec(node, static_shape(x), static_shape(grid));
  check_out_type(node, out_types, 0, s.out_shape(), "float32");
  const int taps = s.taps();
  Tensor plan = grid_plan(s, grid);
  Tensor y = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr p = i[2] * Expr(s.out_w) + i[3];
        auto at = [&](int k) { return ir::read(plan, {i[0], Expr(int64_t{k}), p}); };
        Expr acc;
        for (int a = 0; a < taps; ++a) {
          Expr iy = at(2 * a), wy = at(2 * a + 1);
          for (int b = 0; b < taps; ++b) {
            Expr ix = at(2 * taps + 2 * b), wx = at(2 * taps + 2 * b + 1);
            Expr v =
                ir::read(x, {i[0], i[1], clamp_index(ir::cast(ir::DataType::i64(), iy), 0, s.h - 1),
                             clamp_index(ir::cast(ir::DataType::i64(), ix), 0, s.w - 1)}) *
                (wy * wx);
            if (s.padding == GridPadding::kZeros)
              v = ir::select(ir::logical_and(iy >= Expr(0.0f), ix >= Expr(0.0f)), v, Expr(0.0f));
            acc = acc ? acc + v : v;
          }
        }
        return acc;
      },
      "GridSample");
  return {y};
}

// ---- RoiAlign ---------------------------------------------------------------------------
// Y[r, c, ph, pw]: bin (ph, pw) of box r over X[batch_indices[r], c], the
// average (or maximum) of a grid of bilinear samples per bin. ONNX
// Runtime's algorithm, which ONNX's reference ports: a sample more than one
// pixel outside the map counts as 0, one inside is clamped to the map; "max"
// takes per sample the largest of the four weighted corners.
//
// The grid is sampling_ratio samples per bin and axis, or (0) ceil(bin
// size) of the box. The kernel's sample loops have a fixed extent: the
// ratio, the largest grid of constant boxes, or for boxes read at run time
// the grid of a box one pixel larger than the feature map; samples past the
// box's own grid are masked. A run-time box needing more fails the run (the
// kernel reports it as an index out of range) rather than losing samples.

struct RoiSpec {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t sampling_ratio = 0;
  float spatial_scale = 1.0f;
  int64_t n = 0, c = 0, h = 0, w = 0, rois = 0, out_h = 1, out_w = 1;
  Shape out_shape() const { return {rois, c, out_h, out_w}; }
};

RoiSpec roi_spec(const Node& node, const Shape& x, const Shape& rois, const Shape& batch) {
  RoiSpec s;
  const std::string mode = attr_string(node, "mode", "avg");
  if (mode != "avg" && mode != "max") fail(node, "mode '" + mode + "' is not supported (avg, max)");
  s.max_mode = mode == "max";
  // Opset 10 has no such attribute and means output_half_pixel: the frontend
  // writes it on older nodes (frontend/legacy_ops.h).
  const std::string ct = attr_string(node, "coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    fail(node, "coordinate_transformation_mode '" + ct +
                   "' is not supported (half_pixel, output_half_pixel)");
  s.half_pixel = ct == "half_pixel";
  s.sampling_ratio = attr_int(node, "sampling_ratio", 0);
  s.spatial_scale = attr_float(node, "spatial_scale", 1.0f);
  s.out_h = attr_int(node, "output_height", 1);
  s.out_w = attr_int(node, "output_width", 1);
  if (s.sampling_ratio < 0) fail(node, "sampling_ratio must be >= 0");
  if (s.out_h < 1 || s.out_w < 1) fail(node, "output_height and output_width must be positive");
  if (x.size() != 4) fail(node, "X must be 4-D [N, C, H, W]; got " + shape_str(x));
  if (rois.size() != 2 || rois[1] != 4)
    fail(node, "rois must have shape [num_rois, 4]; got " + shape_str(rois));
  if (batch != Shape{rois[0]})
    fail(node, "batch_indices must have shape [num_rois] = [" + std::to_string(rois[0]) +
                   "]; got " + shape_str(batch));
  if (x[2] < 1 || x[3] < 1) fail(node, "X has an empty spatial dim: " + shape_str(x));
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.rois = rois[0];
  return s;
}

// One axis of one box: where its first bin starts, a bin's size and the
// samples per bin (a whole number; <= 0 for an empty half_pixel box).
template <typename F>
struct RoiAxis {
  F start, bin, grid;
};

template <typename F>
RoiAxis<F> roi_axis(const RoiSpec& s, const F& begin, const F& end, int64_t pooled) {
  const float offset = s.half_pixel ? 0.5f : 0.0f;
  F start = begin * s.spatial_scale - offset;
  F size = end * s.spatial_scale - offset - start;
  if (!s.half_pixel) size = max_of(size, F(1.0f));
  F bin = size / static_cast<float>(pooled);
  F grid = s.sampling_ratio > 0 ? F(static_cast<float>(s.sampling_ratio))
                                : ceil_of(size / static_cast<float>(pooled));
  return {start, bin, grid};
}

// Sample k of bin p along an axis of `len` pixels: its two pixels and their
// weights, both 0 for a sample more than a pixel outside the map.
template <typename F>
struct RoiTap {
  F low, high, w_low, w_high;
};

template <typename F>
RoiTap<F> roi_tap(const RoiAxis<F>& a, const F& p, const F& k, int64_t len) {
  const float n = static_cast<float>(len);
  F y = a.start + p * a.bin + (k + 0.5f) * a.bin / a.grid;
  auto inside = all_of(y >= F(-1.0f), y <= F(n));
  y = max_of(y, F(0.0f));
  F low = floor_of(y);
  auto at_end = low >= F(n - 1.0f);
  low = pick(at_end, F(n - 1.0f), low);
  F high = pick(at_end, low, low + 1.0f);
  y = pick(at_end, low, y);
  F l = y - low;
  return {low, high, pick(inside, F(1.0f) - l, F(0.0f)), pick(inside, l, F(0.0f))};
}

// The box's four coordinates (x1, y1, x2, y2) as floats.
template <typename F>
struct Box {
  RoiAxis<F> y, x;
};

template <typename F>
Box<F> roi_box(const RoiSpec& s, const F* c) {
  return {roi_axis(s, c[1], c[3], s.out_h), roi_axis(s, c[0], c[2], s.out_w)};
}

std::vector<Initializer> eval_roi_align(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& rois = required_input(node, ins, 1);
  const Initializer& batch = required_input(node, ins, 2);
  require_f32(node, x, "X");
  require_f32(node, rois, "rois");
  const RoiSpec s = roi_spec(node, x.type.shape, rois.type.shape, batch.type.shape);
  const Shape b = to_ints(node, batch);
  Initializer y = make_tensor("float32", s.out_shape());
  const float* xp = data_of<float>(x);
  float* yp = data_of<float>(y);
  for (int64_t r = 0; r < s.rois; ++r) {
    const int64_t image = checked_index(node, b[r], 0, s.n);
    const Box<float> box = roi_box(s, data_of<float>(rois) + r * 4);
    const auto gh = static_cast<int64_t>(box.y.grid), gw = static_cast<int64_t>(box.x.grid);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < s.c; ++c) {
      const float* plane = xp + (image * s.c + c) * s.h * s.w;
      for (int64_t ph = 0; ph < s.out_h; ++ph)
        for (int64_t pw = 0; pw < s.out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            RoiTap<float> ty = roi_tap(box.y, static_cast<float>(ph), static_cast<float>(iy), s.h);
            for (int64_t ix = 0; ix < gw; ++ix) {
              RoiTap<float> tx =
                  roi_tap(box.x, static_cast<float>(pw), static_cast<float>(ix), s.w);
              auto px = [&](float yy, float xx) {
                return plane[static_cast<int64_t>(yy) * s.w + static_cast<int64_t>(xx)];
              };
              const double v[4] = {
                  static_cast<double>(ty.w_low * tx.w_low) * px(ty.low, tx.low),
                  static_cast<double>(ty.w_low * tx.w_high) * px(ty.low, tx.high),
                  static_cast<double>(ty.w_high * tx.w_low) * px(ty.high, tx.low),
                  static_cast<double>(ty.w_high * tx.w_high) * px(ty.high, tx.high)};
              if (!s.max_mode) {
                acc += v[0] + v[1] + v[2] + v[3];
                continue;
              }
              const double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
              acc = first ? m : std::max(acc, m);
              first = false;
            }
          }
          if (!s.max_mode) acc /= count;
          yp[((r * s.c + c) * s.out_h + ph) * s.out_w + pw] = static_cast<float>(acc);
        }
    }
  }
  return {std::move(y)};
}

// The kernel's samples per bin along y and x: the ratio, the largest grid of
// constant boxes, or the grid of a box one pixel larger than the map.
std::pair<int64_t, int64_t> roi_grid_bounds(const RoiSpec& s, const Initializer* rois) {
  if (s.sampling_ratio > 0) return {s.sampling_ratio, s.sampling_ratio};
  auto whole = [](float g) { return static_cast<int64_t>(std::max(g, 0.0f)); };
  if (rois) {
    int64_t gh = 1, gw = 1;
    for (int64_t r = 0; r < s.rois; ++r) {
      const Box<float> box = roi_box(s, data_of<float>(*rois) + r * 4);
      gh = std::max(gh, whole(box.y.grid));
      gw = std::max(gw, whole(box.x.grid));
    }
    return {gh, gw};
  }
  auto cover = [](int64_t len, int64_t pooled) { return (len + 1 + pooled - 1) / pooled; };
  return {cover(s.h, s.out_h), cover(s.w, s.out_w)};
}

// The box of roi r in the kernel: its four coordinates read from `rois`.
Box<Expr> roi_box_expr(const RoiSpec& s, const Tensor& rois, const Expr& r) {
  Expr c[4];
  for (int k = 0; k < 4; ++k) c[k] = ir::read(rois, {r, Expr(int64_t{k})});
  return roi_box(s, c);
}

// plan[k, r, p * G + g] of sample g of bin p along one axis (y: rows, x:
// columns): k = 0 the low pixel, 1 the high one, 2 and 3 their weights (0
// for a sample past the box's grid), 4 whether the sample is within the
// grid (1 or 0). Where the grid is not fixed, a box whose grid exceeds G
// reports an index out of range.
Tensor roi_plan(const RoiSpec& s, const Tensor& rois, bool y_axis, int64_t bound, bool checked) {
  const int64_t pooled = y_axis ? s.out_h : s.out_w;
  return materialize(
      {5, s.rois, pooled * bound},
      [&](const std::vector<Var>& i) {
        Box<Expr> box = roi_box_expr(s, rois, i[1]);
        const RoiAxis<Expr>& a = y_axis ? box.y : box.x;
        Expr p = ir::cast(ir::DataType::f32(), ir::floordiv(i[2], Expr(bound)));
        Expr g = ir::cast(ir::DataType::f32(), ir::floormod(i[2], Expr(bound)));
        RoiTap<Expr> t = roi_tap(a, p, g, y_axis ? s.h : s.w);
        Expr within = g < a.grid;
        Expr w_low = ir::select(within, t.w_low, Expr(0.0f));
        // On a weight: every mode reads those (bound inference computes only
        // the plan entries that the sampling stage reads).
        if (checked) w_low = ir::check_index(a.grid <= Expr(static_cast<float>(bound)), w_low);
        return select_by(i[0], {t.low, t.high, w_low, ir::select(within, t.w_high, Expr(0.0f)),
                                ir::select(within, Expr(1.0f), Expr(0.0f))});
      },
      y_axis ? "RoiAlign.rows" : "RoiAlign.columns");
}

std::vector<Tensor> compute_roi_align(const Node& node, const ComputeInputs& in,
                                      const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& rois = required_tensor(node, in, 1);
  const Tensor& batch = required_tensor(node, in, 2);
  if (!(x->dtype == ir::DataType::f32()) || !(rois->dtype == ir::DataType::f32()))
    fail(node, "X and rois must be float32");
  const RoiSpec s = roi_spec(node, static_shape(x), static_shape(rois), static_shape(batch));
  check_out_type(node, out_types, 0, s.out_shape(), "float32");
  check_constant_indices(node, const_input(in, 2), 0, s.n);
  const Initializer* const_rois = const_input(in, 1);
  const auto [gh, gw] = roi_grid_bounds(s, const_rois);
  const bool checked = s.sampling_ratio == 0 && !const_rois;
  Tensor py = roi_plan(s, rois, true, gh, checked);
  Tensor px = roi_plan(s, rois, false, gw, checked);
  IterVar ry = ir::reduce_axis(Expr(gh), "ry"), rx = ir::reduce_axis(Expr(gw), "rx");
  const int64_t bh = gh, bw = gw;  // captured by the lambdas (no structured bindings there)
  Tensor acc = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr image = checked_run_time_index(ir::read(batch, {Expr(i[0])}), s.n);
        Expr sy = i[2] * Expr(bh) + ry->var, sx = i[3] * Expr(bw) + rx->var;
        auto ya = [&](int k) { return ir::read(py, {Expr(int64_t{k}), i[0], sy}); };
        auto xa = [&](int k) { return ir::read(px, {Expr(int64_t{k}), i[0], sx}); };
        auto pixel = [&](const Expr& yy, const Expr& xx) {
          return ir::read(x,
                          {image, i[1], clamp_index(ir::cast(ir::DataType::i64(), yy), 0, s.h - 1),
                           clamp_index(ir::cast(ir::DataType::i64(), xx), 0, s.w - 1)});
        };
        Expr v[4] = {ya(2) * xa(2) * pixel(ya(0), xa(0)), ya(2) * xa(3) * pixel(ya(0), xa(1)),
                     ya(3) * xa(2) * pixel(ya(1), xa(0)), ya(3) * xa(3) * pixel(ya(1), xa(1))};
        if (!s.max_mode) return ir::sum(v[0] + v[1] + v[2] + v[3], {ry, rx});
        Expr m = ir::max(ir::max(v[0], v[1]), ir::max(v[2], v[3]));
        Expr counted = ir::logical_and(ya(4) > Expr(0.0f), xa(4) > Expr(0.0f));
        return ir::reduce_max(ir::select(counted, m, Expr(-std::numeric_limits<float>::infinity())),
                              {ry, rx});
      },
      "RoiAlign.samples");
  Tensor y = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Box<Expr> box = roi_box_expr(s, rois, i[0]);
        Expr a = ir::read(acc, vars_to_exprs(i));
        if (s.max_mode)  // an empty grid (a half_pixel box of size <= 0) is 0
          return ir::select(ir::logical_and(box.y.grid >= Expr(1.0f), box.x.grid >= Expr(1.0f)), a,
                            Expr(0.0f));
        return a / ir::max(box.y.grid * box.x.grid, Expr(1.0f));
      },
      "RoiAlign");
  return {y};
}

// ---- MaxRoiPool --------------------------------------------------------------------------
// Y[r, c, ph, pw]: the maximum of X[b, c] over bin (ph, pw) of box r, rois[r]
// = (b, x1, y1, x2, y2). ONNX's reference (which ONNX Runtime's kernel
// follows): the corners scaled by spatial_scale and rounded half away from
// zero, the box at least one pixel, bin p of `pooled` along an axis from
// floor(p * size / pooled) to ceil((p + 1) * size / pooled) past the box's
// first pixel, clamped to the map; an empty bin is 0, and b = int(rois[r, 0])
// must be in [0, N).
//
// The kernel takes the maximum in two separable stages: over each bin's rows
// for every column of the box (contiguous in X: vectorized along the
// columns), then over each bin's columns. Their loops have fixed extents:
// the largest bin (and box width) of constant boxes, the whole map for boxes
// read at run time (a box may cover it, bins then as large as the map).

struct RoiPoolSpec {
  float spatial_scale = 1.0f;
  int64_t n = 0, c = 0, h = 0, w = 0, rois = 0, out_h = 0, out_w = 0;
  Shape out_shape() const { return {rois, c, out_h, out_w}; }
};

RoiPoolSpec roi_pool_spec(const Node& node, const Shape& x, const Shape& rois) {
  RoiPoolSpec s;
  const Shape pooled = attr_ints(node, "pooled_shape", {});
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1)
    fail(node, "pooled_shape must be two positive sizes (height, width); got " + shape_str(pooled));
  s.spatial_scale = attr_float(node, "spatial_scale", 1.0f);
  if (!(s.spatial_scale > 0.0f)) fail(node, "spatial_scale must be positive");
  if (x.size() != 4) fail(node, "X must be 4-D [N, C, H, W]; got " + shape_str(x));
  if (rois.size() != 2 || rois[1] != 5)
    fail(node, "rois must have shape [num_rois, 5] (batch index, x1, y1, x2, y2); got " +
                   shape_str(rois));
  if (x[0] < 1 || x[2] < 1 || x[3] < 1) fail(node, "X has an empty dim: " + shape_str(x));
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.rois = rois[0];
  s.out_h = pooled[0];
  s.out_w = pooled[1];
  return s;
}

// Half away from zero, as C's round() (ONNX's reference rounds so too).
template <typename F>
F round_away(const F& x) {
  F a = abs_of(x), f = floor_of(a);
  F r = pick(a - f >= F(0.5f), f + 1.0f, f);
  return pick(x < F(0.0f), F(0.0f) - r, r);
}

// One bin along an axis: its first pixel and its pixel count (0: empty).
template <typename F>
struct RoiBin {
  F start, extent;
};

// Bin p of `pooled` along an axis of `len` pixels of a box from `begin` to
// `end` (in the input's scale). A scaled corner is kept within 2^24 (where
// a float still holds every whole number; ONNX's integer arithmetic
// overflows on such boxes anyway) and a NaN one taken as 0, so that every
// step stays a whole number in range.
template <typename F>
RoiBin<F> roi_bin(const RoiPoolSpec& s, const F& begin, const F& end, const F& p, int64_t pooled,
                  int64_t len) {
  auto corner = [&](const F& c) {
    F v = c * s.spatial_scale;
    return round_away(pick(equal(v, v), clamp_of(v, -16777216.0f, 16777216.0f), F(0.0f)));
  };
  F lo = corner(begin), hi = corner(end);
  F bin = max_of(hi - lo + 1.0f, F(1.0f)) / static_cast<float>(pooled);
  const float n = static_cast<float>(len);
  F first = clamp_of(floor_of(p * bin) + lo, 0.0f, n);
  F last = clamp_of(ceil_of((p + 1.0f) * bin) + lo, 0.0f, n);
  return {first, max_of(last - first, F(0.0f))};
}

// Bin p of box r (its 5 values at `roi`) along the rows or the columns.
template <typename F>
RoiBin<F> roi_pool_bin(const RoiPoolSpec& s, const F* roi, bool rows, const F& p) {
  return rows ? roi_bin(s, roi[2], roi[4], p, s.out_h, s.h)
              : roi_bin(s, roi[1], roi[3], p, s.out_w, s.w);
}

// The batch index of a box, int(rois[r, 0]) in [0, N): an OpError naming it otherwise.
int64_t roi_image(const Node& node, const RoiPoolSpec& s, const float* roi, int64_t r) {
  if (!(roi[0] > -1.0f && roi[0] < static_cast<float>(s.n)))
    fail(node, "roi " + std::to_string(r) + " has batch index " + std::to_string(roi[0]) +
                   ", outside [0, " + std::to_string(s.n) + ")");
  return static_cast<int64_t>(roi[0]);
}

std::vector<Initializer> eval_max_roi_pool(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& rois = required_input(node, ins, 1);
  require_f32(node, x, "X");
  require_f32(node, rois, "rois");
  const RoiPoolSpec s = roi_pool_spec(node, x.type.shape, rois.type.shape);
  Initializer y = make_tensor("float32", s.out_shape());
  float* yp = data_of<float>(y);
  for (int64_t r = 0; r < s.rois; ++r) {
    const float* roi = data_of<float>(rois) + r * 5;
    const int64_t image = roi_image(node, s, roi, r);
    for (int64_t c = 0; c < s.c; ++c) {
      const float* plane = data_of<float>(x) + (image * s.c + c) * s.h * s.w;
      for (int64_t ph = 0; ph < s.out_h; ++ph) {
        const RoiBin<float> by = roi_pool_bin(s, roi, true, static_cast<float>(ph));
        for (int64_t pw = 0; pw < s.out_w; ++pw) {
          const RoiBin<float> bx = roi_pool_bin(s, roi, false, static_cast<float>(pw));
          float m = 0;  // an empty bin
          bool first = true;
          for (auto h = static_cast<int64_t>(by.start); h < by.start + by.extent; ++h)
            for (auto w = static_cast<int64_t>(bx.start); w < bx.start + bx.extent; ++w) {
              m = first ? plane[h * s.w + w] : std::max(m, plane[h * s.w + w]);
              first = false;
            }
          yp[((r * s.c + c) * s.out_h + ph) * s.out_w + pw] = m;
        }
      }
    }
  }
  return {std::move(y)};
}

// The kernel's loop extents: the rows of a bin, the columns of a bin, the
// columns of a box (from its first bin's first column).
struct RoiPoolBounds {
  int64_t bin_rows, bin_cols, box_cols;
};

RoiPoolBounds roi_pool_bounds(const Node& node, const RoiPoolSpec& s, const Initializer* rois) {
  if (!rois) return {s.h, s.w, s.w};
  RoiPoolBounds b{1, 1, 1};
  auto whole = [](float v) { return static_cast<int64_t>(v); };
  for (int64_t r = 0; r < s.rois; ++r) {
    const float* roi = data_of<float>(*rois) + r * 5;
    roi_image(node, s, roi, r);  // a bad constant index fails the build
    for (int64_t ph = 0; ph < s.out_h; ++ph)
      b.bin_rows =
          std::max(b.bin_rows, whole(roi_pool_bin(s, roi, true, static_cast<float>(ph)).extent));
    for (int64_t pw = 0; pw < s.out_w; ++pw)
      b.bin_cols =
          std::max(b.bin_cols, whole(roi_pool_bin(s, roi, false, static_cast<float>(pw)).extent));
    const RoiBin<float> first = roi_pool_bin(s, roi, false, 0.0f);
    const RoiBin<float> last = roi_pool_bin(s, roi, false, static_cast<float>(s.out_w - 1));
    b.box_cols = std::max(b.box_cols, whole(last.start + last.extent - first.start));
  }
  return b;
}

// plan[k, r, p] for bin p of box r along the rows or the columns: k = 0 its
// first pixel, 1 its pixel count, 2 its first pixel past the box's first
// (columns: where the row stage holds it).
Tensor roi_pool_plan(const RoiPoolSpec& s, const Tensor& rois, bool rows) {
  return materialize(
      {rows ? 2 : 3, s.rois, rows ? s.out_h : s.out_w},
      [&](const std::vector<Var>& i) {
        Expr roi[5];
        for (int k = 0; k < 5; ++k) roi[k] = ir::read(rois, {Expr(i[1]), Expr(int64_t{k})});
        RoiBin<Expr> b = roi_pool_bin(s, roi, rows, ir::cast(ir::DataType::f32(), i[2]));
        if (rows) return select_by(i[0], {b.start, b.extent});
        RoiBin<Expr> first = roi_pool_bin(s, roi, rows, Expr(0.0f));
        return select_by(i[0], {b.start, b.extent, b.start - first.start});
      },
      rows ? "MaxRoiPool.rows" : "MaxRoiPool.columns");
}

// The batch index of box r read at run time: outside [0, N) the kernel
// fails the run (KILN_STATUS_INDEX_OUT_OF_RANGE); the read stays in bounds.
Expr roi_image_expr(const RoiPoolSpec& s, const Tensor& rois, const Expr& r) {
  Expr v = ir::read(rois, {r, Expr(int64_t{0})});
  Expr in_range = ir::logical_and(v > Expr(-1.0f), v < Expr(static_cast<float>(s.n)));
  // An axis of one: the simplifier folds a clamp into [0, 0], and the check with it.
  if (s.n == 1) return ir::check_index(in_range, Expr(int64_t{0}));
  Expr k = ir::cast(ir::DataType::i64(), ir::select(in_range, v, Expr(0.0f)));
  return clamp_index(ir::check_index(in_range, k), 0, s.n - 1);
}

std::vector<Tensor> compute_max_roi_pool(const Node& node, const ComputeInputs& in,
                                         const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& rois = required_tensor(node, in, 1);
  if (!(x->dtype == ir::DataType::f32()) || !(rois->dtype == ir::DataType::f32()))
    fail(node, "X and rois must be float32");
  const RoiPoolSpec s = roi_pool_spec(node, static_shape(x), static_shape(rois));
  check_out_type(node, out_types, 0, s.out_shape(), "float32");
  const RoiPoolBounds b = roi_pool_bounds(node, s, const_input(in, 1));
  Tensor py = roi_pool_plan(s, rois, true), px = roi_pool_plan(s, rois, false);
  const Expr lowest(-std::numeric_limits<float>::infinity());
  auto plan = [](const Tensor& t, int64_t k, const Expr& r, const Expr& p) {
    return ir::cast(ir::DataType::i64(), ir::read(t, {Expr(k), r, p}));
  };
  // The maximum over bin ph's rows of column k of the box.
  IterVar ry = ir::reduce_axis(Expr(b.bin_rows), "ry");
  Tensor by_rows = ir::compute(
      shape_exprs({s.rois, s.c, s.out_h, b.box_cols}),
      [&](const std::vector<Var>& i) {
        Expr h = plan(py, 0, i[0], i[2]) + ry->var;
        Expr w = plan(px, 0, i[0], Expr(int64_t{0})) + i[3];
        Expr inside = ir::logical_and(ry->var < plan(py, 1, i[0], i[2]), w < Expr(s.w));
        Expr v = ir::read(x, {roi_image_expr(s, rois, i[0]), i[1], clamp_index(h, 0, s.h - 1),
                              clamp_index(w, 0, s.w - 1)});
        return ir::reduce_max(ir::select(inside, v, lowest), {ry});
      },
      "MaxRoiPool.by_rows");
  IterVar rx = ir::reduce_axis(Expr(b.bin_cols), "rx");
  Tensor m = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr k = clamp_index(plan(px, 2, i[0], i[3]) + rx->var, 0, b.box_cols - 1);
        Expr v = ir::read(by_rows, {i[0], i[1], i[2], k});
        return ir::reduce_max(ir::select(rx->var < plan(px, 1, i[0], i[3]), v, lowest), {rx});
      },
      "MaxRoiPool.by_columns");
  Tensor y = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr filled = ir::logical_and(plan(py, 1, i[0], i[2]) > Expr(int64_t{0}),
                                      plan(px, 1, i[0], i[3]) > Expr(int64_t{0}));
        return ir::select(filled, ir::read(m, vars_to_exprs(i)), Expr(0.0f));
      },
      "MaxRoiPool");
  return {y};
}

}  // namespace

void register_sampling_ops() {
  // Gathers at computed positions, each a plan stage and a sampling stage: opaque.
  register_op({"GridSample", OpPattern::kOpaque, eval_grid_sample, compute_grid_sample, {}});
  register_op({"RoiAlign", OpPattern::kOpaque, eval_roi_align, compute_roi_align, {}});
  register_op({"MaxRoiPool", OpPattern::kOpaque, eval_max_roi_pool, compute_max_roi_pool, {}});
}

}  // namespace kiln::graph
