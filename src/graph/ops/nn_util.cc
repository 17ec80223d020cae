#include "graph/ops/nn_util.h"

#include <algorithm>

namespace kiln::graph::nn {

void fail(const Node& node, const std::string& what) {
  throw OpError(node.op_type + " node '" + node.name + "': " + what);
}

int64_t attr_int(const Node& node, const std::string& key, int64_t dflt) {
  return node.attr<int64_t>(key).value_or(dflt);
}

float attr_float(const Node& node, const std::string& key, float dflt) {
  return node.attr<float>(key).value_or(dflt);
}

std::string attr_string(const Node& node, const std::string& key, const std::string& dflt) {
  return node.attr<std::string>(key).value_or(dflt);
}

std::vector<int64_t> attr_ints(const Node& node, const std::string& key,
                               std::vector<int64_t> dflt) {
  return node.attr<std::vector<int64_t>>(key).value_or(std::move(dflt));
}

int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(node,
         "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const Initializer* optional_input(const std::vector<const Initializer*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

const Initializer& required_input(const Node& node, const std::vector<const Initializer*>& inputs,
                                  size_t i) {
  const Initializer* t = optional_input(inputs, i);
  if (!t) fail(node, "input " + std::to_string(i) + " is missing");
  return *t;
}

void require_f32(const Node& node, const Initializer& t, const std::string& what) {
  if (t.type.dtype != "float32")
    fail(node, what + " has dtype " + t.type.dtype + "; only float32 is supported");
}

Initializer make_tensor(const std::string& dtype, std::vector<int64_t> shape) {
  Initializer t;
  t.type = {dtype, std::move(shape)};
  t.data.assign(static_cast<size_t>(t.type.num_elements()) * dtype_size(dtype), 0);
  return t;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::vector<int64_t> broadcast_strides(const Node& node, const std::vector<int64_t>& from,
                                       const std::vector<int64_t>& to, const std::string& what) {
  if (from.size() > to.size())
    fail(node, what + " of shape " + shape_str(from) + " does not broadcast to " + shape_str(to));
  std::vector<int64_t> fs = strides_of(from);
  std::vector<int64_t> out(to.size(), 0);
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[lead + i])
      out[lead + i] = from[i] == 1 ? 0 : fs[i];
    else if (from[i] != 1)
      fail(node, what + " of shape " + shape_str(from) + " does not broadcast to " + shape_str(to));
  }
  return out;
}

// ---- window arithmetic ----------------------------------------------------------

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Reads strides, dilations and pads (default 1, 1, 0) sized for `rank` dims.
Window base_window(const Node& node, const std::vector<int64_t>& in,
                   const std::vector<int64_t>& kernel) {
  size_t r = in.size();
  Window w;
  w.in = in;
  w.kernel = kernel;
  w.stride = attr_ints(node, "strides", std::vector<int64_t>(r, 1));
  w.dilation = attr_ints(node, "dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = attr_ints(node, "pads", std::vector<int64_t>(2 * r, 0));
  if (w.kernel.size() != r || w.stride.size() != r || w.dilation.size() != r ||
      pads.size() != 2 * r)
    fail(node, "kernel_shape, strides, dilations and pads must have " + std::to_string(r) + ", " +
                   std::to_string(r) + ", " + std::to_string(r) + " and " + std::to_string(2 * r) +
                   " values for " + std::to_string(r) + " spatial dims");
  for (size_t d = 0; d < r; ++d) {
    if (w.kernel[d] < 1 || w.stride[d] < 1 || w.dilation[d] < 1)
      fail(node, "kernel sizes, strides and dilations must be positive");
    if (pads[d] < 0 || pads[r + d] < 0) fail(node, "pads must be non-negative");
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + r);
  w.pad_end.assign(pads.begin() + r, pads.end());
  w.out.assign(r, 0);
  return w;
}

// auto_pad SAME_* / VALID: replaces the pads and sets the output size.
// Returns false for NOTSET (explicit pads).
bool apply_auto_pad(const Node& node, Window& w) {
  std::string mode = attr_string(node, "auto_pad", "NOTSET");
  if (mode == "NOTSET") return false;
  bool upper = mode == "SAME_UPPER";
  if (!upper && mode != "SAME_LOWER" && mode != "VALID") fail(node, "unknown auto_pad " + mode);
  for (size_t d = 0; d < w.rank(); ++d) {
    if (mode == "VALID") {
      w.pad_begin[d] = w.pad_end[d] = 0;
      w.out[d] = w.in[d] >= w.extent(d) ? (w.in[d] - w.extent(d)) / w.stride[d] + 1 : 0;
      continue;
    }
    w.out[d] = ceil_div(w.in[d], w.stride[d]);
    int64_t total = std::max<int64_t>(0, (w.out[d] - 1) * w.stride[d] + w.extent(d) - w.in[d]);
    // The odd pixel goes to the end for SAME_UPPER, to the beginning for SAME_LOWER.
    w.pad_begin[d] = upper ? total / 2 : total - total / 2;
    w.pad_end[d] = total - w.pad_begin[d];
  }
  return true;
}

void require_nonempty(const Node& node, const Window& w) {
  for (size_t d = 0; d < w.rank(); ++d)
    if (w.out[d] < 1)
      fail(node, "the window (extent " + std::to_string(w.extent(d)) +
                     ") does not fit the padded input along spatial dim " + std::to_string(d) +
                     " (size " + std::to_string(w.in[d]) + ")");
}

}  // namespace

Window conv_window(const Node& node, const std::vector<int64_t>& in_spatial,
                   const std::vector<int64_t>& kernel) {
  auto ks = node.attr<std::vector<int64_t>>("kernel_shape");
  if (ks && *ks != kernel)
    fail(node,
         "kernel_shape " + shape_str(*ks) + " disagrees with the weight's " + shape_str(kernel));
  Window w = base_window(node, in_spatial, kernel);
  if (!apply_auto_pad(node, w)) {
    for (size_t d = 0; d < w.rank(); ++d) {
      int64_t padded = w.in[d] + w.pad_begin[d] + w.pad_end[d];
      w.out[d] = padded >= w.extent(d) ? (padded - w.extent(d)) / w.stride[d] + 1 : 0;
    }
  }
  require_nonempty(node, w);
  return w;
}

Window pool_window(const Node& node, const std::vector<int64_t>& in_spatial) {
  auto ks = node.attr<std::vector<int64_t>>("kernel_shape");
  if (!ks) fail(node, "kernel_shape is required");
  Window w = base_window(node, in_spatial, *ks);
  bool ceil_mode = attr_int(node, "ceil_mode", 0) != 0;
  // With auto_pad, both rounding modes give the same sizes (ONNX's pooling doc).
  if (!apply_auto_pad(node, w)) {
    for (size_t d = 0; d < w.rank(); ++d) {
      int64_t span = w.in[d] + w.pad_begin[d] + w.pad_end[d] - w.extent(d);
      if (span < 0) continue;  // out stays 0: reported below
      w.out[d] = (ceil_mode ? ceil_div(span, w.stride[d]) : span / w.stride[d]) + 1;
      // A window must start inside the input or its left padding.
      if (ceil_mode && (w.out[d] - 1) * w.stride[d] >= w.in[d] + w.pad_begin[d]) --w.out[d];
    }
  }
  require_nonempty(node, w);
  return w;
}

TransposeWindow conv_transpose_window(const Node& node, const std::vector<int64_t>& in_spatial,
                                      const std::vector<int64_t>& kernel) {
  Window base = base_window(node, in_spatial, kernel);
  auto ks = node.attr<std::vector<int64_t>>("kernel_shape");
  if (ks && *ks != kernel)
    fail(node,
         "kernel_shape " + shape_str(*ks) + " disagrees with the weight's " + shape_str(kernel));
  size_t r = in_spatial.size();
  std::vector<int64_t> out_pad = attr_ints(node, "output_padding", std::vector<int64_t>(r, 0));
  if (out_pad.size() != r) fail(node, "output_padding must have one value per spatial dim");
  std::vector<int64_t> out_shape = attr_ints(node, "output_shape");
  if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != r)
    fail(node, "output_shape must have one value per spatial dim");
  std::string mode = attr_string(node, "auto_pad", "NOTSET");
  if (mode != "NOTSET" && mode != "SAME_UPPER" && mode != "SAME_LOWER" && mode != "VALID")
    fail(node, "unknown auto_pad " + mode);

  TransposeWindow w;
  w.in = in_spatial;
  w.kernel = kernel;
  w.stride = base.stride;
  w.dilation = base.dilation;
  w.pad_begin.assign(r, 0);
  w.out.assign(r, 0);
  for (size_t d = 0; d < r; ++d) {
    // The size of the full ("unpadded") transposed convolution.
    int64_t full = w.stride[d] * (w.in[d] - 1) + out_pad[d] + base.extent(d);
    bool same = mode == "SAME_UPPER" || mode == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      // Pads follow from the requested size; the odd pixel goes to the
      // beginning except for SAME_UPPER (ONNX's ConvTranspose doc).
      int64_t target = out_shape.empty() ? w.in[d] * w.stride[d] : out_shape[d];
      int64_t total = full - target;
      int64_t half = total / 2;
      w.pad_begin[d] = mode == "SAME_UPPER" ? half : total - half;
      w.out[d] = target;
    } else if (mode == "VALID") {
      w.out[d] = full;
    } else {
      w.pad_begin[d] = base.pad_begin[d];
      w.out[d] = full - base.pad_begin[d] - base.pad_end[d];
    }
    if (w.out[d] < 1) fail(node, "empty output along spatial dim " + std::to_string(d));
  }
  return w;
}

// ---- tensor expressions ------------------------------------------------------------

std::vector<int64_t> static_shape(const ir::Tensor& t) {
  std::vector<int64_t> s;
  for (const ir::Expr& e : t->shape) {
    const int64_t* v = ir::as_const_int(e);
    if (!v) throw OpError("tensor " + t->name + " has a non-constant shape");
    s.push_back(*v);
  }
  return s;
}

std::vector<ir::Expr> shape_exprs(const std::vector<int64_t>& shape) {
  std::vector<ir::Expr> e;
  for (int64_t d : shape) e.push_back(ir::Expr(d));
  return e;
}

ir::Expr guarded_read(const ir::Tensor& t, std::vector<ir::Expr> idx,
                      const std::vector<int64_t>& bound, ir::Expr fill) {
  ir::Expr inside;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (bound[d] <= 0) continue;
    ir::Expr ok = ir::logical_and(idx[d] >= ir::Expr(int64_t{0}), idx[d] < ir::Expr(bound[d]));
    inside = inside ? ir::logical_and(inside, ok) : ok;
    idx[d] = ir::max(ir::min(idx[d], ir::Expr(bound[d] - 1)), ir::Expr(int64_t{0}));
  }
  ir::Expr value = ir::read(t, idx);
  return inside ? ir::select(inside, value, fill) : value;
}

ir::Expr broadcast_read(const ir::Tensor& t, const std::vector<int64_t>& from,
                        const std::vector<ir::Var>& idx) {
  std::vector<ir::Expr> r;
  size_t lead = idx.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    r.push_back(from[i] == 1 ? ir::Expr(int64_t{0}) : ir::Expr(idx[lead + i]));
  return ir::read(t, r);
}

void check_out_type(const Node& node, const std::vector<TensorType>& out_types, size_t i,
                    const std::vector<int64_t>& shape, const std::string& dtype) {
  if (i >= out_types.size()) fail(node, "no inferred type for output " + std::to_string(i));
  TensorType want{dtype, shape};
  if (!(out_types[i] == want))
    fail(node, "output " + std::to_string(i) + " was inferred as " + out_types[i].dtype + " " +
                   shape_str(out_types[i].shape) + " but the operator computes " + dtype + " " +
                   shape_str(shape));
}

const ir::Tensor& required_tensor(const Node& node, const ComputeInputs& in, size_t i) {
  if (i >= in.tensors.size() || !in.tensors[i])
    fail(node, "input " + std::to_string(i) + " is missing");
  return in.tensors[i];
}

}  // namespace kiln::graph::nn
