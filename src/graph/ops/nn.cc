// The anchor operators: Conv, ConvTranspose, Gemm and MatMul (float32).
//
// evaluate is THE reference implementation (plain loops, double accumulation);
// compute is the plain tensor expression that the generic schedule runs until
// a tuned template replaces it.
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "graph/ops/window.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;
using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers

// ---- Conv -------------------------------------------------------------------------

// Shapes of a 2-D grouped convolution, checked against each other.
struct ConvShapes {
  int64_t n, c, h, w;  // input
  int64_t m, kh, kw;   // weight [m, c / group, kh, kw]
  int64_t group;
  Window win;
  std::vector<int64_t> out_shape() const { return {n, m, win.out[0], win.out[1]}; }
};

ConvShapes conv_shapes(const Node& node, const std::vector<int64_t>& x,
                       const std::vector<int64_t>& wt, const std::vector<int64_t>* bias) {
  if (x.size() != 4 || wt.size() != 4)
    fail(node, "only 2-D convolution (NCHW input, OIHW weight) is supported; got input " +
                   shape_str(x) + " and weight " + shape_str(wt));
  ConvShapes s{x[0], x[1], x[2], x[3], wt[0], wt[2], wt[3], attr_int(node, "group", 1), {}};
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0)
    fail(node, "group " + std::to_string(s.group) + " does not divide the " + std::to_string(s.c) +
                   " input and " + std::to_string(s.m) + " output channels");
  if (wt[1] != s.c / s.group)
    fail(node, "weight " + shape_str(wt) + " needs " + std::to_string(s.c / s.group) +
                   " input channels per group");
  if (bias && *bias != std::vector<int64_t>{s.m})
    fail(node, "bias " + shape_str(*bias) + " must have shape [" + std::to_string(s.m) + "]");
  s.win = conv_window(node, {s.h, s.w}, {s.kh, s.kw});
  return s;
}

std::vector<Initializer> conv_evaluate(const Node& node,
                                       const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& wt = required_input(node, inputs, 1);
  const Initializer* b = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, wt, "W");
  if (b) require_f32(node, *b, "B");
  ConvShapes s = conv_shapes(node, x.type.shape, wt.type.shape, b ? &b->type.shape : nullptr);
  const Window& win = s.win;
  int64_t oh_n = win.out[0], ow_n = win.out[1], cg = s.c / s.group, mg = s.m / s.group;

  Initializer y = make_tensor("float32", s.out_shape());
  const float* xp = data_of<float>(x);
  const float* wp = data_of<float>(wt);
  float* yp = data_of<float>(y);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t m = 0; m < s.m; ++m) {
      int64_t c0 = (m / mg) * cg;  // first input channel of m's group
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = b ? data_of<float>(*b)[m] : 0.0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < s.kh; ++ky) {
              int64_t ih = win.start(0, oh) + ky * win.dilation[0];
              if (ih < 0 || ih >= s.h) continue;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                int64_t iw = win.start(1, ow) + kx * win.dilation[1];
                if (iw < 0 || iw >= s.w) continue;
                acc += static_cast<double>(xp[((n * s.c + c0 + c) * s.h + ih) * s.w + iw]) *
                       wp[((m * cg + c) * s.kh + ky) * s.kw + kx];
              }
            }
          yp[((n * s.m + m) * oh_n + oh) * ow_n + ow] = static_cast<float>(acc);
        }
    }
  return {std::move(y)};
}

// The 3-D reference (NCDHW input, OIDHW weight): the graph's compiled path
// runs it as 2-D convolutions (graph/passes/lower_3d_windows.h), and this is
// what they are compared with.
std::vector<Initializer> conv3d_evaluate(const Node& node,
                                         const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& wt = required_input(node, inputs, 1);
  const Initializer* b = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, wt, "W");
  if (b) require_f32(node, *b, "B");
  const std::vector<int64_t>& xs = x.type.shape;
  const std::vector<int64_t>& ws = wt.type.shape;
  const int64_t group = attr_int(node, "group", 1), m_n = ws[0];
  if (group < 1 || xs[1] % group != 0 || m_n % group != 0 || ws[1] != xs[1] / group)
    fail(node, "group " + std::to_string(group) + " does not fit input " + shape_str(xs) +
                   " and weight " + shape_str(ws));
  if (b && b->type.shape != std::vector<int64_t>{m_n})
    fail(node,
         "bias " + shape_str(b->type.shape) + " must have shape [" + std::to_string(m_n) + "]");
  const Window win = conv_window(node, {xs[2], xs[3], xs[4]}, {ws[2], ws[3], ws[4]});
  const int64_t cg = ws[1], mg = m_n / group;
  const std::vector<int64_t> out = {xs[0], m_n, win.out[0], win.out[1], win.out[2]};
  Initializer y = make_tensor("float32", out);
  const float* xp = data_of<float>(x);
  const float* wp = data_of<float>(wt);
  float* yp = data_of<float>(y);
  size_t at = 0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t m = 0; m < m_n; ++m)
      for (int64_t od = 0; od < out[2]; ++od)
        for (int64_t oh = 0; oh < out[3]; ++oh)
          for (int64_t ow = 0; ow < out[4]; ++ow, ++at) {
            double acc = b ? data_of<float>(*b)[m] : 0.0;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < ws[2]; ++kd) {
                int64_t id = win.start(0, od) + kd * win.dilation[0];
                if (id < 0 || id >= xs[2]) continue;
                for (int64_t ky = 0; ky < ws[3]; ++ky) {
                  int64_t ih = win.start(1, oh) + ky * win.dilation[1];
                  if (ih < 0 || ih >= xs[3]) continue;
                  for (int64_t kx = 0; kx < ws[4]; ++kx) {
                    int64_t iw = win.start(2, ow) + kx * win.dilation[2];
                    if (iw < 0 || iw >= xs[4]) continue;
                    int64_t ci = (m / mg) * cg + c;
                    acc += static_cast<double>(
                               xp[(((n * xs[1] + ci) * xs[2] + id) * xs[3] + ih) * xs[4] + iw]) *
                           wp[(((m * cg + c) * ws[2] + kd) * ws[3] + ky) * ws[4] + kx];
                  }
                }
              }
            yp[at] = static_cast<float>(acc);
          }
  return {std::move(y)};
}

// Conv's reference at any supported rank: 3-D here, 1-D and 2-D below.
std::vector<Initializer> conv_evaluate_any(const Node& node,
                                           const std::vector<const Initializer*>& inputs) {
  if (inputs.size() > 1 && inputs[0] && inputs[1] && inputs[0]->type.shape.size() == 5 &&
      inputs[1]->type.shape.size() == 5)
    return conv3d_evaluate(node, inputs);
  return evaluate_1d_as_2d(conv_evaluate, true)(node, inputs);
}

std::vector<Tensor> conv_compute(const Node& node, const ComputeInputs& in,
                                 const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& wt = required_tensor(node, in, 1);
  Tensor b = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  std::vector<int64_t> b_shape = b ? static_shape(b) : std::vector<int64_t>{};
  ConvShapes s = conv_shapes(node, static_shape(x), static_shape(wt), b ? &b_shape : nullptr);
  check_out_type(node, out_types, 0, s.out_shape(), "float32");
  const Window& win = s.win;
  int64_t cg = s.c / s.group, mg = s.m / s.group;
  std::vector<int64_t> bound = {0, 0, win.leaves_input(0) ? s.h : 0, win.leaves_input(1) ? s.w : 0};

  IterVar rc = ir::reduce_axis(cg, "rc");
  IterVar ry = ir::reduce_axis(s.kh, "ry");
  IterVar rx = ir::reduce_axis(s.kw, "rx");
  Tensor conv = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr c = s.group == 1 ? Expr(rc->var) : ir::floordiv(i[1], mg) * cg + rc->var;
        Expr h = i[2] * win.stride[0] - win.pad_begin[0] + ry->var * win.dilation[0];
        Expr w = i[3] * win.stride[1] - win.pad_begin[1] + rx->var * win.dilation[1];
        Expr xv = guarded_read(x, {i[0], c, h, w}, bound, Expr(0.0f));
        return ir::sum(xv * ir::at(wt, i[1], rc->var, ry->var, rx->var), {rc, ry, rx});
      },
      node.name + ".conv");
  if (!b) return {conv};
  Tensor y = ir::compute(
      conv->shape,
      [&](const std::vector<Var>& i) {
        return ir::at(conv, i[0], i[1], i[2], i[3]) + ir::at(b, i[1]);
      },
      node.name + ".bias");
  return {y};
}

// ---- ConvTranspose -------------------------------------------------------------------

struct ConvTransposeShapes {
  int64_t n, c, h, w;  // input
  int64_t m, kh, kw;   // weight [c, m / group, kh, kw]
  int64_t group;
  TransposeWindow win;
  std::vector<int64_t> out_shape() const { return {n, m, win.out[0], win.out[1]}; }
};

ConvTransposeShapes conv_transpose_shapes(const Node& node, const std::vector<int64_t>& x,
                                          const std::vector<int64_t>& wt,
                                          const std::vector<int64_t>* bias) {
  if (x.size() != 4 || wt.size() != 4)
    fail(node,
         "only 2-D transposed convolution (NCHW input, IOHW weight) is supported; got "
         "input " +
             shape_str(x) + " and weight " + shape_str(wt));
  int64_t group = attr_int(node, "group", 1);
  if (group < 1 || x[1] % group != 0)
    fail(node, "group " + std::to_string(group) + " does not divide the " + std::to_string(x[1]) +
                   " input channels");
  if (wt[0] != x[1])
    fail(node, "weight " + shape_str(wt) + " needs " + std::to_string(x[1]) +
                   " input channels in its first dim");
  ConvTransposeShapes s{x[0], x[1], x[2], x[3], wt[1] * group, wt[2], wt[3], group, {}};
  if (bias && *bias != std::vector<int64_t>{s.m})
    fail(node, "bias " + shape_str(*bias) + " must have shape [" + std::to_string(s.m) + "]");
  s.win = conv_transpose_window(node, {s.h, s.w}, {s.kh, s.kw});
  return s;
}

std::vector<Initializer> conv_transpose_evaluate(const Node& node,
                                                 const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& wt = required_input(node, inputs, 1);
  const Initializer* b = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, wt, "W");
  if (b) require_f32(node, *b, "B");
  ConvTransposeShapes s =
      conv_transpose_shapes(node, x.type.shape, wt.type.shape, b ? &b->type.shape : nullptr);
  const TransposeWindow& win = s.win;
  int64_t oh_n = win.out[0], ow_n = win.out[1], cg = s.c / s.group, mg = s.m / s.group;

  // Scatter form: every input pixel adds its kernel-weighted copy to the output.
  std::vector<double> acc(static_cast<size_t>(s.n * s.m * oh_n * ow_n), 0.0);
  const float* xp = data_of<float>(x);
  const float* wp = data_of<float>(wt);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c) {
      int64_t m0 = (c / cg) * mg;  // first output channel of c's group
      for (int64_t ih = 0; ih < s.h; ++ih)
        for (int64_t iw = 0; iw < s.w; ++iw) {
          double v = xp[((n * s.c + c) * s.h + ih) * s.w + iw];
          for (int64_t mm = 0; mm < mg; ++mm)
            for (int64_t ky = 0; ky < s.kh; ++ky) {
              int64_t oh = ih * win.stride[0] + ky * win.dilation[0] - win.pad_begin[0];
              if (oh < 0 || oh >= oh_n) continue;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                int64_t ow = iw * win.stride[1] + kx * win.dilation[1] - win.pad_begin[1];
                if (ow < 0 || ow >= ow_n) continue;
                acc[((n * s.m + m0 + mm) * oh_n + oh) * ow_n + ow] +=
                    v * wp[((c * mg + mm) * s.kh + ky) * s.kw + kx];
              }
            }
        }
    }
  Initializer y = make_tensor("float32", s.out_shape());
  float* yp = data_of<float>(y);
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t m = static_cast<int64_t>(i) / (oh_n * ow_n) % s.m;
    yp[i] = static_cast<float>(acc[i] + (b ? data_of<float>(*b)[m] : 0.0));
  }
  return {std::move(y)};
}

// The 3-D reference (NCDHW input, [C, M / group, KD, KH, KW] weight), in
// scatter form as the 2-D one; the compiled path runs it as 2-D transposed
// convolutions (graph/passes/lower_3d_windows.h).
std::vector<Initializer> conv_transpose3d_evaluate(const Node& node,
                                                   const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& wt = required_input(node, inputs, 1);
  const Initializer* b = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, wt, "W");
  if (b) require_f32(node, *b, "B");
  const std::vector<int64_t>& xs = x.type.shape;
  const std::vector<int64_t>& ws = wt.type.shape;
  const int64_t group = attr_int(node, "group", 1);
  if (group < 1 || xs[1] % group != 0 || ws[0] != xs[1])
    fail(node, "group " + std::to_string(group) + " does not fit input " + shape_str(xs) +
                   " and weight " + shape_str(ws));
  const int64_t mg = ws[1], m_n = mg * group, cg = xs[1] / group;
  if (b && b->type.shape != std::vector<int64_t>{m_n})
    fail(node,
         "bias " + shape_str(b->type.shape) + " must have shape [" + std::to_string(m_n) + "]");
  const TransposeWindow win =
      conv_transpose_window(node, {xs[2], xs[3], xs[4]}, {ws[2], ws[3], ws[4]});
  const std::vector<int64_t> out = {xs[0], m_n, win.out[0], win.out[1], win.out[2]};
  std::vector<double> acc(static_cast<size_t>(out[0] * m_n * out[2] * out[3] * out[4]), 0.0);
  const float* xp = data_of<float>(x);
  const float* wp = data_of<float>(wt);
  // Output position of input i through tap k along dim d, or -1 outside.
  auto place = [&](size_t d, int64_t i, int64_t k) {
    int64_t o = i * win.stride[d] + k * win.dilation[d] - win.pad_begin[d];
    return o >= 0 && o < win.out[d] ? o : -1;
  };
  size_t at = 0;
  for (int64_t n = 0; n < xs[0]; ++n)
    for (int64_t c = 0; c < xs[1]; ++c)
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw, ++at) {
            const double v = xp[at];
            for (int64_t mm = 0; mm < mg; ++mm) {
              const int64_t m = (c / cg) * mg + mm;
              for (int64_t kd = 0; kd < ws[2]; ++kd) {
                const int64_t od = place(0, id, kd);
                if (od < 0) continue;
                for (int64_t ky = 0; ky < ws[3]; ++ky) {
                  const int64_t oh = place(1, ih, ky);
                  if (oh < 0) continue;
                  for (int64_t kx = 0; kx < ws[4]; ++kx) {
                    const int64_t ow = place(2, iw, kx);
                    if (ow < 0) continue;
                    acc[static_cast<size_t>((((n * m_n + m) * out[2] + od) * out[3] + oh) * out[4] +
                                            ow)] +=
                        v * wp[(((c * mg + mm) * ws[2] + kd) * ws[3] + ky) * ws[4] + kx];
                  }
                }
              }
            }
          }
  Initializer y = make_tensor("float32", out);
  float* yp = data_of<float>(y);
  const int64_t plane = out[2] * out[3] * out[4];
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t m = static_cast<int64_t>(i) / plane % m_n;
    yp[i] = static_cast<float>(acc[i] + (b ? data_of<float>(*b)[m] : 0.0));
  }
  return {std::move(y)};
}

// ConvTranspose's reference at any supported rank: 3-D here, 1-D and 2-D above.
std::vector<Initializer> conv_transpose_evaluate_any(
    const Node& node, const std::vector<const Initializer*>& inputs) {
  if (inputs.size() > 1 && inputs[0] && inputs[1] && inputs[0]->type.shape.size() == 5 &&
      inputs[1]->type.shape.size() == 5)
    return conv_transpose3d_evaluate(node, inputs);
  return evaluate_1d_as_2d(conv_transpose_evaluate, true)(node, inputs);
}

std::vector<Tensor> conv_transpose_compute(const Node& node, const ComputeInputs& in,
                                           const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& wt = required_tensor(node, in, 1);
  Tensor b = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  std::vector<int64_t> b_shape = b ? static_shape(b) : std::vector<int64_t>{};
  ConvTransposeShapes s =
      conv_transpose_shapes(node, static_shape(x), static_shape(wt), b ? &b_shape : nullptr);
  check_out_type(node, out_types, 0, s.out_shape(), "float32");
  const TransposeWindow& win = s.win;
  int64_t cg = s.c / s.group, mg = s.m / s.group;

  // Gather form: output o takes input i = (o + pad - k * dilation) / stride for
  // every tap k where that division is exact and i is inside the input.
  IterVar rc = ir::reduce_axis(cg, "rc");
  IterVar ry = ir::reduce_axis(s.kh, "ry");
  IterVar rx = ir::reduce_axis(s.kw, "rx");
  auto tap = [&](Expr o, const IterVar& k, size_t d, int64_t size, Expr& valid) {
    Expr t = o + win.pad_begin[d] - k->var * win.dilation[d];
    Expr i = win.stride[d] == 1 ? t : ir::floordiv(t, win.stride[d]);
    Expr ok = ir::logical_and(t >= int64_t{0}, i < size);
    if (win.stride[d] != 1) ok = ir::logical_and(ok, ir::eq(ir::floormod(t, win.stride[d]), 0));
    valid = valid ? ir::logical_and(valid, ok) : ok;
    return ir::max(ir::min(i, Expr(size - 1)), Expr(int64_t{0}));
  };
  Tensor conv = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        Expr c = s.group == 1 ? Expr(rc->var) : ir::floordiv(i[1], mg) * cg + rc->var;
        Expr mm = s.group == 1 ? Expr(i[1]) : ir::floormod(i[1], mg);
        Expr valid;
        Expr h = tap(i[2], ry, 0, s.h, valid);
        Expr w = tap(i[3], rx, 1, s.w, valid);
        Expr prod = ir::at(x, i[0], c, h, w) * ir::at(wt, c, mm, ry->var, rx->var);
        return ir::sum(ir::select(valid, prod, Expr(0.0f)), {rc, ry, rx});
      },
      node.name + ".conv_transpose");
  if (!b) return {conv};
  Tensor y = ir::compute(
      conv->shape,
      [&](const std::vector<Var>& i) {
        return ir::at(conv, i[0], i[1], i[2], i[3]) + ir::at(b, i[1]);
      },
      node.name + ".bias");
  return {y};
}

// ---- Gemm -----------------------------------------------------------------------------

struct GemmShapes {
  int64_t m, n, k;
  bool trans_a, trans_b;
  std::vector<int64_t> c;  // C's shape when present
};

GemmShapes gemm_shapes(const Node& node, const std::vector<int64_t>& a,
                       const std::vector<int64_t>& b, const std::vector<int64_t>* c) {
  if (a.size() != 2 || b.size() != 2)
    fail(node, "A and B must be 2-D; got " + shape_str(a) + " and " + shape_str(b));
  GemmShapes s;
  s.trans_a = attr_int(node, "transA", 0) != 0;
  s.trans_b = attr_int(node, "transB", 0) != 0;
  s.m = s.trans_a ? a[1] : a[0];
  s.k = s.trans_a ? a[0] : a[1];
  int64_t kb = s.trans_b ? b[1] : b[0];
  s.n = s.trans_b ? b[0] : b[1];
  if (kb != s.k)
    fail(node, "inner dimensions disagree: A " + shape_str(a) + ", B " + shape_str(b) +
                   (s.trans_a ? " (transA)" : "") + (s.trans_b ? " (transB)" : ""));
  if (c) {
    if (c->size() > 2) fail(node, "C must have rank <= 2; got " + shape_str(*c));
    broadcast_strides(node, *c, {s.m, s.n}, "C");  // throws unless it broadcasts
    s.c = *c;
  }
  return s;
}

std::vector<Initializer> gemm_evaluate(const Node& node,
                                       const std::vector<const Initializer*>& inputs) {
  const Initializer& a = required_input(node, inputs, 0);
  const Initializer& b = required_input(node, inputs, 1);
  const Initializer* c = optional_input(inputs, 2);
  require_f32(node, a, "A");
  require_f32(node, b, "B");
  if (c) require_f32(node, *c, "C");
  GemmShapes s = gemm_shapes(node, a.type.shape, b.type.shape, c ? &c->type.shape : nullptr);
  double alpha = attr_float(node, "alpha", 1.0f);
  double beta = attr_float(node, "beta", 1.0f);
  std::vector<int64_t> cs =
      c ? broadcast_strides(node, s.c, {s.m, s.n}, "C") : std::vector<int64_t>{};

  const float* ap = data_of<float>(a);
  const float* bp = data_of<float>(b);
  Initializer y = make_tensor("float32", {s.m, s.n});
  float* yp = data_of<float>(y);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.k; ++k) {
        double av = s.trans_a ? ap[k * s.m + i] : ap[i * s.k + k];
        double bv = s.trans_b ? bp[j * s.k + k] : bp[k * s.n + j];
        acc += av * bv;
      }
      double v = alpha * acc;
      if (c) v += beta * data_of<float>(*c)[i * cs[0] + j * cs[1]];
      yp[i * s.n + j] = static_cast<float>(v);
    }
  return {std::move(y)};
}

std::vector<Tensor> gemm_compute(const Node& node, const ComputeInputs& in,
                                 const std::vector<TensorType>& out_types) {
  const Tensor& a = required_tensor(node, in, 0);
  const Tensor& b = required_tensor(node, in, 1);
  Tensor c = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  std::vector<int64_t> c_shape = c ? static_shape(c) : std::vector<int64_t>{};
  GemmShapes s = gemm_shapes(node, static_shape(a), static_shape(b), c ? &c_shape : nullptr);
  check_out_type(node, out_types, 0, {s.m, s.n}, "float32");
  float alpha = attr_float(node, "alpha", 1.0f);
  float beta = attr_float(node, "beta", 1.0f);

  IterVar k = ir::reduce_axis(s.k, "k");
  Tensor ab = ir::compute(
      {Expr(s.m), Expr(s.n)},
      [&](const std::vector<Var>& i) {
        Expr av = s.trans_a ? ir::at(a, k->var, i[0]) : ir::at(a, i[0], k->var);
        Expr bv = s.trans_b ? ir::at(b, i[1], k->var) : ir::at(b, k->var, i[1]);
        return ir::sum(av * bv, {k});
      },
      node.name + ".matmul");
  if (alpha == 1.0f && !c) return {ab};
  Tensor y = ir::compute(
      ab->shape,
      [&](const std::vector<Var>& i) {
        Expr v = ir::at(ab, i[0], i[1]);
        if (alpha != 1.0f) v = v * Expr(alpha);
        if (c) v = v + broadcast_read(c, i) * Expr(beta);
        return v;
      },
      node.name + ".epilogue");
  return {y};
}

// ---- MatMul ---------------------------------------------------------------------------

// numpy.matmul's shapes: a 1-D A is a row [1, K], a 1-D B a column [K, 1] (the
// added dim is dropped from the result); batch dims broadcast.
struct MatMulShapes {
  std::vector<int64_t> a, b;   // as given
  std::vector<int64_t> batch;  // broadcast batch dims of the result
  int64_t m, n, k;
  bool a_vec, b_vec;
  std::vector<int64_t> out_shape() const {
    std::vector<int64_t> o = batch;
    if (!a_vec) o.push_back(m);
    if (!b_vec) o.push_back(n);
    return o;
  }
};

MatMulShapes matmul_shapes(const Node& node, const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) fail(node, "MatMul operands must have rank >= 1");
  MatMulShapes s;
  s.a = a;
  s.b = b;
  s.a_vec = a.size() == 1;
  s.b_vec = b.size() == 1;
  s.m = s.a_vec ? 1 : a[a.size() - 2];
  s.k = a.back();
  int64_t kb = s.b_vec ? b[0] : b[b.size() - 2];
  s.n = s.b_vec ? 1 : b.back();
  if (kb != s.k) fail(node, "inner dimensions disagree: A " + shape_str(a) + ", B " + shape_str(b));
  size_t ra = s.a_vec ? 0 : a.size() - 2, rb = s.b_vec ? 0 : b.size() - 2;
  size_t r = std::max(ra, rb);
  s.batch.assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i + ra >= r ? a[i + ra - r] : 1;
    int64_t db = i + rb >= r ? b[i + rb - r] : 1;
    if (da != db && da != 1 && db != 1)
      fail(node, "batch dimensions of A " + shape_str(a) + " and B " + shape_str(b) +
                     " do not broadcast");
    s.batch[i] = da == 1 ? db : da;
  }
  return s;
}

// Batch strides of an operand (0 along broadcast dims) for the result's batch index.
std::vector<int64_t> batch_strides(const MatMulShapes& s, const std::vector<int64_t>& shape,
                                   bool vec) {
  std::vector<int64_t> st = strides_of(shape);
  size_t rb = vec ? 0 : shape.size() - 2;
  std::vector<int64_t> out(s.batch.size(), 0);
  for (size_t i = 0; i < rb; ++i) {
    size_t o = s.batch.size() - rb + i;
    out[o] = shape[i] == 1 ? 0 : st[i];
  }
  return out;
}

// float32 or float64 (Einsum's lowering emits float64 MatMuls), both
// operands of one dtype; the sums accumulate in double.
const std::string& matmul_dtype(const Node& node, const std::string& a, const std::string& b) {
  if (a != "float32" && a != "float64")
    fail(node, "A is " + a + "; MatMul takes float32 or float64 operands");
  if (b != a) fail(node, "A is " + a + " but B is " + b);
  return a;
}

template <typename T>
void matmul_eval_typed(const MatMulShapes& s, const Initializer& a, const Initializer& b,
                       Initializer& y) {
  std::vector<int64_t> as = batch_strides(s, s.a, s.a_vec);
  std::vector<int64_t> bs = batch_strides(s, s.b, s.b_vec);
  int64_t batches = 1;
  for (int64_t d : s.batch) batches *= d;
  const T* ap = data_of<T>(a);
  const T* bp = data_of<T>(b);
  T* yp = data_of<T>(y);
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Offsets of this batch entry in A and B (walk the batch index from the right).
    int64_t a_off = 0, b_off = 0;
    for (int64_t d = static_cast<int64_t>(s.batch.size()) - 1, rest = bi; d >= 0; --d) {
      int64_t idx = rest % s.batch[d];
      rest /= s.batch[d];
      a_off += idx * as[d];
      b_off += idx * bs[d];
    }
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < s.k; ++k)
          acc += static_cast<double>(ap[a_off + i * s.k + k]) * bp[b_off + k * s.n + j];
        yp[(bi * s.m + i) * s.n + j] = static_cast<T>(acc);
      }
  }
}

std::vector<Initializer> matmul_evaluate(const Node& node,
                                         const std::vector<const Initializer*>& inputs) {
  const Initializer& a = required_input(node, inputs, 0);
  const Initializer& b = required_input(node, inputs, 1);
  const std::string dtype = matmul_dtype(node, a.type.dtype, b.type.dtype);
  MatMulShapes s = matmul_shapes(node, a.type.shape, b.type.shape);
  Initializer y = make_tensor(dtype, s.out_shape());
  if (dtype == "float64")
    matmul_eval_typed<double>(s, a, b, y);
  else
    matmul_eval_typed<float>(s, a, b, y);
  return {std::move(y)};
}

std::vector<Tensor> matmul_compute(const Node& node, const ComputeInputs& in,
                                   const std::vector<TensorType>& out_types) {
  const Tensor& a = required_tensor(node, in, 0);
  const Tensor& b = required_tensor(node, in, 1);
  MatMulShapes s = matmul_shapes(node, static_shape(a), static_shape(b));
  check_out_type(node, out_types, 0, s.out_shape(),
                 matmul_dtype(node, a->dtype.str(), b->dtype.str()));
  size_t nb = s.batch.size();
  // Index of one operand: its own (right-aligned) batch dims, 0 where broadcast.
  auto batch_index = [&](const std::vector<int64_t>& shape, bool vec, const std::vector<Var>& i) {
    std::vector<Expr> idx;
    size_t rb = vec ? 0 : shape.size() - 2;
    for (size_t d = 0; d < rb; ++d)
      idx.push_back(shape[d] == 1 ? Expr(int64_t{0}) : Expr(i[nb - rb + d]));
    return idx;
  };
  IterVar k = ir::reduce_axis(s.k, "k");
  Tensor y = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> ai = batch_index(s.a, s.a_vec, i);
        std::vector<Expr> bi = batch_index(s.b, s.b_vec, i);
        if (!s.a_vec) ai.push_back(i[nb]);
        ai.push_back(k->var);
        bi.push_back(k->var);
        if (!s.b_vec) bi.push_back(i.back());
        return ir::sum(ir::read(a, ai) * ir::read(b, bi), {k});
      },
      node.name + ".matmul");
  return {y};
}

}  // namespace

void register_nn_ops() {
  register_op({"Conv", OpPattern::kAnchor, conv_evaluate_any, conv_compute, {}});
  register_op({"ConvTranspose",
               OpPattern::kAnchor,
               conv_transpose_evaluate_any,
               conv_transpose_compute,
               {}});
  register_op({"Gemm", OpPattern::kAnchor, gemm_evaluate, gemm_compute, {}});
  register_op({"MatMul", OpPattern::kAnchor, matmul_evaluate, matmul_compute, {}});
}

}  // namespace kiln::graph
