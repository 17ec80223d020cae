// Host operators that move data: shapes and views computed from run-time
// values (Reshape, Expand, Tile, Slice, Pad, Squeeze, Unsqueeze, Split,
// ConstantOfShape, Range) and the data movement that reads such tensors
// (Concat, Gather, Transpose, Flatten, Identity, Shape, Size, Cast).
//
// Every copy goes through copy_strided: the innermost dimension is one
// memcpy where the source is contiguous there, so large copies run at memory
// speed, not element by element.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

// dst (dense, row-major over `shape`) = src[offset + sum(index_d * strides_d)]
// (strides in elements, may be 0 or negative).
void copy_strided(char* dst, const char* src, const Shape& shape, const Shape& strides,
                  int64_t offset, int64_t elem) {
  if (host_numel(shape) == 0) return;
  const size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(dst, src + offset * elem, elem);
    return;
  }
  const int64_t inner = shape[rank - 1], inner_stride = strides[rank - 1];
  Shape index(rank, 0);
  int64_t src_pos = offset;
  for (;;) {
    if (inner_stride == 1) {
      std::memcpy(dst, src + src_pos * elem, inner * elem);
      dst += inner * elem;
    } else {
      for (int64_t i = 0; i < inner; ++i, dst += elem)
        std::memcpy(dst, src + (src_pos + i * inner_stride) * elem, elem);
    }
    // Next row: increment the index over the outer dimensions.
    size_t d = rank - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      src_pos += strides[d];
      if (++index[d] < shape[d]) break;
      src_pos -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

void copy_all(HostOpContext& ctx, const HostValue& in, Shape out_shape) {
  void* out = ctx.allocate(0, std::move(out_shape));
  std::memcpy(out, in.data, in.nbytes());
}

// ONNX's multidirectional broadcast of a and b's shapes.
Shape broadcast_shapes(const HostOpContext& ctx, const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1)
      ctx.fail("shapes " + host_shape_str(a) + " and " + host_shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides that read `in_shape` broadcast to `out_shape` (0 on broadcast axes).
Shape broadcast_strides(const Shape& in_shape, const Shape& out_shape) {
  Shape dense = host_strides(in_shape), s(out_shape.size(), 0);
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i) s[lead + i] = in_shape[i] == 1 ? 0 : dense[i];
  return s;
}

void expand_to(HostOpContext& ctx, const HostValue& in, const Shape& out_shape) {
  char* out = static_cast<char*>(ctx.allocate(0, out_shape));
  copy_strided(out, in.as<char>(), out_shape, broadcast_strides(in.shape, out_shape), 0,
               in.dtype.bytes());
}

void reshape(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  Shape want = ctx.int_values(1);
  const bool allow_zero = ctx.attr_int("allowzero", 0) != 0;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == 0 && !allow_zero) {
      if (i >= in.shape.size())
        ctx.fail("shape entry " + std::to_string(i) + " is 0 past the input's rank");
      want[i] = in.shape[i];
    }
    if (want[i] == -1) {
      if (infer >= 0) ctx.fail("shape " + host_shape_str(ctx.int_values(1)) + " has two -1");
      infer = static_cast<int64_t>(i);
    } else if (want[i] < 0) {
      ctx.fail("shape entry " + std::to_string(want[i]) + " is negative");
    } else {
      known *= want[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || in.numel() % known != 0)
      ctx.fail("cannot reshape " + host_shape_str(in.shape) + " to " +
               host_shape_str(ctx.int_values(1)));
    want[infer] = in.numel() / known;
  }
  if (host_numel(want) != in.numel())
    ctx.fail("cannot reshape " + host_shape_str(in.shape) + " (" + std::to_string(in.numel()) +
             " elements) to " + host_shape_str(want));
  copy_all(ctx, in, want);
}

// Unsqueeze/Squeeze take their axes from input 1 (opset 13) or the attribute.
Shape axes_of(const HostOpContext& ctx) {
  return ctx.input(1) ? ctx.int_values(1) : ctx.attr_ints("axes");
}

void unsqueeze(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  Shape axes = axes_of(ctx);
  const int64_t rank = static_cast<int64_t>(in.shape.size() + axes.size());
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    int64_t k = host_axis(ctx, a, rank, "axis");
    if (inserted[k]) ctx.fail("axis " + std::to_string(a) + " appears twice");
    inserted[k] = true;
  }
  Shape out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(inserted[i] ? 1 : in.shape[next++]);
  copy_all(ctx, in, out);
}

void squeeze(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  std::vector<bool> drop(rank, false);
  if (!ctx.input(1) && !ctx.has_attr("axes")) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = in.shape[i] == 1;
  } else {
    for (int64_t a : axes_of(ctx)) {
      int64_t k = host_axis(ctx, a, rank, "axis");
      if (in.shape[k] != 1)
        ctx.fail("axis " + std::to_string(a) + " of " + host_shape_str(in.shape) + " is not 1");
      drop[k] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(in.shape[i]);
  copy_all(ctx, in, out);
}

void flatten(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -rank || axis > rank) ctx.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in.shape[i];
  copy_all(ctx, in, {outer, outer == 0 ? 0 : in.numel() / std::max<int64_t>(outer, 1)});
}

// Any value: a tensor, a sequence or an optional (copied: the output owns its memory).
void identity(HostOpContext& ctx) { ctx.copy_to_output(0, ctx.required(0)); }

void expand(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  expand_to(ctx, in, broadcast_shapes(ctx, in.shape, ctx.int_values(1)));
}

// Tile: the output [r0*d0, r1*d1, ...] is, in memory, [r0, d0, r1, d1, ...]
// reading the input with stride 0 on every r axis.
void tile(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  Shape repeats = ctx.int_values(1);
  if (repeats.size() != in.shape.size())
    ctx.fail("repeats has " + std::to_string(repeats.size()) + " entries for an input of rank " +
             std::to_string(in.shape.size()));
  Shape dense = host_strides(in.shape), split_shape, split_strides, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    if (repeats[i] < 0) ctx.fail("repeats entry " + std::to_string(repeats[i]) + " is negative");
    split_shape.insert(split_shape.end(), {repeats[i], in.shape[i]});
    split_strides.insert(split_strides.end(), {0, dense[i]});
    out.push_back(repeats[i] * in.shape[i]);
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  copy_strided(dst, in.as<char>(), split_shape, split_strides, 0, in.dtype.bytes());
}

// ONNX Slice (opset 10+): starts, ends, axes, steps as inputs.
void slice(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  Shape starts = ctx.int_values(1), ends = ctx.int_values(2);
  Shape axes, steps;
  if (ctx.input(3)) {
    axes = ctx.int_values(3);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  steps = ctx.input(4) ? ctx.int_values(4) : Shape(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    ctx.fail("starts, ends, axes and steps differ in length");
  Shape out = in.shape, dense = host_strides(in.shape), strides = dense;
  int64_t offset = 0;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = host_axis(ctx, axes[i], rank, "axis");
    if (seen[a]) ctx.fail("axis " + std::to_string(axes[i]) + " appears twice");
    seen[a] = true;
    const int64_t dim = in.shape[a], step = steps[i];
    if (step == 0) ctx.fail("a step is 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (dim == 0) {
      start = end = 0;  // an empty axis stays empty, whatever the step
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t n = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    out[a] = std::max<int64_t>(n, 0);
    strides[a] = dense[a] * step;
    if (out[a] > 0) offset += start * dense[a];
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  copy_strided(dst, in.as<char>(), out, strides, offset, in.dtype.bytes());
}

void transpose(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const size_t rank = in.shape.size();
  Shape perm = ctx.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) ctx.fail("perm has the wrong length");
  Shape dense = host_strides(in.shape), out, strides;
  for (int64_t p : perm) {
    int64_t a = host_axis(ctx, p, static_cast<int64_t>(rank), "perm entry");
    out.push_back(in.shape[a]);
    strides.push_back(dense[a]);
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  copy_strided(dst, in.as<char>(), out, strides, 0, in.dtype.bytes());
}

void concat(HostOpContext& ctx) {
  const HostValue& first = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", 0), rank, "axis");
  Shape out = first.shape;
  out[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const HostValue& v = ctx.required(i);
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis &&
          (static_cast<int64_t>(v.shape.size()) != rank || v.shape[d] != first.shape[d]))
        ctx.fail("input " + std::to_string(i) + " is " + host_shape_str(v.shape) +
                 ", which does not concatenate with " + host_shape_str(first.shape));
    out[axis] += v.shape[axis];
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  int64_t outer = 1, elem = first.dtype.bytes();
  for (int64_t d = 0; d < axis; ++d) outer *= out[d];
  int64_t inner = host_numel(out) / std::max<int64_t>(outer, 1) / std::max<int64_t>(out[axis], 1);
  int64_t row = out[axis] * inner * elem, at = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const HostValue& v = ctx.required(i);
    int64_t chunk = v.shape[axis] * inner * elem;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * row + at, v.as<char>() + o * chunk, chunk);
    at += chunk;
  }
}

void split(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", 0), rank, "axis");
  const int64_t dim = in.shape[axis];
  const int64_t parts = static_cast<int64_t>(ctx.num_outputs());
  Shape sizes = ctx.input(1) ? ctx.int_values(1) : ctx.attr_ints("split");
  if (sizes.empty()) {
    // Equal parts; the last one smaller when the axis does not divide (opset 18).
    int64_t each = (dim + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::clamp<int64_t>(dim - p * each, 0, each));
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (static_cast<int64_t>(sizes.size()) != parts || total != dim)
    ctx.fail("split " + host_shape_str(sizes) + " does not divide an axis of " +
             std::to_string(dim) + " into " + std::to_string(parts) + " outputs");
  int64_t outer = 1, elem = in.dtype.bytes();
  for (int64_t d = 0; d < axis; ++d) outer *= in.shape[d];
  int64_t inner = dim == 0 ? 0 : in.numel() / std::max<int64_t>(outer, 1) / dim;
  int64_t at = 0;
  for (int64_t p = 0; p < parts; ++p) {
    Shape out = in.shape;
    out[axis] = sizes[p];
    char* dst = static_cast<char*>(ctx.allocate(p, out));
    int64_t chunk = sizes[p] * inner * elem;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * chunk, in.as<char>() + o * dim * inner * elem + at, chunk);
    at += chunk;
  }
}

void gather(HostOpContext& ctx) {
  const HostValue& data = ctx.required(0);
  Shape indices = ctx.int_values(1);
  const Shape& index_shape = ctx.required(1).shape;
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (rank == 0) ctx.fail("data must have rank 1 or more");
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", 0), rank, "axis");
  const int64_t dim = data.shape[axis], elem = data.dtype.bytes();
  Shape out(data.shape.begin(), data.shape.begin() + axis);
  out.insert(out.end(), index_shape.begin(), index_shape.end());
  out.insert(out.end(), data.shape.begin() + axis + 1, data.shape.end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= data.shape[d];
  for (int64_t& i : indices) {
    if (i < -dim || i >= dim)
      ctx.fail("index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) +
               " of " + std::to_string(dim));
    if (i < 0) i += dim;
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  const int64_t block = inner * elem;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : indices) {
      std::memcpy(dst, data.as<char>() + (o * dim + i) * block, block);
      dst += block;
    }
}

// Pad (opset 11+): pads [begin..., end...], optional constant value and axes.
void pad(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  Shape pads_in = ctx.input(1) ? ctx.int_values(1) : ctx.attr_ints("pads");
  Shape axes;
  if (ctx.input(3)) {
    for (int64_t a : ctx.int_values(3)) axes.push_back(host_axis(ctx, a, rank, "axis"));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  if (pads_in.size() != 2 * axes.size())
    ctx.fail("pads has " + std::to_string(pads_in.size()) + " entries for " +
             std::to_string(axes.size()) + " axes");
  Shape begin(rank, 0), end(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[axes[i]] = pads_in[i];
    end[axes[i]] = pads_in[i + axes.size()];
  }
  const std::string mode = ctx.attr_string("mode", "constant");
  Shape out(rank);
  for (int64_t d = 0; d < rank; ++d) {
    out[d] = in.shape[d] + begin[d] + end[d];
    if (out[d] < 0) ctx.fail("pads make axis " + std::to_string(d) + " negative");
    if (mode != "constant" && in.shape[d] == 0 && out[d] > 0)
      ctx.fail(mode + " padding of an empty axis");
  }
  // Per axis, the source index of every output index (-1: the constant).
  std::vector<Shape> source(rank);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = in.shape[d];
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t i = o - begin[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = -1;
        } else if (mode == "edge") {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else if (mode == "reflect") {
          if (n == 1) {
            i = 0;
          } else {
            const int64_t period = 2 * (n - 1);
            i = ((i % period) + period) % period;
            if (i >= n) i = period - i;
          }
        } else if (mode == "wrap") {
          i = ((i % n) + n) % n;
        } else {
          ctx.fail("mode '" + mode + "' is not supported");
        }
      }
      source[d].push_back(i);
    }
  }
  const int64_t elem = in.dtype.bytes();
  std::vector<char> fill(static_cast<size_t>(elem), 0);
  if (ctx.input(2) && ctx.input(2)->numel() > 0) std::memcpy(fill.data(), ctx.input(2)->data, elem);
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  const int64_t total = host_numel(out);
  Shape dense = host_strides(in.shape), index(rank, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t src = 0;
    bool constant = false;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t i = source[d][index[d]];
      if (i < 0) constant = true;
      src += i * dense[d];
    }
    std::memcpy(dst + k * elem, constant ? fill.data() : in.as<char>() + src * elem, elem);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == out[d]; --d) index[d] = 0;
  }
}

void constant_of_shape(HostOpContext& ctx) {
  Shape out = ctx.int_values(0);
  const double value = ctx.attr_float("value", 0.0);
  void* dst = ctx.allocate(0, out);
  const int64_t n = host_numel(out);
  dispatch_dtype(ctx, ctx.output_dtype(0), [&](auto t) {
    using T = decltype(t);
    std::fill_n(static_cast<T*>(dst), n, static_cast<T>(value));
  });
}

void range(HostOpContext& ctx) {
  const DType dtype = ctx.required(0).dtype;
  dispatch_dtype(ctx, dtype, [&](auto t) {
    using T = decltype(t);
    const T start = ctx.required(0).as<T>()[0], limit = ctx.required(1).as<T>()[0],
            delta = ctx.required(2).as<T>()[0];
    if (delta == T(0)) ctx.fail("delta is 0");
    double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                             static_cast<double>(delta));
    const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
    T* dst = ctx.allocate_as<T>(0, {n});
    // ONNX's loop: each element is the previous plus delta.
    T x = start;
    for (int64_t i = 0; i < n; ++i, x = static_cast<T>(x + delta)) dst[i] = x;
  });
}

void shape_of(HostOpContext& ctx) {
  const Shape& s = ctx.required(0).shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  int64_t* dst = ctx.allocate_as<int64_t>(0, {end - start});
  for (int64_t i = start; i < end; ++i) dst[i - start] = s[i];
}

void size_of(HostOpContext& ctx) { *ctx.allocate_as<int64_t>(0, {}) = ctx.required(0).numel(); }

void cast(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const DType to = ctx.output_dtype(0);
  void* dst = ctx.allocate(0, in.shape);
  const int64_t n = in.numel();
  const bool to_bool = to.code == DTypeCode::Bool;
  dispatch_dtype(ctx, in.dtype, [&](auto s) {
    using S = decltype(s);
    const S* src = in.as<S>();
    dispatch_dtype(ctx, to, [&](auto d) {
      using D = decltype(d);
      D* out = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i)
        out[i] = to_bool ? static_cast<D>(src[i] != S(0)) : static_cast<D>(src[i]);
    });
  });
}

}  // namespace

void register_shape_host_ops(std::map<std::string, HostOpFn>& t) {
  t["Reshape"] = reshape;
  t["Unsqueeze"] = unsqueeze;
  t["Squeeze"] = squeeze;
  t["Flatten"] = flatten;
  t["Identity"] = identity;
  t["Expand"] = expand;
  t["Tile"] = tile;
  t["Slice"] = slice;
  t["Transpose"] = transpose;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Gather"] = gather;
  t["Pad"] = pad;
  t["ConstantOfShape"] = constant_of_shape;
  t["Range"] = range;
  t["Shape"] = shape_of;
  t["Size"] = size_of;
  t["Cast"] = cast;
}

}  // namespace kiln::runtime
