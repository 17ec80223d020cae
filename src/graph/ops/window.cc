#include "graph/ops/window.h"

#include <algorithm>
#include <string>

#include "graph/ops/op_util.h"

namespace kiln::graph::op_util {

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
  std::vector<int64_t> out_shape = attr_ints(node, "output_shape", {});
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
      // A requested size beyond the full one extends the end, as
      // output_padding does (ONNX's test_convtranspose_output_shape).
      if (total < 0) w.pad_begin[d] = 0;
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

void lift_1d_window_attrs(Node& node) {
  using Ints = std::vector<int64_t>;
  for (const char* key : {"kernel_shape", "strides", "dilations"})
    if (auto v = node.attr<Ints>(key); v && v->size() == 1) node.attrs[key] = Ints{1, (*v)[0]};
  if (auto p = node.attr<Ints>("pads"); p && p->size() == 2)
    node.attrs["pads"] = Ints{0, (*p)[0], 0, (*p)[1]};
  if (auto p = node.attr<Ints>("output_padding"); p && p->size() == 1)
    node.attrs["output_padding"] = Ints{0, (*p)[0]};
  if (auto s = node.attr<Ints>("output_shape"); s && s->size() == 1)
    node.attrs["output_shape"] = Ints{1, (*s)[0]};
}

EvaluateFn evaluate_1d_as_2d(EvaluateFn eval_2d, bool weighted) {
  return [eval_2d, weighted](const Node& node, const std::vector<const Initializer*>& inputs) {
    auto is_1d = [](const Initializer* t) { return t && t->type.shape.size() == 3; };
    if (inputs.empty() || !is_1d(inputs[0]) ||
        (weighted && (inputs.size() < 2 || !is_1d(inputs[1]))))
      return eval_2d(node, inputs);  // not 1-D, or malformed: the 2-D op says why
    auto lifted = [](const Initializer& t) {
      Initializer u = t;
      u.type.shape.insert(u.type.shape.begin() + 2, 1);
      return u;
    };
    Node node_2d = node;
    lift_1d_window_attrs(node_2d);
    std::vector<Initializer> held = {lifted(*inputs[0])};
    if (weighted) held.push_back(lifted(*inputs[1]));
    std::vector<const Initializer*> in_2d = inputs;
    for (size_t i = 0; i < held.size(); ++i) in_2d[i] = &held[i];
    std::vector<Initializer> out = eval_2d(node_2d, in_2d);
    for (Initializer& o : out)
      if (o.type.shape.size() == 4 && o.type.shape[2] == 1)
        o.type.shape.erase(o.type.shape.begin() + 2);
    return out;
  };
}

}  // namespace kiln::graph::op_util
