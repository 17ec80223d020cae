// Resize on the host, for scales or sizes fed at run time (or an input
// whose shape is known only then): modes nearest, linear and cubic, every
// coordinate_transformation_mode, exclude_outside, extrapolation_value,
// cubic_coeff_a, nearest_mode, and opset 18's axes and
// keep_aspect_ratio_policy, as ONNX's reference (onnx/reference/ops/
// op_resize.py) computes them.
//
// The reference interpolates each output point from the n nearest input
// points per axis (2 for nearest and linear, 4 for cubic; the input padded
// at its edges), weighted by per-axis coefficients. The weights separate by
// axis, so this resamples one axis at a time: each pass maps rows of
// [outer, in, inner] to [outer, out, inner] with the axis' precomputed
// (index, weight) lists, accumulating in double, contiguous along `inner`;
// axes that the resize leaves as they are (weight 1 on the same index) are
// skipped. Nearest copies elements instead (any dtype, bit exact).
// tf_crop_and_resize gives extrapolation_value where any axis' source
// coordinate falls outside the input, as the reference does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

std::vector<double> float_values(const HostOpContext& ctx, size_t i) {
  const HostValue& v = ctx.required(i);
  std::vector<double> out(static_cast<size_t>(v.numel()));
  dispatch_dtype(ctx, v.dtype, [&](auto t) {
    using T = decltype(t);
    for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<double>(v.as<T>()[k]);
  });
  return out;
}

struct ResizeParams {
  std::string mode, transform, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

// One axis: for each output coordinate the n input indices (clamped into the
// input, as its edge padding reads) and their weights; `outside` where
// tf_crop_and_resize's source coordinate leaves the input.
struct AxisMap {
  int64_t in = 0, out = 0;
  int n = 0;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool any_outside = false;

  bool identity() const {
    if (in != out || any_outside) return false;
    for (int64_t j = 0; j < out; ++j)
      for (int k = 0; k < n; ++k) {
        const double w = weight[j * n + k];
        if (w != 0 && (w != 1 || index[j * n + k] != j)) return false;
      }
    return true;
  }
};

// The input coordinate of output coordinate x (the reference's x_ori).
double source_coordinate(const HostOpContext& ctx, const ResizeParams& p, double x, double scale,
                         int64_t in, int64_t out, double roi_start, double roi_end) {
  const double out_width = scale * static_cast<double>(in);
  const std::string& m = p.transform;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out_width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (m == "align_corners")
    return out_width == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out_width - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;  // opsets 11 to 17
  if (m == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / out_width;
    const double offset = static_cast<double>(in) / 2 * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (m == "tf_crop_and_resize") {
    const double span = (roi_end - roi_start) * static_cast<double>(in - 1);
    const double at = out == 1 ? span / 2 : x * span / static_cast<double>(out - 1);
    return at + roi_start * static_cast<double>(in - 1);
  }
  ctx.fail("coordinate_transformation_mode '" + m + "' is not supported");
}

// The reference's coefficients for a point at `ratio` in (0, 1] past the
// window's second point.
void coefficients(const HostOpContext& ctx, const ResizeParams& p, double ratio, double* c) {
  if (p.mode == "linear") {
    c[0] = 1 - ratio, c[1] = ratio;
  } else if (p.mode == "cubic") {
    const double a = p.cubic_a, r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    c[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
    c[1] = ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1;
    c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
    c[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
  } else {              // nearest: one of the two neighbours
    bool upper = true;  // an integer coordinate (ratio 1) is the upper point itself
    if (ratio != 1) {
      const std::string& m = p.nearest_mode;
      if (m == "round_prefer_floor")
        upper = ratio > 0.5;
      else if (m == "round_prefer_ceil")
        upper = ratio >= 0.5;
      else if (m == "floor")
        upper = false;
      else if (m == "ceil")
        upper = true;
      else
        ctx.fail("nearest_mode '" + m + "' is not supported");
    }
    c[0] = upper ? 0 : 1, c[1] = upper ? 1 : 0;
  }
}

AxisMap axis_map(const HostOpContext& ctx, const ResizeParams& p, int64_t in, int64_t out,
                 double scale, double roi_start, double roi_end) {
  AxisMap a;
  a.in = in, a.out = out;
  a.n = p.mode == "cubic" ? 4 : 2;
  const int n = a.n, pad = n / 2;
  a.index.resize(static_cast<size_t>(out * n));
  a.weight.resize(static_cast<size_t>(out * n));
  a.outside.assign(static_cast<size_t>(out), 0);
  for (int64_t j = 0; j < out; ++j) {
    const double x =
        source_coordinate(ctx, p, static_cast<double>(j), scale, in, out, roi_start, roi_end);
    int64_t* idx = &a.index[j * n];
    double* w = &a.weight[j * n];
    if (p.transform == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) {
      a.outside[j] = 1, a.any_outside = true;
      std::fill(idx, idx + n, 0);
      std::fill(w, w + n, 0.0);
      continue;
    }
    // The reference's window: the n input points nearest x in the padded
    // input, the lower ones first on ties, so that x lies in (second, third]
    // of four or (first, second] of two.
    double base = std::floor(x), ratio = x - base;
    if (ratio == 0) base -= 1, ratio = 1;
    int64_t start = static_cast<int64_t>(base) - (n / 2 - 1);
    start = std::clamp<int64_t>(start, -pad, in + pad - n);
    coefficients(ctx, p, ratio, w);
    double sum = 0;
    for (int k = 0; k < n; ++k) {
      const int64_t i = start + k;
      if (p.exclude_outside && (i < 0 || i >= in)) w[k] = 0;
      sum += w[k];
      idx[k] = std::clamp<int64_t>(i, 0, in - 1);
    }
    if (p.exclude_outside)
      for (int k = 0; k < n; ++k) w[k] /= sum;
  }
  return a;
}

// dst[o, j, i] = sum_k w[j, k] * src[o, index[j, k], i].
void resample(const AxisMap& a, int64_t outer, int64_t inner, const double* src, double* dst) {
  const int n = a.n;
  for (int64_t o = 0; o < outer; ++o) {
    const double* s = src + o * a.in * inner;
    for (int64_t j = 0; j < a.out; ++j) {
      double* d = dst + (o * a.out + j) * inner;
      std::fill(d, d + inner, 0.0);
      for (int k = 0; k < n; ++k) {
        const double w = a.weight[j * n + k];
        if (w == 0) continue;
        const double* row = s + a.index[j * n + k] * inner;
        for (int64_t i = 0; i < inner; ++i) d[i] += w * row[i];
      }
    }
  }
}

// Calls f(flat output index, whether any axis is outside) over the output,
// row by row.
template <typename F>
void for_each_outside(const std::vector<AxisMap>& maps, const Shape& out, F&& f) {
  const size_t rank = out.size();
  const int64_t total = host_numel(out);
  Shape index(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) outside = outside || maps[d].outside[index[d]];
    f(e, outside);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) break;
      index[d] = 0;
    }
  }
}

void resize(HostOpContext& ctx) {
  const HostValue& x = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  ResizeParams p;
  p.mode = ctx.attr_string("mode", "nearest");
  p.transform = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  p.nearest_mode = ctx.attr_string("nearest_mode", "round_prefer_floor");
  p.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75);
  p.extrapolation = ctx.attr_float("extrapolation_value", 0.0);
  p.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic")
    ctx.fail("mode '" + p.mode + "' is not supported");
  if (ctx.attr_int("antialias", 0) != 0) ctx.fail("antialias is not supported");

  // The axes that scales, sizes and roi speak of (opset 18), else all.
  Shape axes = ctx.attr_ints("axes");
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  std::vector<bool> seen(rank, false);
  for (int64_t& a : axes) {
    a = host_axis(ctx, a, rank, "axis");
    if (seen[a]) ctx.fail("axis " + std::to_string(a) + " appears twice");
    seen[a] = true;
  }
  const size_t na = axes.size();
  const HostValue* scales_in = ctx.input(2);
  const HostValue* sizes_in = ctx.input(3);
  const bool has_scales = scales_in && scales_in->numel() > 0;
  const bool has_sizes = sizes_in && sizes_in->numel() > 0;
  if (has_scales == has_sizes) ctx.fail("exactly one of scales and sizes must be given");

  std::vector<double> scale(rank, 1.0), roi_start(rank, 0.0), roi_end(rank, 1.0);
  Shape out = x.shape;
  if (has_scales) {
    std::vector<double> s = float_values(ctx, 2);
    if (s.size() != na)
      ctx.fail("scales has " + std::to_string(s.size()) + " entries for " + std::to_string(na) +
               " axes");
    for (size_t i = 0; i < na; ++i) {
      if (!(s[i] > 0)) ctx.fail("scales entry " + std::to_string(s[i]) + " is not positive");
      scale[axes[i]] = s[i];
      out[axes[i]] = static_cast<int64_t>(std::floor(s[i] * static_cast<double>(x.shape[axes[i]])));
    }
  } else {
    Shape sizes = ctx.int_values(3);
    if (sizes.size() != na)
      ctx.fail("sizes has " + std::to_string(sizes.size()) + " entries for " + std::to_string(na) +
               " axes");
    for (int64_t s : sizes)
      if (s < 0) ctx.fail("sizes entry " + std::to_string(s) + " is negative");
    const std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        out[axes[i]] = sizes[i];
        scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(x.shape[axes[i]]);
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < na; ++i) {
        double r = static_cast<double>(sizes[i]) / static_cast<double>(x.shape[axes[i]]);
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (size_t i = 0; i < na; ++i) {
        scale[axes[i]] = s;
        out[axes[i]] =
            static_cast<int64_t>(std::floor(s * static_cast<double>(x.shape[axes[i]]) + 0.5));
      }
    } else {
      ctx.fail("keep_aspect_ratio_policy '" + policy + "' is not supported");
    }
  }
  if (p.transform == "tf_crop_and_resize") {
    if (!ctx.input(1) || ctx.input(1)->numel() == 0) ctx.fail("tf_crop_and_resize needs roi");
    std::vector<double> roi = float_values(ctx, 1);
    if (roi.size() != 2 * na)
      ctx.fail("roi has " + std::to_string(roi.size()) + " entries for " + std::to_string(na) +
               " axes");
    for (size_t i = 0; i < na; ++i) roi_start[axes[i]] = roi[i], roi_end[axes[i]] = roi[na + i];
  }
  for (int64_t d = 0; d < rank; ++d)
    if (x.shape[d] == 0 && out[d] > 0)
      ctx.fail("axis " + std::to_string(d) + " is empty and cannot be resized to " +
               std::to_string(out[d]));

  std::vector<AxisMap> maps;
  for (int64_t d = 0; d < rank; ++d)
    maps.push_back(axis_map(ctx, p, x.shape[d], out[d], scale[d], roi_start[d], roi_end[d]));
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  if (host_numel(out) == 0) return;
  const int64_t elem = x.dtype.bytes();

  if (p.mode == "nearest") {
    // Each output element is one input element: the source offset per
    // output coordinate and axis, then a row-by-row copy.
    std::vector<Shape> source(rank);
    Shape dense = host_strides(x.shape);
    for (int64_t d = 0; d < rank; ++d)
      for (int64_t j = 0; j < out[d]; ++j) {
        const AxisMap& a = maps[d];
        const int k = a.weight[j * a.n] != 0 ? 0 : 1;
        source[d].push_back(a.index[j * a.n + k] * dense[d]);
      }
    std::vector<char> fill(static_cast<size_t>(elem), 0);
    bool any_outside = false;
    for (const AxisMap& a : maps) any_outside = any_outside || a.any_outside;
    if (any_outside)
      dispatch_dtype(ctx, x.dtype, [&](auto t) {
        auto v = static_cast<decltype(t)>(p.extrapolation);
        std::memcpy(fill.data(), &v, sizeof(v));
      });
    const int64_t total = host_numel(out);
    Shape index(rank, 0);
    const char* src = x.as<char>();
    if (rank == 0) {
      std::memcpy(dst, src, elem);
      return;
    }
    for (int64_t e = 0; e < total; e += out[rank - 1]) {
      int64_t base = 0;
      bool outside = false;
      for (int64_t d = 0; d + 1 < rank; ++d) {
        base += source[d][index[d]];
        outside = outside || maps[d].outside[index[d]];
      }
      const Shape& last = source[rank - 1];
      const AxisMap& lm = maps[rank - 1];
      for (int64_t j = 0; j < out[rank - 1]; ++j)
        std::memcpy(dst + (e + j) * elem,
                    outside || lm.outside[j] ? fill.data() : src + (base + last[j]) * elem, elem);
      for (int64_t d = rank - 1; d-- > 0;) {
        if (++index[d] < out[d]) break;
        index[d] = 0;
      }
    }
    return;
  }

  dispatch_dtype(ctx, x.dtype, [&](auto t) {
    using T = decltype(t);
    if (x.dtype.code == DTypeCode::Bool) ctx.fail("a bool input is not supported");
    const T* xs = x.as<T>();
    std::vector<double> cur(xs, xs + x.numel()), next;
    Shape shape = x.shape;
    for (int64_t d = 0; d < rank; ++d) {
      if (maps[d].identity()) continue;
      int64_t outer = 1, inner = 1;
      for (int64_t e = 0; e < d; ++e) outer *= shape[e];
      for (int64_t e = d + 1; e < rank; ++e) inner *= shape[e];
      next.assign(static_cast<size_t>(outer * out[d] * inner), 0.0);
      resample(maps[d], outer, inner, cur.data(), next.data());
      cur.swap(next);
      shape[d] = out[d];
    }
    T* y = reinterpret_cast<T*>(dst);
    for (size_t e = 0; e < cur.size(); ++e) y[e] = static_cast<T>(cur[e]);
    bool any_outside = false;
    for (const AxisMap& a : maps) any_outside = any_outside || a.any_outside;
    if (any_outside)
      for_each_outside(maps, out, [&](int64_t e, bool outside) {
        if (outside) y[e] = static_cast<T>(p.extrapolation);
      });
  });
}

}  // namespace

void register_resize_host_ops(std::map<std::string, HostOpFn>& t) { t["Resize"] = resize; }

}  // namespace kiln::runtime
