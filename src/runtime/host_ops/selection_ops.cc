// Host operators whose output sizes depend on the input values: NonZero,
// Compress, Unique, TopK (with a run-time k), NonMaxSuppression and OneHot
// (with a run-time depth).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

void non_zero(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t n = in.numel(), rank = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> hits;
  dispatch_dtype(ctx, in.dtype, [&](auto t) {
    using T = decltype(t);
    const T* x = in.as<T>();
    for (int64_t i = 0; i < n; ++i)
      if (x[i] != T(0)) hits.push_back(i);
  });
  const int64_t count = static_cast<int64_t>(hits.size());
  // A scalar's one element has no coordinates: [0, count] (as ONNX Runtime).
  int64_t* out = ctx.allocate_as<int64_t>(0, {rank, count});
  Shape strides = host_strides(in.shape);
  for (int64_t k = 0; k < count; ++k)
    for (int64_t d = 0; d < rank; ++d) out[d * count + k] = hits[k] / strides[d] % in.shape[d];
}

// The input seen as [outer, extent, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
};
AxisView view_around(const Shape& shape, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < axis; ++d) v.outer *= shape[d];
  v.extent = shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

void compress(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const HostValue& cond = ctx.required(1);
  if (cond.shape.size() != 1) ctx.fail("condition must be 1-D, not " + host_shape_str(cond.shape));
  std::vector<bool> keep(cond.numel());
  dispatch_dtype(ctx, cond.dtype, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = 0; i < cond.numel(); ++i) keep[i] = cond.as<T>()[i] != T(0);
  });
  const int64_t elem = in.dtype.bytes();
  Shape flat = {in.numel()};
  const bool has_axis = ctx.has_attr("axis");
  const Shape& shape = has_axis ? in.shape : flat;
  const int64_t axis =
      has_axis ? host_axis(ctx, ctx.attr_int("axis", 0), static_cast<int64_t>(shape.size()), "axis")
               : 0;
  AxisView v = view_around(shape, axis);
  // Entries past the condition's length are dropped (ONNX: the condition may be shorter).
  std::vector<int64_t> taken;
  for (int64_t i = 0; i < std::min<int64_t>(v.extent, cond.numel()); ++i)
    if (keep[i]) taken.push_back(i);
  Shape out = shape;
  out[axis] = static_cast<int64_t>(taken.size());
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  const int64_t block = v.inner * elem;
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i : taken) {
      std::memcpy(dst, in.as<char>() + (o * v.extent + i) * block, block);
      dst += block;
    }
}

// Unique over elements (no axis) or over slices along `axis`.
void unique(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.has_attr("axis");
  Shape flat = {in.numel()};
  const Shape& shape = has_axis ? in.shape : flat;
  const int64_t axis =
      has_axis ? host_axis(ctx, ctx.attr_int("axis", 0), static_cast<int64_t>(shape.size()), "axis")
               : 0;
  AxisView v = view_around(shape, axis);
  // Slice s's element (o, j): in[(o * extent + s) * inner + j].
  auto compare = [&](int64_t a, int64_t b) -> int {
    int result = 0;
    dispatch_dtype(ctx, in.dtype, [&](auto t) {
      using T = decltype(t);
      const T* x = in.as<T>();
      for (int64_t o = 0; o < v.outer && result == 0; ++o)
        for (int64_t j = 0; j < v.inner; ++j) {
          T xa = x[(o * v.extent + a) * v.inner + j], xb = x[(o * v.extent + b) * v.inner + j];
          if (xa < xb) {
            result = -1;
            break;
          }
          if (xb < xa) {
            result = 1;
            break;
          }
        }
    });
    return result;
  };
  std::vector<int64_t> order(v.extent);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
  // Groups of equal slices in sorted order; each group's first index is its
  // first occurrence (stable sort).
  std::vector<int64_t> group_of(v.extent), firsts, counts;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare(order[k - 1], order[k]) != 0) {
      firsts.push_back(order[k]);
      counts.push_back(0);
    }
    group_of[order[k]] = static_cast<int64_t>(firsts.size()) - 1;
    ++counts.back();
  }
  const int64_t groups = static_cast<int64_t>(firsts.size());
  // Output position of each group: sorted order, or order of first occurrence.
  std::vector<int64_t> rank_of(groups);
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(groups);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return firsts[a] < firsts[b]; });
    for (int64_t p = 0; p < groups; ++p) rank_of[by_first[p]] = p;
  }
  std::vector<int64_t> group_at(groups);
  for (int64_t g = 0; g < groups; ++g) group_at[rank_of[g]] = g;

  Shape out = shape;
  out[axis] = groups;
  const int64_t elem = in.dtype.bytes(), block = v.inner * elem;
  char* y = static_cast<char*>(ctx.allocate(0, out));
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t p = 0; p < groups; ++p)
      std::memcpy(y + (o * groups + p) * block,
                  in.as<char>() + (o * v.extent + firsts[group_at[p]]) * block, block);
  int64_t* indices = ctx.allocate_as<int64_t>(1, {groups});
  int64_t* inverse = ctx.allocate_as<int64_t>(2, {v.extent});
  int64_t* count = ctx.allocate_as<int64_t>(3, {groups});
  for (int64_t p = 0; p < groups; ++p) {
    indices[p] = firsts[group_at[p]];
    count[p] = counts[group_at[p]];
  }
  for (int64_t s = 0; s < v.extent; ++s) inverse[s] = rank_of[group_of[s]];
}

void top_k(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", -1), rank, "axis");
  std::vector<int64_t> kv = ctx.input(1) ? ctx.int_values(1) : Shape{ctx.attr_int("k", 0)};
  if (kv.size() != 1) ctx.fail("k must hold one value");
  const int64_t k = kv[0];
  AxisView v = view_around(in.shape, axis);
  if (k < 0 || k > v.extent)
    ctx.fail("k = " + std::to_string(k) + " is out of range for an axis of " +
             std::to_string(v.extent));
  const bool largest = ctx.attr_int("largest", 1) != 0;
  Shape out = in.shape;
  out[axis] = k;
  dispatch_dtype(ctx, in.dtype, [&](auto t) {
    using T = decltype(t);
    const T* x = in.as<T>();
    T* values = ctx.allocate_as<T>(0, out);
    int64_t* indices = ctx.allocate_as<int64_t>(1, out);
    std::vector<int64_t> order(v.extent);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t j = 0; j < v.inner; ++j) {
        auto at = [&](int64_t i) { return x[(o * v.extent + i) * v.inner + j]; };
        std::iota(order.begin(), order.end(), 0);
        // Equal values: the lower index first (ONNX); NaN counts as largest.
        auto before = [&](int64_t a, int64_t b) {
          T xa = at(a), xb = at(b);
          bool na = xa != xa, nb = xb != xb;
          if (na || nb) return na && !nb ? largest : (!na && nb ? !largest : a < b);
          if (xa != xb) return largest ? xb < xa : xa < xb;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t r = 0; r < k; ++r) {
          values[(o * k + r) * v.inner + j] = at(order[r]);
          indices[(o * k + r) * v.inner + j] = order[r];
        }
      }
  });
}

// Greedy, class-wise NonMaxSuppression as ONNX defines it.
void non_max_suppression(HostOpContext& ctx) {
  const HostValue& boxes = ctx.required(0);
  const HostValue& scores = ctx.required(1);
  if (boxes.dtype != DType::f32() || scores.dtype != DType::f32())
    ctx.fail("boxes and scores must be float32");
  if (boxes.shape.size() != 3 || boxes.shape[2] != 4)
    ctx.fail("boxes must be [batches, boxes, 4], not " + host_shape_str(boxes.shape));
  if (scores.shape.size() != 3 || scores.shape[0] != boxes.shape[0] ||
      scores.shape[2] != boxes.shape[1])
    ctx.fail("scores " + host_shape_str(scores.shape) + " do not match boxes " +
             host_shape_str(boxes.shape));
  const int64_t batches = boxes.shape[0], count = boxes.shape[1], classes = scores.shape[1];
  int64_t max_out = 0;
  if (ctx.input(2) && ctx.input(2)->numel() > 0) max_out = ctx.int_values(2)[0];
  const float iou_threshold =
      ctx.input(3) && ctx.input(3)->numel() > 0 ? ctx.input(3)->as<float>()[0] : 0.f;
  const bool has_score_threshold = ctx.input(4) && ctx.input(4)->numel() > 0;
  const float score_threshold = has_score_threshold ? ctx.input(4)->as<float>()[0] : 0.f;
  const bool center = ctx.attr_int("center_point_box", 0) != 0;
  // Each box as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
  auto corners = [&](int64_t b, int64_t i, float c[4]) {
    const float* p = boxes.as<float>() + (b * count + i) * 4;
    if (center) {
      c[0] = p[1] - p[3] / 2, c[1] = p[0] - p[2] / 2, c[2] = p[1] + p[3] / 2,
      c[3] = p[0] + p[2] / 2;
    } else {
      c[0] = std::min(p[0], p[2]), c[1] = std::min(p[1], p[3]);
      c[2] = std::max(p[0], p[2]), c[3] = std::max(p[1], p[3]);
    }
  };
  auto suppresses = [&](const float a[4], const float b[4]) {
    float h = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    float w = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (h <= 0 || w <= 0) return false;
    float inter = h * w;
    float uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 && inter / uni > iou_threshold;
  };
  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<float> box(count * 4);
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < count; ++i) corners(b, i, &box[i * 4]);
    for (int64_t c = 0; c < classes && max_out > 0; ++c) {
      const float* s = scores.as<float>() + (b * classes + c) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool drop = false;
        for (int64_t j : kept)
          if (suppresses(&box[i * 4], &box[j * 4])) {
            drop = true;
            break;
          }
        if (!drop) kept.push_back(i);
      }
      for (int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  }
  const int64_t n = static_cast<int64_t>(selected.size()) / 3;
  int64_t* out = ctx.allocate_as<int64_t>(0, {n, 3});
  std::copy(selected.begin(), selected.end(), out);
}

// OneHot(indices, depth, values): out[..., d, ...] (d at `axis`) = values[1]
// where the index (truncated to an integer, wrapped once if negative) is d,
// else values[0]; an index outside [-depth, depth) gives a row of
// off-values, as ONNX specifies and the graph's reference does.
void one_hot(HostOpContext& ctx) {
  const HostValue& indices = ctx.required(0);
  const HostValue& values = ctx.required(2);
  const double depth_value = ctx.scalar_value(1);
  if (!(depth_value >= 1) || depth_value > static_cast<double>(int64_t{1} << 53) ||
      depth_value != std::floor(depth_value))
    ctx.fail("depth must be a positive integer, not " + std::to_string(depth_value));
  const int64_t depth = static_cast<int64_t>(depth_value);
  if (values.numel() != 2)
    ctx.fail("values must have two elements, not " + host_shape_str(values.shape));
  const int64_t rank = static_cast<int64_t>(indices.shape.size());
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", -1), rank + 1, "axis");
  Shape out = indices.shape;
  out.insert(out.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= indices.shape[d];
  for (int64_t d = axis; d < rank; ++d) inner *= indices.shape[d];
  // Each index as the position along the axis it marks, -1 for none.
  std::vector<int64_t> at(static_cast<size_t>(indices.numel()));
  dispatch_dtype(ctx, indices.dtype, [&](auto t) {
    using T = decltype(t);
    const T* x = indices.as<T>();
    for (size_t i = 0; i < at.size(); ++i) {
      const double v = static_cast<double>(x[i]);
      int64_t k = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(x[i]) : depth;
      if (k < 0) k += depth;
      at[i] = k >= 0 && k < depth ? k : -1;
    }
  });
  const int64_t elem = values.dtype.bytes();
  const char* off = values.as<char>();
  const char* on = off + elem;
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  // Fill with off-values, then set one element per index.
  const int64_t total = host_numel(out);
  for (int64_t i = 0; i < total; ++i) std::memcpy(dst + i * elem, off, elem);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t k = at[o * inner + i];
      if (k >= 0) std::memcpy(dst + ((o * depth + k) * inner + i) * elem, on, elem);
    }
}

}  // namespace

void register_selection_host_ops(std::map<std::string, HostOpFn>& t) {
  t["NonZero"] = non_zero;
  t["Compress"] = compress;
  t["Unique"] = unique;
  t["TopK"] = top_k;
  t["NonMaxSuppression"] = non_max_suppression;
  t["OneHot"] = one_hot;
}

}  // namespace kiln::runtime
