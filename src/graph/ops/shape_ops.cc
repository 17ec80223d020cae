// Shape and injective operators: Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Concat, Split, Slice, Gather, Expand, Pad, Resize, and the
// shape producers Shape and ConstantOfShape (evaluate only). The indexing
// operators (GatherElements, GatherND, the scatters, OneHot, ...) are in
// indexing.cc.
//
// Except for Resize's linear mode, every evaluate() here moves whole elements
// and never looks at their values, so one implementation serves every dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers
using ir::Expr;
using Inputs = std::vector<const Initializer*>;
using Outputs = std::vector<TensorType>;

void reg(const std::string& op, EvaluateFn ev, ComputeFn cp, std::vector<int> consts = {}) {
  register_op(OpDef{op, OpPattern::kInjective, std::move(ev), std::move(cp), std::move(consts)});
}

// out[idx] = in[src(idx)] for every multi-index idx of out_shape; a negative
// src writes `fill` (one element's bytes, zeros when null).
template <typename F>
Initializer map_elements(const Initializer& in, const Shape& out_shape, F src,
                         const uint8_t* fill = nullptr) {
  Initializer out = make_tensor(in.type.dtype, out_shape);
  size_t es = dtype_size(in.type.dtype);
  int64_t total = numel(out_shape);
  Shape idx(out_shape.size(), 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t s = src(idx);
    uint8_t* d = out.data.data() + o * es;
    if (s >= 0)
      std::memcpy(d, in.data.data() + s * es, es);
    else if (fill)
      std::memcpy(d, fill, es);
    for (size_t a = out_shape.size(); a-- > 0;) {
      if (++idx[a] < out_shape[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

// Same elements in row-major order, new shape.
Initializer reshaped(const Initializer& in, Shape shape) {
  Initializer out = in;
  out.type.shape = std::move(shape);
  return out;
}

// The axes of a reshape split into groups whose element counts agree: input
// axes [in_begin, in_end) hold the same elements as output axes [out_begin,
// out_end), and no smaller split exists. E.g. [1, 48, 28, 28] -> [1, 2, 24, 28,
// 28] (ShuffleNet's channel shuffle): {1}, {48 | 2, 24}, {28}, {28}.
struct ReshapeGroup {
  size_t in_begin, in_end, out_begin, out_end;
};

std::vector<ReshapeGroup> reshape_groups(const Shape& in, const Shape& out) {
  std::vector<ReshapeGroup> groups;
  size_t k = 0, l = 0;
  while (k < in.size() || l < out.size()) {
    ReshapeGroup g{k, k, l, l};
    int64_t pk = 1, pl = 1;
    if (k < in.size()) pk *= in[k++];
    if (l < out.size()) pl *= out[l++];
    while (pk != pl) {
      if (pk < pl)
        pk *= in[k++];
      else
        pl *= out[l++];
    }
    g.in_end = k;
    g.out_end = l;
    groups.push_back(g);
  }
  return groups;
}

// The one axis of [begin, end) whose extent is not 1 (kNoAxis when all are 1),
// or nothing when there are several.
constexpr size_t kNoAxis = static_cast<size_t>(-1);
std::optional<size_t> single_non_unit_axis(const Shape& shape, size_t begin, size_t end) {
  size_t axis = kNoAxis;
  for (size_t a = begin; a < end; ++a) {
    if (shape[a] == 1) continue;
    if (axis != kNoAxis) return std::nullopt;
    axis = a;
  }
  return axis;
}

// Row-major reinterpretation of x as out_shape. Index math per group of axes
// (reshape_groups): an axis that a group maps one to one needs no division, so
// the innermost axes a reshape leaves alone stay unit-stride in the generated
// loop (a whole-tensor flatten turned them into div/mod, and the vector loop
// into gathers: ShuffleNet's shuffles ran at 3 GB/s).
ir::Tensor compute_reshape(const Node& node, const ir::Tensor& x, const Shape& out_shape) {
  Shape in_shape = static_shape(x);
  if (numel(in_shape) != numel(out_shape))
    fail(node, "cannot reshape " + shape_str(in_shape) + " to " + shape_str(out_shape));
  std::vector<ReshapeGroup> groups;
  if (numel(in_shape) > 0) groups = reshape_groups(in_shape, out_shape);
  return ir::compute(
      shape_exprs(out_shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> out_idx = vars_to_exprs(i);
        if (groups.empty()) return read_flat(x, flatten_index(out_idx, out_shape));
        std::vector<Expr> idx(in_shape.size());
        for (const ReshapeGroup& g : groups) {
          // One axis of the same extent on each side, with unit axes around it.
          std::optional<size_t> in_axis = single_non_unit_axis(in_shape, g.in_begin, g.in_end);
          std::optional<size_t> out_axis = single_non_unit_axis(out_shape, g.out_begin, g.out_end);
          if (in_axis && out_axis) {
            for (size_t a = g.in_begin; a < g.in_end; ++a) idx[a] = Expr(int64_t{0});
            if (*in_axis != kNoAxis) idx[*in_axis] = out_idx[*out_axis];
            continue;
          }
          Shape in_part(in_shape.begin() + g.in_begin, in_shape.begin() + g.in_end);
          Shape out_part(out_shape.begin() + g.out_begin, out_shape.begin() + g.out_end);
          std::vector<Expr> out_part_idx(out_idx.begin() + g.out_begin,
                                         out_idx.begin() + g.out_end);
          std::vector<Expr> in_part_idx =
              unflatten_index(flatten_index(out_part_idx, out_part), in_part);
          std::copy(in_part_idx.begin(), in_part_idx.end(), idx.begin() + g.in_begin);
        }
        return ir::read(x, idx);
      },
      node.op_type);
}

// A reshape-like operator: evaluate computes the shape, compute takes it from
// shape inference (out_types).
void reg_reshape_like(const std::string& op, std::function<Shape(const Node&, const Inputs&)> shape,
                      std::vector<int> consts) {
  reg(
      op,
      [shape](const Node& node, const Inputs& ins) {
        return std::vector<Initializer>{reshaped(required_input(node, ins, 0), shape(node, ins))};
      },
      [](const Node& node, const ComputeInputs& in, const Outputs& out_types) {
        return std::vector<ir::Tensor>{
            compute_reshape(node, required_tensor(node, in, 0), out_types.at(0).shape)};
      },
      std::move(consts));
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze ---------------------------------------

Shape reshape_shape(const Node& node, const Inputs& ins) {
  const Shape& in = required_input(node, ins, 0).type.shape;
  Shape out = to_ints(node, required_input(node, ins, 1));
  bool allowzero = attr_int(node, "allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowzero) {
      if (i >= in.size()) fail(node, "shape has 0 at axis " + std::to_string(i) + " beyond rank");
      out[i] = in[i];
    } else if (out[i] == -1) {
      if (infer >= 0) fail(node, "shape has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    } else if (out[i] < 0) {
      fail(node, "invalid shape entry " + std::to_string(out[i]));
    }
    known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || numel(in) % known != 0)
      fail(node, "cannot infer -1 reshaping " + shape_str(in) + " to " + shape_str(out));
    out[infer] = numel(in) / known;
  }
  if (numel(out) != numel(in))
    fail(node, "cannot reshape " + shape_str(in) + " to " + shape_str(out));
  return out;
}

Shape flatten_shape(const Node& node, const Inputs& ins) {
  const Shape& in = required_input(node, ins, 0).type.shape;
  int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = attr_int(node, "axis", 1);
  if (axis < -r || axis > r) fail(node, "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  return {numel(Shape(in.begin(), in.begin() + axis)), numel(Shape(in.begin() + axis, in.end()))};
}

// Axes from the `axes` attribute (opset < 13) or input 1 (opset >= 13); nullopt when neither.
std::optional<Shape> axes_of(const Node& node, const Inputs& ins, size_t input) {
  if (auto a = attr_ints(node, "axes")) return *a;
  if (const Initializer* t = optional_input(ins, input)) return to_ints(node, *t);
  return std::nullopt;
}

Shape squeeze_shape(const Node& node, const Inputs& ins) {
  const Shape& in = required_input(node, ins, 0).type.shape;
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  // An empty axes list squeezes every unit axis, as ONNX Runtime does.
  if (auto axes = axes_of(node, ins, 1); axes && !axes->empty()) {
    for (int64_t a : *axes) {
      a = normalize_axis(node, a, r);
      if (in[a] != 1)
        fail(node, "cannot squeeze axis " + std::to_string(a) + " of " + shape_str(in));
      drop[a] = true;
    }
  } else {
    for (size_t a = 0; a < in.size(); ++a) drop[a] = in[a] == 1;
  }
  Shape out;
  for (size_t a = 0; a < in.size(); ++a)
    if (!drop[a]) out.push_back(in[a]);
  return out;
}

Shape unsqueeze_shape(const Node& node, const Inputs& ins) {
  const Shape& in = required_input(node, ins, 0).type.shape;
  auto axes = axes_of(node, ins, 1);
  if (!axes) fail(node, "axes are missing");
  int64_t r = static_cast<int64_t>(in.size() + axes->size());
  std::vector<bool> unit(r, false);
  for (int64_t a : *axes) {
    a = normalize_axis(node, a, r);
    if (unit[a]) fail(node, "axis " + std::to_string(a) + " repeated");
    unit[a] = true;
  }
  Shape out;
  size_t k = 0;
  for (int64_t a = 0; a < r; ++a) out.push_back(unit[a] ? 1 : in[k++]);
  return out;
}

// ---- Transpose -------------------------------------------------------------------

Shape perm_of(const Node& node, size_t rank) {
  Shape perm;
  if (auto p = attr_ints(node, "perm")) {
    perm = *p;
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  std::vector<bool> seen(rank, false);
  if (perm.size() != rank) fail(node, "perm has " + std::to_string(perm.size()) + " entries");
  for (int64_t& p : perm) {
    p = normalize_axis(node, p, static_cast<int64_t>(rank));
    if (seen[p]) fail(node, "perm is not a permutation");
    seen[p] = true;
  }
  return perm;
}

std::vector<Initializer> eval_transpose(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Shape& in = x.type.shape;
  Shape perm = perm_of(node, in.size()), out(in.size()), st = strides_of(in);
  for (size_t i = 0; i < in.size(); ++i) out[i] = in[perm[i]];
  return {map_elements(x, out, [&](const Shape& idx) {
    int64_t s = 0;
    for (size_t i = 0; i < idx.size(); ++i) s += idx[i] * st[perm[i]];
    return s;
  })};
}

std::vector<ir::Tensor> compute_transpose(const Node& node, const ComputeInputs& in,
                                          const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  Shape perm = perm_of(node, x->ndim());
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> idx(perm.size());
        for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = i[k];
        return ir::read(x, idx);
      },
      "Transpose")};
}

// ---- Concat, Split ----------------------------------------------------------------

std::vector<Initializer> eval_concat(const Node& node, const Inputs& ins) {
  if (ins.empty()) fail(node, "no inputs");
  const Initializer& first = required_input(node, ins, 0);
  int64_t rank = static_cast<int64_t>(first.type.shape.size());
  auto axis_attr = node.attr<int64_t>("axis");
  if (!axis_attr) fail(node, "attribute 'axis' is missing");
  int64_t axis = normalize_axis(node, *axis_attr, rank);
  Shape out = first.type.shape;
  out[axis] = 0;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Initializer& t = required_input(node, ins, k);
    if (t.type.dtype != first.type.dtype) fail(node, "inputs have different dtypes");
    bool ok = t.type.shape.size() == out.size();
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || t.type.shape[d] == out[d];
    if (!ok)
      fail(node, "input shapes " + shape_str(first.type.shape) + " and " + shape_str(t.type.shape) +
                     " do not concatenate on axis " + std::to_string(axis));
    out[axis] += t.type.shape[axis];
  }
  Initializer result = make_tensor(first.type.dtype, out);
  size_t es = dtype_size(first.type.dtype);
  int64_t outer = numel(Shape(out.begin(), out.begin() + axis));
  int64_t inner = numel(Shape(out.begin() + axis + 1, out.end()));
  uint8_t* d = result.data.data();
  for (int64_t o = 0; o < outer; ++o) {
    for (auto* t : ins) {
      size_t bytes = static_cast<size_t>(t->type.shape[axis] * inner) * es;
      if (bytes) std::memcpy(d, t->data.data() + o * bytes, bytes);  // empty inputs have no data
      d += bytes;
    }
  }
  return {result};
}

// Reads of inputs past their range along the axis are clamped: LLVM's select
// evaluates both arms, so every arm must stay in bounds.
std::vector<ir::Tensor> compute_concat(const Node& node, const ComputeInputs& in,
                                       const Outputs& out_types) {
  const Shape& out = out_types.at(0).shape;
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), static_cast<int64_t>(out.size()));
  std::vector<std::pair<ir::Tensor, int64_t>> parts;  // tensor, offset along axis
  int64_t off = 0;
  for (size_t k = 0; k < in.tensors.size(); ++k) {
    const ir::Tensor& t = required_tensor(node, in, k);
    int64_t len = static_cast<int64_t>(static_shape(t)[axis]);
    if (len > 0) parts.push_back({t, off});
    off += len;
  }
  if (off != out[axis]) fail(node, "inputs do not add up to the output shape");
  return {ir::compute(
      shape_exprs(out),
      [&](const std::vector<ir::Var>& i) {
        Expr r;
        for (size_t k = 0; k < parts.size(); ++k) {
          auto& [t, start] = parts[k];
          int64_t len = static_shape(t)[axis];
          std::vector<Expr> idx = vars_to_exprs(i);
          idx[axis] = parts.size() == 1 ? idx[axis] - Expr(start)
                                        : clamp_index(idx[axis] - Expr(start), 0, len - 1);
          Expr v = ir::read(t, idx);
          r = r ? ir::select(Expr(i[axis]) >= Expr(start), v, r) : v;
        }
        return r;
      },
      "Concat")};
}

// Split sizes: input 1 (opset >= 13), the `split` attribute (< 13), the
// `num_outputs` attribute (18: ceil-sized parts, the last smaller), or equal parts.
Shape split_sizes(const Node& node, int64_t dim, const Initializer* split) {
  int64_t n = static_cast<int64_t>(node.outputs.size());
  Shape sizes;
  if (split && split->type.num_elements() > 0) {
    sizes = to_ints(node, *split);
  } else if (auto s = attr_ints(node, "split")) {
    sizes = *s;
  } else if (auto no = node.attr<int64_t>("num_outputs")) {
    if (*no != n) fail(node, "num_outputs differs from the number of outputs");
    int64_t part = (dim + n - 1) / n;
    for (int64_t k = 0; k < n; ++k)
      sizes.push_back(std::max<int64_t>(0, std::min(part, dim - k * part)));
  } else {
    if (dim % n != 0)
      fail(node, "axis of size " + std::to_string(dim) + " does not split into " +
                     std::to_string(n) + " equal parts");
    sizes.assign(n, dim / n);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail(node, "negative split size");
    total += s;
  }
  if (static_cast<int64_t>(sizes.size()) != n || total != dim)
    fail(node, "split sizes do not match the axis size " + std::to_string(dim) + " and " +
                   std::to_string(n) + " outputs");
  return sizes;
}

std::vector<Initializer> eval_split(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), x.type.shape.size());
  Shape sizes = split_sizes(node, x.type.shape[axis], optional_input(ins, 1));
  Shape st = strides_of(x.type.shape);
  std::vector<Initializer> outs;
  int64_t start = 0;
  for (int64_t len : sizes) {
    Shape os = x.type.shape;
    os[axis] = len;
    outs.push_back(map_elements(x, os, [&](const Shape& idx) {
      int64_t s = start * st[axis];
      for (size_t d = 0; d < idx.size(); ++d) s += idx[d] * st[d];
      return s;
    }));
    start += len;
  }
  return outs;
}

std::vector<ir::Tensor> compute_split(const Node& node, const ComputeInputs& in,
                                      const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), x->ndim());
  std::vector<ir::Tensor> outs;
  int64_t start = 0;
  for (size_t k = 0; k < out_types.size(); ++k) {
    outs.push_back(ir::compute(
        shape_exprs(out_types[k].shape),
        [&](const std::vector<ir::Var>& i) {
          std::vector<Expr> idx = vars_to_exprs(i);
          idx[axis] = idx[axis] + Expr(start);
          return ir::read(x, idx);
        },
        "Split" + std::to_string(k)));
    start += out_types[k].shape[axis];
  }
  return outs;
}

// ---- Slice -------------------------------------------------------------------------

// Per axis of the data: first element, step and output length.
struct SliceSpec {
  Shape start, step, len;
};

SliceSpec slice_spec(const Node& node, const Shape& in, const Inputs& c) {
  size_t r = in.size();
  SliceSpec s{Shape(r, 0), Shape(r, 1), in};
  Shape starts = to_ints(node, required_input(node, c, 1));
  Shape ends = to_ints(node, required_input(node, c, 2));
  Shape axes, steps;
  if (const Initializer* a = optional_input(c, 3)) axes = to_ints(node, *a);
  if (const Initializer* t = optional_input(c, 4)) steps = to_ints(node, *t);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail(node, "starts, ends, axes and steps differ in length");
  std::vector<bool> seen(r, false);
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = normalize_axis(node, axes[k], static_cast<int64_t>(r));
    if (seen[a]) fail(node, "axis " + std::to_string(a) + " repeated");
    seen[a] = true;
    int64_t dim = in[a], step = steps[k];
    if (step == 0) fail(node, "step 0");
    // Clamp as ONNX specifies: [0, dim] for positive steps, [-1, dim-1] for negative.
    auto adjust = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -dim ? lo : v + dim;  // also avoids overflow at INT64_MIN
      return std::clamp(v, lo, hi);
    };
    int64_t b, e;
    if (step > 0) {
      b = adjust(starts[k], 0, dim);
      e = adjust(ends[k], 0, dim);
    } else {
      b = adjust(starts[k], -1, dim - 1);
      e = adjust(ends[k], -1, dim - 1);
    }
    int64_t n = step > 0 ? (e - b + step - 1) / step : (b - e + (-step) - 1) / (-step);
    s.start[a] = b;
    s.step[a] = step;
    s.len[a] = std::max<int64_t>(0, n);
  }
  return s;
}

std::vector<Initializer> eval_slice(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  SliceSpec s = slice_spec(node, x.type.shape, ins);
  Shape st = strides_of(x.type.shape);
  return {map_elements(x, s.len, [&](const Shape& idx) {
    int64_t o = 0;
    for (size_t d = 0; d < idx.size(); ++d) o += (s.start[d] + idx[d] * s.step[d]) * st[d];
    return o;
  })};
}

std::vector<ir::Tensor> compute_slice(const Node& node, const ComputeInputs& in,
                                      const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  SliceSpec s = slice_spec(node, static_shape(x), in.constants);
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < i.size(); ++d) {
          Expr e = i[d];
          if (s.step[d] != 1) e = e * Expr(s.step[d]);
          if (s.start[d] != 0) e = e + Expr(s.start[d]);
          idx.push_back(e);
        }
        return ir::read(x, idx);
      },
      "Slice")};
}

// ---- Gather ------------------------------------------------------------------------

std::vector<Initializer> eval_gather(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& ind = required_input(node, ins, 1);
  const Shape& in = x.type.shape;
  if (in.empty()) fail(node, "data must have rank >= 1");
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), in.size());
  Shape idx = to_ints(node, ind);
  int64_t dim = in[axis];
  for (int64_t& i : idx) i = checked_index(node, i, axis, dim);
  Shape out(in.begin(), in.begin() + axis);
  out.insert(out.end(), ind.type.shape.begin(), ind.type.shape.end());
  out.insert(out.end(), in.begin() + axis + 1, in.end());
  int64_t outer = numel(Shape(in.begin(), in.begin() + axis));
  int64_t inner = numel(Shape(in.begin() + axis + 1, in.end()));
  size_t es = dtype_size(x.type.dtype), row = static_cast<size_t>(inner) * es;
  Initializer result = make_tensor(x.type.dtype, out);
  uint8_t* d = result.data.data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx) {
      std::memcpy(d, x.data.data() + (o * dim + i) * row, row);
      d += row;
    }
  return {result};
}

// Constant indices are checked here (an index out of range fails the build,
// naming the node); indices read at run time by checked_run_time_index
// (op_util.h): negative ones wrap once, one out of range fails the run, and
// the read is clamped into the axis so that it never leaves the data.
std::vector<ir::Tensor> compute_gather(const Node& node, const ComputeInputs& in,
                                       const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& ind = required_tensor(node, in, 1);
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), x->ndim());
  int64_t dim = static_shape(x)[axis];
  check_constant_indices(node, const_input(in, 1), axis, dim);
  size_t ri = ind->ndim();
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> ii(i.begin() + axis, i.begin() + axis + ri);
        std::vector<Expr> idx(i.begin(), i.begin() + axis);
        idx.push_back(checked_run_time_index(ir::read(ind, ii), dim));
        idx.insert(idx.end(), i.begin() + axis + ri, i.end());
        return ir::read(x, idx);
      },
      "Gather")};
}

// ---- Expand ------------------------------------------------------------------------

std::vector<Initializer> eval_expand(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  Shape target = to_ints(node, required_input(node, ins, 1));
  Shape out = broadcast_shapes(node, {x.type.shape, target});
  Initializer result = make_tensor(x.type.dtype, out);
  size_t es = dtype_size(x.type.dtype);
  for_each_broadcast(out, {x.type.shape}, [&](int64_t o, const std::vector<int64_t>& offs) {
    std::memcpy(result.data.data() + o * es, x.data.data() + offs[0] * es, es);
  });
  return {result};
}

std::vector<ir::Tensor> compute_expand(const Node& node, const ComputeInputs& in,
                                       const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) { return broadcast_read(x, i); }, "Expand")};
}

// ---- Tile --------------------------------------------------------------------------
// out[i] = x[i mod x.shape], each dim repeated repeats[d] times.

Shape tile_shape(const Node& node, const Shape& x, const Initializer& repeats) {
  Shape r = to_ints(node, repeats);
  if (r.size() != x.size())
    fail(node, "repeats has " + std::to_string(r.size()) + " values for rank " +
                   std::to_string(x.size()));
  Shape out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (r[d] < 0) fail(node, "negative repeats");
    out.push_back(x[d] * r[d]);
  }
  return out;
}

std::vector<Initializer> eval_tile(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Shape& xs = x.type.shape;
  Initializer y = make_tensor(x.type.dtype, tile_shape(node, xs, required_input(node, ins, 1)));
  const size_t es = dtype_size(x.type.dtype);
  const Shape& ys = y.type.shape;
  Shape idx(ys.size(), 0);
  for (int64_t o = 0; o < y.type.num_elements(); ++o) {
    int64_t from = 0;
    for (size_t d = 0; d < ys.size(); ++d) from = from * xs[d] + idx[d] % xs[d];
    std::memcpy(y.data.data() + o * es, x.data.data() + from * es, es);
    for (size_t d = ys.size(); d-- > 0;) {
      if (++idx[d] < ys[d]) break;
      idx[d] = 0;
    }
  }
  return {y};
}

std::vector<ir::Tensor> compute_tile(const Node& node, const ComputeInputs& in,
                                     const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const Shape xs = static_shape(x);
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<ir::Expr> at;
        for (size_t d = 0; d < xs.size(); ++d)
          at.push_back(xs[d] == 1 ? ir::Expr(ir::make_const(i[d].dtype(), 0))
                                  : ir::floormod(i[d], ir::make_const(i[d].dtype(), xs[d])));
        return ir::read(x, at);
      },
      "Tile")};
}

// ---- Shape, ConstantOfShape --------------------------------------------------------

// Uses only the input's type: the constant folder passes a tensor without data.
std::vector<Initializer> eval_shape(const Node& node, const Inputs& ins) {
  const Shape& s = required_input(node, ins, 0).type.shape;
  int64_t r = static_cast<int64_t>(s.size());
  auto clampi = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  int64_t b = clampi(attr_int(node, "start", 0));
  int64_t e = clampi(attr_int(node, "end", r));
  Shape dims(s.begin() + b, s.begin() + std::max(b, e));
  Initializer out = make_tensor("int64", {static_cast<int64_t>(dims.size())});
  if (!dims.empty()) std::memcpy(out.data.data(), dims.data(), dims.size() * sizeof(int64_t));
  return {out};
}

std::vector<Initializer> eval_constant_of_shape(const Node& node, const Inputs& ins) {
  Shape shape = to_ints(node, required_input(node, ins, 0));
  for (int64_t d : shape)
    if (d < 0) fail(node, "negative dimension in " + shape_str(shape));
  Initializer value = make_tensor("float32", {1});
  if (auto v = node.attr<Initializer>("value")) {
    if (v->type.num_elements() != 1) fail(node, "value must have one element");
    value = *v;
  }
  Initializer out = make_tensor(value.type.dtype, shape);
  size_t es = dtype_size(value.type.dtype);
  for (size_t o = 0; o < out.data.size(); o += es)
    std::memcpy(out.data.data() + o, value.data.data(), es);
  return {out};
}

// ---- Range (evaluate only) -------------------------------------------------------------
// Exporters build masks and index tables with it from constants (Swin's
// shifted-window attention mask: Range, Mod, ScatterND, Not): it folds at
// build time, and a node whose inputs are not constants is named at lowering.
// ScatterND lives in indexing.cc.

std::vector<Initializer> eval_range(const Node& node, const Inputs& ins) {
  const Initializer& start = required_input(node, ins, 0);
  const Initializer& limit = required_input(node, ins, 1);
  const Initializer& delta = required_input(node, ins, 2);
  for (const Initializer* t : {&start, &limit, &delta})
    if (t->type.num_elements() != 1 || t->type.dtype != start.type.dtype)
      fail(node, "start, limit and delta must be scalars of one dtype");
  return {visit_dtype(node, start.type.dtype, [&](auto tag) -> Initializer {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail(node, "bool is not supported");
    } else {
      const T s = data_of<T>(start)[0], l = data_of<T>(limit)[0], d = data_of<T>(delta)[0];
      if (d == T(0)) fail(node, "delta is zero");
      const double steps = std::ceil((static_cast<double>(l) - s) / static_cast<double>(d));
      const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(steps));
      Initializer out = make_tensor(start.type.dtype, {n});
      T* o = data_of<T>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(s + static_cast<T>(i) * d);
      return out;
    }
  })};
}

// ---- DepthToSpace, SpaceToDepth (evaluate only) -----------------------------------
// graph/passes/depth_to_space.cc rewrites both into Reshape, Transpose, Reshape.

std::vector<Initializer> eval_depth_space(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Shape& xs = x.type.shape;
  const int64_t b = attr_int(node, "blocksize", 0);
  if (xs.size() != 4) fail(node, "input must have rank 4, got " + shape_str(xs));
  if (b < 1) fail(node, "blocksize must be positive");
  const bool to_space = node.op_type == "DepthToSpace";
  const bool crd = attr_string(node, "mode", "DCR") == "CRD";
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  if (to_space ? C % (b * b) != 0 : H % b != 0 || W % b != 0)
    fail(node, "blocksize " + std::to_string(b) + " does not divide " + shape_str(xs));
  const Shape ys =
      to_space ? Shape{N, C / (b * b), H * b, W * b} : Shape{N, C * b * b, H / b, W / b};
  Initializer y = make_tensor(x.type.dtype, ys);
  const size_t es = dtype_size(x.type.dtype);
  // Every (depth channel, row, column) of the deep side and where it lies on the wide side.
  const int64_t deep_c = to_space ? C : ys[1], wide_c = to_space ? ys[1] : C;
  const int64_t deep_h = to_space ? H : ys[2], deep_w = to_space ? W : ys[3];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t dc = 0; dc < deep_c; ++dc)
      for (int64_t h = 0; h < deep_h; ++h)
        for (int64_t w = 0; w < deep_w; ++w) {
          const int64_t block = crd ? dc % (b * b) : dc / wide_c;
          const int64_t c = crd ? dc / (b * b) : dc % wide_c;
          const int64_t wh = h * b + block / b, ww = w * b + block % b;
          const int64_t deep = ((n * deep_c + dc) * deep_h + h) * deep_w + w;
          const int64_t wide = ((n * wide_c + c) * deep_h * b + wh) * deep_w * b + ww;
          const int64_t from = to_space ? deep : wide, to = to_space ? wide : deep;
          std::memcpy(y.data.data() + to * es, x.data.data() + from * es, es);
        }
  return {y};
}

// ---- Pad -----------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

struct PadSpec {
  PadMode mode;
  Shape begin, end, out;
};

PadSpec pad_spec(const Node& node, const Shape& in, const Inputs& c) {
  size_t r = in.size();
  std::string m = attr_string(node, "mode", "constant");
  PadSpec p{PadMode::kConstant, Shape(r, 0), Shape(r, 0), in};
  if (m == "reflect")
    p.mode = PadMode::kReflect;
  else if (m == "edge")
    p.mode = PadMode::kEdge;
  else if (m != "constant")
    fail(node, "mode '" + m + "' is not supported");
  Shape pads;
  if (auto a = attr_ints(node, "pads"))
    pads = *a;
  else
    pads = to_ints(node, required_input(node, c, 1));
  Shape axes;
  if (const Initializer* a = optional_input(c, 3)) axes = to_ints(node, *a);
  if (axes.empty())
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  if (pads.size() != 2 * axes.size())
    fail(node, "pads has " + std::to_string(pads.size()) + " entries for " +
                   std::to_string(axes.size()) + " axes");
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = normalize_axis(node, axes[k], static_cast<int64_t>(r));
    p.begin[a] = pads[k];
    p.end[a] = pads[k + axes.size()];
    p.out[a] = in[a] + p.begin[a] + p.end[a];
    if (p.out[a] < 0) fail(node, "pads remove more than axis " + std::to_string(a) + " holds");
    if (p.mode != PadMode::kConstant && in[a] == 0 && p.out[a] > 0)
      fail(node, "cannot pad an empty axis in mode " + m);
  }
  return p;
}

// Source index along one axis of size dim for reflect mode (numpy 'reflect').
int64_t reflect_index(int64_t i, int64_t dim) {
  if (dim == 1) return 0;
  int64_t period = 2 * (dim - 1);
  int64_t m = ((i % period) + period) % period;
  return m >= dim ? period - m : m;
}

std::vector<Initializer> eval_pad(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Shape& in = x.type.shape;
  PadSpec p = pad_spec(node, in, ins);
  Initializer fill = make_tensor(x.type.dtype, {});
  if (const Initializer* v = optional_input(ins, 2)) {
    if (v->type.dtype != x.type.dtype || v->type.num_elements() != 1)
      fail(node, "constant_value must be one element of the data's dtype");
    fill = *v;
  } else if (auto f = node.attr<float>("value")) {
    fill = make_tensor("float32", {});
    std::memcpy(fill.data.data(), &*f, 4);
    if (x.type.dtype != "float32") fail(node, "attribute value needs float32 data");
  }
  Shape st = strides_of(in);
  return {map_elements(
      x, p.out,
      [&](const Shape& idx) {
        int64_t s = 0;
        for (size_t d = 0; d < idx.size(); ++d) {
          int64_t i = idx[d] - p.begin[d];
          if (i < 0 || i >= in[d]) {
            if (p.mode == PadMode::kConstant) return int64_t{-1};
            i = p.mode == PadMode::kEdge ? std::clamp<int64_t>(i, 0, in[d] - 1)
                                         : reflect_index(i, in[d]);
          }
          s += i * st[d];
        }
        return s;
      },
      fill.data.data())};
}

std::vector<ir::Tensor> compute_pad(const Node& node, const ComputeInputs& in,
                                    const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  Shape shape = static_shape(x);
  PadSpec p = pad_spec(node, shape, in.constants);
  double value = 0;
  if (const Initializer* v = const_input(in, 2))
    value = to_doubles(node, *v).at(0);
  else if (auto f = node.attr<float>("value"))
    value = *f;
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        Expr inside;
        std::vector<Expr> idx;
        for (size_t d = 0; d < i.size(); ++d) {
          Expr e = i[d];
          if (p.begin[d] == 0 && p.end[d] <= 0) {  // only cropped at the end: always in range
            idx.push_back(e);
            continue;
          }
          e = e - Expr(p.begin[d]);
          int64_t n = shape[d];
          if (p.mode == PadMode::kConstant) {
            Expr ok = ir::logical_and(e >= Expr(int64_t{0}), e < Expr(n));
            inside = inside ? ir::logical_and(inside, ok) : ok;
            e = clamp_index(e, 0, n - 1);
          } else if (p.mode == PadMode::kEdge || n == 1) {
            e = clamp_index(e, 0, n - 1);
          } else {
            int64_t period = 2 * (n - 1);
            Expr m = ir::floormod(e, Expr(period));
            e = ir::select(m >= Expr(n), Expr(period) - m, m);
          }
          idx.push_back(e);
        }
        Expr v = ir::read(x, idx);
        return inside ? ir::select(inside, v, ir::make_const(x->dtype, value)) : v;
      },
      "Pad")};
}

// ---- Resize ----------------------------------------------------------------------------

enum class Coord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeSpec {
  bool linear = false;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  Shape in, out;
  std::vector<float> scale;  // per axis
  // Whether axis d is resized at all (else output index = input index).
  bool resized(size_t d) const { return in[d] != out[d] || scale[d] != 1.0f; }
};

ResizeSpec resize_spec(const Node& node, const Shape& in, const Inputs& c) {
  ResizeSpec s;
  s.in = in;
  size_t r = in.size();
  std::string mode = attr_string(node, "mode", "nearest");
  if (mode == "linear" || mode == "bilinear")
    s.linear = true;
  else if (mode != "nearest")
    fail(node, "mode '" + mode + "' is not supported");
  std::string ct = attr_string(node, "coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel")
    s.coord = Coord::kHalfPixel;
  else if (ct == "pytorch_half_pixel")
    s.coord = Coord::kPytorchHalfPixel;
  else if (ct == "align_corners")
    s.coord = Coord::kAlignCorners;
  else if (ct == "asymmetric")
    s.coord = Coord::kAsymmetric;
  else if (ct == "tf_half_pixel_for_nn")
    s.coord = Coord::kTfHalfPixelForNn;
  else
    fail(node, "coordinate_transformation_mode '" + ct + "' is not supported");
  std::string nm = attr_string(node, "nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor")
    s.nearest = Nearest::kRoundPreferFloor;
  else if (nm == "round_prefer_ceil")
    s.nearest = Nearest::kRoundPreferCeil;
  else if (nm == "floor")
    s.nearest = Nearest::kFloor;
  else if (nm == "ceil")
    s.nearest = Nearest::kCeil;
  else
    fail(node, "nearest_mode '" + nm + "' is not supported");
  if (attr_int(node, "exclude_outside", 0) != 0) fail(node, "exclude_outside=1 is not supported");
  if (attr_int(node, "antialias", 0) != 0) fail(node, "antialias=1 is not supported");
  Shape axes;
  if (auto a = attr_ints(node, "axes")) axes = *a;
  if (axes.empty())
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  s.out = in;
  s.scale.assign(r, 1.0f);
  const Initializer* scales = optional_input(c, 2);
  const Initializer* sizes = optional_input(c, 3);
  if (scales && scales->type.num_elements() > 0) {
    std::vector<double> v = to_doubles(node, *scales);
    if (v.size() != axes.size()) fail(node, "scales has the wrong length");
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normalize_axis(node, axes[k], static_cast<int64_t>(r));
      s.scale[a] = static_cast<float>(v[k]);
      if (!(s.scale[a] > 0)) fail(node, "scales must be positive");
      s.out[a] = static_cast<int64_t>(std::floor(static_cast<double>(in[a]) * s.scale[a]));
    }
  } else if (sizes && sizes->type.num_elements() > 0) {
    if (attr_string(node, "keep_aspect_ratio_policy", "stretch") != "stretch")
      fail(node, "keep_aspect_ratio_policy other than stretch is not supported");
    Shape v = to_ints(node, *sizes);
    if (v.size() != axes.size()) fail(node, "sizes has the wrong length");
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = normalize_axis(node, axes[k], static_cast<int64_t>(r));
      if (v[k] <= 0 || in[a] == 0) fail(node, "sizes must be positive");
      s.out[a] = v[k];
      s.scale[a] = static_cast<float>(v[k]) / static_cast<float>(in[a]);
    }
  } else {
    fail(node, "needs scales or sizes");
  }
  return s;
}

// Input coordinate of output index i along axis d, in float32 as kernels compute it.
float resize_coord(const ResizeSpec& s, size_t d, int64_t i) {
  float x = static_cast<float>(i), sc = s.scale[d];
  switch (s.coord) {
    case Coord::kHalfPixel: return (x + 0.5f) / sc - 0.5f;
    case Coord::kPytorchHalfPixel: return s.out[d] > 1 ? (x + 0.5f) / sc - 0.5f : 0.0f;
    case Coord::kAlignCorners:
      return s.out[d] == 1 ? 0.0f
                           : x * static_cast<float>(s.in[d] - 1) / static_cast<float>(s.out[d] - 1);
    case Coord::kAsymmetric: return x / sc;
    case Coord::kTfHalfPixelForNn: return (x + 0.5f) / sc;
  }
  return 0;
}

Expr resize_coord_expr(const ResizeSpec& s, size_t d, const Expr& i) {
  Expr x = ir::cast(ir::DataType::f32(), i);
  float sc = s.scale[d];
  switch (s.coord) {
    case Coord::kHalfPixel: return (x + 0.5f) / Expr(sc) - 0.5f;
    case Coord::kPytorchHalfPixel: return s.out[d] > 1 ? (x + 0.5f) / Expr(sc) - 0.5f : Expr(0.0f);
    case Coord::kAlignCorners:
      return s.out[d] == 1 ? Expr(0.0f)
                           : x * Expr(static_cast<float>(s.in[d] - 1)) /
                                 Expr(static_cast<float>(s.out[d] - 1));
    case Coord::kAsymmetric: return x / Expr(sc);
    case Coord::kTfHalfPixelForNn: return (x + 0.5f) / Expr(sc);
  }
  return x;
}

int64_t nearest_index(const ResizeSpec& s, float x, int64_t n) {
  float r = s.nearest == Nearest::kRoundPreferFloor  ? std::ceil(x - 0.5f)
            : s.nearest == Nearest::kRoundPreferCeil ? std::floor(x + 0.5f)
            : s.nearest == Nearest::kFloor           ? std::floor(x)
                                                     : std::ceil(x);
  return std::clamp(static_cast<int64_t>(r), int64_t{0}, n - 1);
}

Expr nearest_index_expr(const ResizeSpec& s, const Expr& x, int64_t n) {
  Expr r = s.nearest == Nearest::kRoundPreferFloor  ? ir::ceil(x - 0.5f)
           : s.nearest == Nearest::kRoundPreferCeil ? ir::floor(x + 0.5f)
           : s.nearest == Nearest::kFloor           ? ir::floor(x)
                                                    : ir::ceil(x);
  return clamp_index(ir::cast(ir::DataType::i64(), r), 0, n - 1);
}

std::vector<Initializer> eval_resize(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  ResizeSpec s = resize_spec(node, x.type.shape, ins);
  size_t r = s.in.size();
  Shape st = strides_of(s.in);
  if (!s.linear) {
    return {map_elements(x, s.out, [&](const Shape& idx) {
      int64_t o = 0;
      for (size_t d = 0; d < r; ++d) {
        int64_t i = s.resized(d) ? nearest_index(s, resize_coord(s, d, idx[d]), s.in[d]) : idx[d];
        o += i * st[d];
      }
      return o;
    })};
  }
  if (x.type.dtype != "float32") fail(node, "linear mode needs float32 data");
  const float* src = data_of<float>(x);
  Initializer out = make_tensor("float32", s.out);
  float* dst = data_of<float>(out);
  std::vector<size_t> axes;
  for (size_t d = 0; d < r; ++d)
    if (s.resized(d)) axes.push_back(d);
  Shape idx(r, 0);
  std::vector<int64_t> lo(r), hi(r);
  std::vector<float> w(r);
  for (int64_t o = 0; o < numel(s.out); ++o) {
    for (size_t d : axes) {
      float c = std::clamp(resize_coord(s, d, idx[d]), 0.0f, static_cast<float>(s.in[d] - 1));
      lo[d] = static_cast<int64_t>(std::floor(c));
      hi[d] = std::min(lo[d] + 1, s.in[d] - 1);
      w[d] = c - static_cast<float>(lo[d]);
    }
    double acc = 0;
    for (size_t corner = 0; corner < (size_t{1} << axes.size()); ++corner) {
      double weight = 1;
      int64_t off = 0;
      for (size_t d = 0; d < r; ++d) off += idx[d] * st[d];
      for (size_t k = 0; k < axes.size(); ++k) {
        size_t d = axes[k];
        bool up = (corner >> k) & 1;
        weight *= up ? w[d] : 1.0f - w[d];
        off += ((up ? hi[d] : lo[d]) - idx[d]) * st[d];
      }
      acc += weight * src[off];
    }
    dst[o] = static_cast<float>(acc);
    for (size_t a = r; a-- > 0;) {
      if (++idx[a] < s.out[a]) break;
      idx[a] = 0;
    }
  }
  return {out};
}

// The linear interpolation of one resized axis d at output index i: the two
// input indices and the weight of the upper one.
struct LinearTaps {
  Expr lo, hi, w;
};
LinearTaps linear_taps(const ResizeSpec& s, size_t d, const Expr& i) {
  Expr c = resize_coord_expr(s, d, i);
  c = ir::min(ir::max(c, Expr(0.0f)), Expr(static_cast<float>(s.in[d] - 1)));
  LinearTaps t;
  t.lo = ir::cast(ir::DataType::i64(), ir::floor(c));
  t.hi = ir::min(t.lo + Expr(int64_t{1}), Expr(s.in[d] - 1));
  t.w = c - ir::cast(ir::DataType::f32(), t.lo);
  return t;
}

// sum over the corners of `axes` (each at its lower or upper tap) of the
// product of the corners' weights times source[corner]: the linear
// interpolation of the resized axes, the others at `base`.
Expr interpolate(const ir::Tensor& source, const std::vector<Expr>& base,
                 const std::vector<size_t>& axes, const std::vector<LinearTaps>& taps) {
  Expr acc;
  for (size_t corner = 0; corner < (size_t{1} << axes.size()); ++corner) {
    std::vector<Expr> idx = base;
    Expr weight;
    for (size_t k = 0; k < axes.size(); ++k) {
      bool up = (corner >> k) & 1;
      idx[axes[k]] = up ? taps[k].hi : taps[k].lo;
      Expr wk = up ? taps[k].w : Expr(1.0f) - taps[k].w;
      weight = weight ? weight * wk : wk;
    }
    Expr v = ir::read(source, idx);
    if (weight) v = v * weight;
    acc = acc ? acc + v : v;
  }
  return acc;
}

// The innermost axis interpolated alone, at the input's size in the other
// axes: [.., H_in, W_out], each element the 2-tap sum over the input row. It
// is a reduction (over the taps) so that the generic schedule computes it on
// its own, not inlined into the output.
ir::Tensor interpolate_innermost(const ir::Tensor& x, const ResizeSpec& s) {
  const size_t last = s.in.size() - 1;
  Shape shape = s.in;
  shape[last] = s.out[last];
  ir::IterVar tap = ir::reduce_axis(Expr(int64_t{2}), "tap");
  return ir::compute(
      shape_exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        LinearTaps t = linear_taps(s, last, i[last]);
        std::vector<Expr> idx = vars_to_exprs(i);
        Expr upper = ir::eq(tap->var, Expr(int64_t{1}));
        idx[last] = ir::select(upper, t.hi, t.lo);
        Expr weight = ir::select(upper, t.w, Expr(1.0f) - t.w);
        return ir::sum(ir::read(x, idx) * weight, {tap});
      },
      "Resize_rows");
}

std::vector<ir::Tensor> compute_resize(const Node& node, const ComputeInputs& in,
                                       const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  ResizeSpec s = resize_spec(node, static_shape(x), in.constants);
  size_t r = s.in.size();
  if (s.linear && !x->dtype.is_float()) fail(node, "linear mode needs float data");
  std::vector<size_t> axes;
  for (size_t d = 0; d < r; ++d)
    if (s.resized(d)) axes.push_back(d);
  // Linear over the innermost axis and others: separably, the innermost one
  // first at the input's height (its taps gathered along the row, 1/scale of
  // the outputs' work for an upsample), then the rest reading whole rows of
  // that, contiguous and vectorized (a 28x28 -> 224x224 head upsample: one
  // gather per output before).
  // Not where the output is blocked again in the same kernel (kiln_reblocked,
  // graph/passes/propagate_layout.h): there the channel block is innermost,
  // read contiguously in one stage, and the rows' stage would be gathered.
  const bool separable = s.linear && axes.size() >= 2 && axes.back() == r - 1 &&
                         attr_int(node, "kiln_reblocked", 0) == 0;
  ir::Tensor source = separable ? interpolate_innermost(x, s) : x;
  if (separable) axes.pop_back();
  return {ir::compute(
      shape_exprs(out_types.at(0).shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> base = vars_to_exprs(i);
        if (!s.linear) {
          for (size_t d : axes)
            base[d] = nearest_index_expr(s, resize_coord_expr(s, d, i[d]), s.in[d]);
          return ir::read(source, base);
        }
        std::vector<LinearTaps> taps;
        for (size_t d : axes) taps.push_back(linear_taps(s, d, i[d]));
        return interpolate(source, base, axes, taps);
      },
      "Resize")};
}

}  // namespace

void register_shape_ops() {
  reg_reshape_like("Reshape", reshape_shape, {1});
  reg_reshape_like("Flatten", flatten_shape, {});
  reg_reshape_like("Squeeze", squeeze_shape, {1});
  reg_reshape_like("Unsqueeze", unsqueeze_shape, {1});
  reg("Transpose", eval_transpose, compute_transpose);
  reg("Concat", eval_concat, compute_concat);
  reg("Split", eval_split, compute_split, {1});
  reg("Slice", eval_slice, compute_slice, {1, 2, 3, 4});
  reg("Gather", eval_gather, compute_gather);
  reg("Expand", eval_expand, compute_expand, {1});
  OpDef shape{"Shape", OpPattern::kInjective, eval_shape, nullptr, {}};
  shape.type_only_inputs = {0};  // reads only its input's type
  register_op(std::move(shape));
  reg("ConstantOfShape", eval_constant_of_shape, nullptr, {0});
  reg("Range", eval_range, nullptr, {0, 1, 2});
  reg("Tile", eval_tile, compute_tile, {1});
  reg("DepthToSpace", eval_depth_space, nullptr);
  reg("SpaceToDepth", eval_depth_space, nullptr);
  reg("Pad", eval_pad, compute_pad, {1, 2, 3});
  reg("Resize", eval_resize, compute_resize, {1, 2, 3});
}

}  // namespace kiln::graph
