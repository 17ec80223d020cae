// The quantized operators of the default ONNX domain: QuantizeLinear and
// DequantizeLinear (opset 10 and 13: per-tensor, and per-axis with opset 13's
// `axis`), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul
// and QLinearConv.
//
// evaluate() is the exact ONNX reference: integer products accumulate in
// int32 (no float anywhere in MatMulInteger/ConvInteger), and the QLinear ops
// requantize as ONNX Runtime does, y = saturate(round_half_even(float(acc +
// bias) * M[c]) + zp_y) with M[c] = x_scale * w_scale[c] / y_scale computed
// in float32 (docs/quantization.md). Rounding is half to even everywhere.
//
// Only QuantizeLinear and DequantizeLinear have a compute: they are
// elementwise (kBroadcast: the scale and zero point are read per tensor or
// per channel) and run on the generic schedule or as a template's epilogue.
// The other five have none: graph/passes/fold_qdq.h's expand_quantized_ops
// rewrites them into DequantizeLinear -> the float Conv/MatMul ->
// QuantizeLinear (or a Cast to int32), which the float templates run.
#include "graph/ops/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "graph/ops/window.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers

// ---- quantization parameters ------------------------------------------------------

bool is_q8(const std::string& dtype) { return dtype == "uint8" || dtype == "int8"; }

int32_t qmin_of(const std::string& dtype) { return dtype == "int8" ? -128 : 0; }
int32_t qmax_of(const std::string& dtype) { return dtype == "int8" ? 127 : 255; }

// A scale and zero point, per tensor (one value) or per channel along `axis`
// of the quantized tensor.
struct QParams {
  std::vector<float> scale;  // empty for the integer ops, which have no scale
  std::vector<int32_t> zp;
  std::string qtype;  // the zero point's dtype (that of the quantized tensor)
  int64_t axis = -1;  // -1: per tensor

  float s(int64_t c) const { return scale.size() == 1 ? scale[0] : scale[static_cast<size_t>(c)]; }
  int32_t z(int64_t c) const { return zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(c)]; }
};

// The number of values a per-channel parameter has: 1 for a scalar or a
// one-element tensor (per tensor, as ONNX Runtime reads it), else its only dim.
// `what` names the input in errors.
int64_t param_count(const Node& node, const Shape& shape, const std::string& what) {
  int64_t n = numel(shape);
  if (n == 1 && shape.size() <= 1) return 1;
  if (shape.size() != 1)
    fail(node, what + " must be a scalar or a 1-D tensor, got shape " + shape_str(shape));
  return n;
}

std::vector<int32_t> zp_values(const Node& node, const Initializer& zp) {
  std::vector<int32_t> v;
  for (double d : to_doubles(node, zp)) v.push_back(static_cast<int32_t>(d));
  return v;
}

// For a per-axis parameter whose node's `axis` attribute names no axis of the rank-`rank`
// quantized tensor: why, naming the axis and the valid range; "" otherwise (no attribute, or
// one in range). DequantizeLinear's axis=4 on a rank-4 weight used to read as "x_scale must be
// a scalar (per-tensor)" (issue 65 #13).
std::string axis_out_of_range(const Node& node, const Shape& x) {
  if (!node.attrs.count("axis")) return "";
  const int64_t r = static_cast<int64_t>(x.size()), axis = attr_int(node, "axis", 1);
  if (axis >= -r && axis < r) return "";
  return "axis " + std::to_string(axis) + " is out of range for the rank-" + std::to_string(r) +
         " quantized tensor " + shape_str(x) + " (valid: " + std::to_string(-r) + " to " +
         std::to_string(r - 1) + ")";
}

// Checks the types of a scale / zero point pair of a quantized tensor of
// shape `x`: ONNX's shape rule. `axis` is the channel axis a 1-D parameter
// runs along (already normalized), or -1 when only per-tensor parameters are
// allowed. `scale` is nullptr for the integer ops, `zp` when omitted. Returns
// the number of channels (1: per tensor).
int64_t check_qparam_types(const Node& node, const TensorType* scale, const TensorType* zp,
                           const Shape& x, int64_t axis, const std::string& sname,
                           const std::string& zname) {
  if (zp && !is_q8(zp->dtype) && zp->dtype != "int32")
    fail(node, zname + " has dtype " + zp->dtype + "; only uint8 and int8 are supported");
  int64_t ns = 1;
  if (scale) {
    if (scale->dtype != "float32")
      fail(node, sname + " has dtype " + scale->dtype + "; it must be float32");
    ns = param_count(node, scale->shape, sname);
  }
  int64_t nz = zp ? param_count(node, zp->shape, zname) : 1;
  if (scale && zp && zp->shape != scale->shape && !(ns == 1 && nz == 1))
    fail(node, zname + " " + shape_str(zp->shape) + " must have the shape of " + sname + " " +
                   shape_str(scale->shape));
  int64_t n = std::max(ns, nz);
  if (n > 1) {
    if (axis < 0) {
      if (std::string why = axis_out_of_range(node, x); !why.empty())
        fail(node, why + "; " + (ns > 1 ? sname : zname) + " has " + std::to_string(n) +
                       " values, one per channel of that axis");
      fail(node, (ns > 1 ? sname : zname) + " must be a scalar (per-tensor), got " +
                     std::to_string(n) + " values");
    }
    if (x[static_cast<size_t>(axis)] != n)
      fail(node, (ns > 1 ? sname : zname) + " has " + std::to_string(n) + " values but axis " +
                     std::to_string(axis) + " of the quantized tensor " + shape_str(x) + " has " +
                     std::to_string(x[static_cast<size_t>(axis)]));
  }
  return n;
}

// Checks (check_qparam_types) and reads a scale / zero point pair; an
// omitted zero point is 0 of `default_type`.
QParams read_qparams(const Node& node, const Initializer* scale, const Initializer* zp,
                     const Shape& x, int64_t axis, const std::string& sname,
                     const std::string& zname, const std::string& default_type) {
  int64_t n = check_qparam_types(node, scale ? &scale->type : nullptr, zp ? &zp->type : nullptr, x,
                                 axis, sname, zname);
  QParams q;
  q.qtype = zp ? zp->type.dtype : default_type;
  if (scale) q.scale = scale->as<float>();
  q.zp = zp ? zp_values(node, *zp) : std::vector<int32_t>{0};
  if (n > 1) {
    q.axis = axis;
    if (scale && q.scale.size() == 1) q.scale.assign(static_cast<size_t>(n), q.scale[0]);
    if (q.zp.size() == 1) q.zp.assign(static_cast<size_t>(n), q.zp[0]);
  }
  return q;
}

// ---- host arithmetic ----------------------------------------------------------------

// Round half to even, independent of the floating-point environment.
float round_half_even(float v) {
  float f = std::floor(v);
  float d = v - f;  // exact: v and floor(v) are within one binade
  if (d > 0.5f) return f + 1.0f;
  if (d < 0.5f) return f;
  return std::fmod(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

// saturate(round_half_even(v) + zp) into [qmin, qmax]: ONNX's QuantizeLinear
// after the division (and the QLinear ops' requantization after the multiply).
int32_t saturate_round(float v, int32_t zp, int32_t qmin, int32_t qmax) {
  if (std::isnan(v)) return std::clamp(zp, qmin, qmax);
  // Clamped before the cast so that huge values cannot overflow int32.
  float r =
      round_half_even(std::clamp(v, static_cast<float>(qmin - zp), static_cast<float>(qmax - zp)));
  return std::clamp(static_cast<int32_t>(r) + zp, qmin, qmax);
}

void store_q(Initializer& out, int64_t i, int32_t v) {
  if (out.type.dtype == "uint8")
    data_of<uint8_t>(out)[i] = static_cast<uint8_t>(v);
  else
    data_of<int8_t>(out)[i] = static_cast<int8_t>(v);
}

// The elements of a uint8 / int8 / int32 tensor as int32.
std::vector<int32_t> int_values(const Node& node, const Initializer& t, const std::string& what) {
  if (!is_q8(t.type.dtype) && t.type.dtype != "int32")
    fail(node, what + " has dtype " + t.type.dtype + "; only uint8, int8 and int32 are supported");
  return zp_values(node, t);
}

// The channel index of flat element i along `axis` of shape x (0 when per tensor).
struct ChannelOf {
  int64_t stride = 1, n = 1;
  ChannelOf(const Shape& x, int64_t axis) {
    if (axis < 0) return;
    n = x[static_cast<size_t>(axis)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.size(); ++d) stride *= x[d];
  }
  int64_t operator()(int64_t i) const { return n == 1 ? 0 : (i / stride) % n; }
};

// ---- QuantizeLinear / DequantizeLinear ------------------------------------------------

// The axis a 1-D scale runs along: opset 13's attribute (default 1); opset
// 10's QuantizeLinear has no axis and only per-tensor scales, which is the
// same rule since a per-tensor scale ignores the axis. -1 when the axis is
// not one of x's (a 1-D x with the default axis 1): then only per-tensor
// parameters pass check_qparam_types, as in ONNX Runtime.
int64_t channel_axis(const Node& node, size_t rank) {
  int64_t r = static_cast<int64_t>(rank), axis = attr_int(node, "axis", 1);
  if (axis < -r || axis >= r) return -1;
  return axis < 0 ? axis + r : axis;
}

std::vector<Initializer> eval_quantize(const Node& node,
                                       const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer* scale = optional_input(ins, 1);
  if (!scale) fail(node, "input 1 (y_scale) is missing");
  if (x.type.dtype != "float32" && x.type.dtype != "int32")
    fail(node, "x has dtype " + x.type.dtype + "; only float32 and int32 are supported");
  const Initializer* zp = optional_input(ins, 2);
  if (zp && !is_q8(zp->type.dtype))
    fail(node, "y_zero_point has dtype " + zp->type.dtype + "; only uint8 and int8 are supported");
  QParams q = read_qparams(node, scale, zp, x.type.shape, channel_axis(node, x.type.shape.size()),
                           "y_scale", "y_zero_point", "uint8");
  Initializer y = make_tensor(q.qtype, x.type.shape);
  ChannelOf ch(x.type.shape, q.axis);
  int32_t lo = qmin_of(q.qtype), hi = qmax_of(q.qtype);
  int64_t n = x.type.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    float v = x.type.dtype == "float32" ? data_of<float>(x)[i]
                                        : static_cast<float>(data_of<int32_t>(x)[i]);
    int64_t c = ch(i);
    store_q(y, i, saturate_round(v / q.s(c), q.z(c), lo, hi));
  }
  return {std::move(y)};
}

std::vector<Initializer> eval_dequantize(const Node& node,
                                         const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer* scale = optional_input(ins, 1);
  if (!scale) fail(node, "input 1 (x_scale) is missing");
  std::vector<int32_t> xv = int_values(node, x, "x");
  const Initializer* zp = optional_input(ins, 2);
  if (zp && zp->type.dtype != x.type.dtype)
    fail(node, "x_zero_point has dtype " + zp->type.dtype + " but x has " + x.type.dtype);
  QParams q = read_qparams(node, scale, zp, x.type.shape, channel_axis(node, x.type.shape.size()),
                           "x_scale", "x_zero_point", x.type.dtype);
  if (x.type.dtype == "int32" && std::any_of(q.zp.begin(), q.zp.end(), [](int32_t z) { return z; }))
    fail(node, "an int32 x must have zero point 0");
  Initializer y = make_tensor("float32", x.type.shape);
  ChannelOf ch(x.type.shape, q.axis);
  float* yp = data_of<float>(y);
  for (size_t i = 0; i < xv.size(); ++i) {
    int64_t c = ch(static_cast<int64_t>(i));
    // ONNX Runtime subtracts in int32 and converts once: the same float.
    yp[i] = static_cast<float>(xv[i] - q.z(c)) * q.s(c);
  }
  return {std::move(y)};
}

// Reads a scale / zero point tensor in a TE: its one element for per-tensor
// parameters (any rank), else the element at channel index `c`.
Expr read_param(const ir::Tensor& t, const Expr& c) {
  Shape s = static_shape(t);
  if (numel(s) == 1) return ir::read(t, std::vector<Expr>(s.size(), Expr(int64_t{0})));
  return ir::read(t, {c});
}

// round_half_even(v) in a kernel: llvm.roundeven, one instruction where the
// target has one (vrndscaleps $8 / vroundps $8, frintn), exact for every float
// as kiln.Requantize's rounding is. (It was floor and selects, 9 instructions
// per vector in every residual conv epilogue of a QDQ model; llvm.round rounds
// halves away from zero and floor(v + 0.5) is off where v + 0.5 is inexact:
// v = 0.5 + 2^-24 sums to 1.0, a false tie; the unit test has it.)
Expr round_half_even_expr(const Expr& v) { return ir::round_even(v); }

// Shared checks of compute: a scale / zero point that is a graph constant is
// validated like evaluate does; a computed one (DynamicQuantizeLinear's
// expansion) must be a scalar.
void check_compute_params(const Node& node, const ComputeInputs& in, const Shape& x,
                          const std::string& sname, const std::string& zname,
                          const std::string& default_type) {
  const Initializer* s = const_input(in, 1);
  const Initializer* z = const_input(in, 2);
  if (s && (in.tensors.size() <= 2 || !in.tensors[2] || z)) {
    read_qparams(node, s, z, x, channel_axis(node, x.size()), sname, zname, default_type);
    return;
  }
  for (size_t i = 1; i < 3 && i < in.tensors.size(); ++i) {
    if (!in.tensors[i]) continue;
    Shape ps = static_shape(in.tensors[i]);
    int64_t axis = channel_axis(node, x.size());
    if (numel(ps) != 1 && axis < 0)
      if (std::string why = axis_out_of_range(node, x); !why.empty()) fail(node, why);
    if (numel(ps) != 1 && (ps.size() != 1 || axis < 0 || ps[0] != x[static_cast<size_t>(axis)]))
      fail(node, (i == 1 ? sname : zname) + " of shape " + shape_str(ps) +
                     " does not match the quantized tensor " + shape_str(x));
  }
}

std::vector<ir::Tensor> compute_quantize(const Node& node, const ComputeInputs& in,
                                         const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& scale = required_tensor(node, in, 1);
  ir::Tensor zp = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  Shape xs = static_shape(x);
  check_compute_params(node, in, xs, "y_scale", "y_zero_point", "uint8");
  const std::string qtype = out_types.at(0).dtype;
  if (!is_q8(qtype)) fail(node, "output dtype " + qtype + " is not uint8 or int8");
  check_out_type(node, out_types, 0, xs, qtype);
  int64_t axis = channel_axis(node, xs.size());
  ir::DataType f32 = ir::DataType::f32();
  float lo = static_cast<float>(qmin_of(qtype)), hi = static_cast<float>(qmax_of(qtype));
  return {ir::compute(
      shape_exprs(xs),
      [&](const std::vector<ir::Var>& i) {
        Expr c = axis >= 0 ? Expr(i[static_cast<size_t>(axis)]) : Expr(int64_t{0});
        Expr xv = ir::read(x, vars_to_exprs(i));
        if (xv.dtype() != f32) xv = ir::cast(f32, xv);
        // Division, not a multiply by 1/scale: ONNX and ONNX Runtime divide.
        Expr v = xv / read_param(scale, c);
        Expr z = zp ? ir::cast(f32, read_param(zp, c)) : ir::make_float(0.0);
        // Clamp before rounding (the zero point is an integer, so this is
        // saturate(round(v) + zp)); the cast then never sees an out-of-range value.
        v = ir::max(ir::min(v, ir::make_float(hi) - z), ir::make_float(lo) - z);
        return ir::cast(ir_dtype(qtype), round_half_even_expr(v) + z);
      },
      node.name)};
}

std::vector<ir::Tensor> compute_dequantize(const Node& node, const ComputeInputs& in,
                                           const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& scale = required_tensor(node, in, 1);
  ir::Tensor zp = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  Shape xs = static_shape(x);
  check_compute_params(node, in, xs, "x_scale", "x_zero_point", "uint8");
  check_out_type(node, out_types, 0, xs, "float32");
  int64_t axis = channel_axis(node, xs.size());
  ir::DataType i32 = ir::DataType::i32(), f32 = ir::DataType::f32();
  return {ir::compute(
      shape_exprs(xs),
      [&](const std::vector<ir::Var>& i) {
        Expr c = axis >= 0 ? Expr(i[static_cast<size_t>(axis)]) : Expr(int64_t{0});
        Expr xv = ir::cast(i32, ir::read(x, vars_to_exprs(i)));
        if (zp) xv = xv - ir::cast(i32, read_param(zp, c));
        return ir::cast(f32, xv) * read_param(scale, c);
      },
      node.name)};
}

// ---- kiln.QuantizeDequantize ----------------------------------------------------------------

// kiln.QuantizeDequantize(x, scale, zero_point; qmin, qmax) is exactly
// DequantizeLinear(QuantizeLinear(x)) with per-tensor parameters, the scale and
// zero point both float32 scalars (the zero point an integer value) and the
// quantized range as attributes: float in, float out. expand_quantized_ops
// writes it for a Q whose every reader is a DQ with its parameters, so that the
// pair stays float, joins NCHW[x]c layouts and fuses into a template's
// epilogue instead of costing two kernels and two layout transforms.
struct FakeQuant {
  float scale, zp, qmin, qmax;
};

FakeQuant fake_quant_params(const Node& node, const Initializer& s, const Initializer& z) {
  if (s.type.dtype != "float32" || z.type.dtype != "float32" || s.type.num_elements() != 1 ||
      z.type.num_elements() != 1)
    fail(node, "scale and zero point must be float32 scalars");
  return {s.as<float>()[0], z.as<float>()[0], static_cast<float>(attr_int(node, "qmin", 0)),
          static_cast<float>(attr_int(node, "qmax", 255))};
}

std::vector<Initializer> eval_fake_quant(const Node& node,
                                         const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  require_f32(node, x, "x");
  FakeQuant p = fake_quant_params(node, required_input(node, ins, 1), required_input(node, ins, 2));
  Initializer y = make_tensor("float32", x.type.shape);
  const float* xp = data_of<float>(x);
  float* yp = data_of<float>(y);
  int32_t zp = static_cast<int32_t>(p.zp);
  for (int64_t i = 0; i < x.type.num_elements(); ++i) {
    int32_t q = saturate_round(xp[i] / p.scale, zp, static_cast<int32_t>(p.qmin),
                               static_cast<int32_t>(p.qmax));
    yp[i] = static_cast<float>(q - zp) * p.scale;
  }
  return {std::move(y)};
}

// The scale and zero point are constant inputs (expand_quantized_ops writes
// them so): immediates in the kernel, no loads, and the clamp bounds fold.
std::vector<ir::Tensor> compute_fake_quant(const Node& node, const ComputeInputs& in,
                                           const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const Initializer* sc = const_input(in, 1);
  const Initializer* zc = const_input(in, 2);
  if (!sc || !zc) fail(node, "the scale and zero point must be graph constants");
  FakeQuant p = fake_quant_params(node, *sc, *zc);
  const TensorType& ot = out_types.at(0);
  return {ir::compute(
      shape_exprs(ot.shape),
      [&](const std::vector<ir::Var>& i) {
        Expr s = ir::make_float(p.scale);
        // Division, as QuantizeLinear; clamped first, so the result is
        // round(v) + zp - zp: the integer round(v) itself, exactly.
        Expr v = ir::read(x, vars_to_exprs(i)) / s;
        v = ir::max(ir::min(v, ir::make_float(p.qmax - p.zp)), ir::make_float(p.qmin - p.zp));
        return round_half_even_expr(v) * s;
      },
      node.name)};
}

// ---- DynamicQuantizeLinear -----------------------------------------------------------------

std::vector<Initializer> eval_dynamic_quantize(const Node& node,
                                               const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  require_f32(node, x, "x");
  const float* xp = data_of<float>(x);
  int64_t n = x.type.num_elements();
  // The range always includes 0 so that 0 is exactly representable.
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, xp[i]);
    hi = std::max(hi, xp[i]);
  }
  // ONNX Runtime's rule for an all-zero input (ONNX leaves 0/0 undefined).
  float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  int32_t zp = saturate_round(-lo / scale, 0, 0, 255);
  Initializer y = make_tensor("uint8", x.type.shape);
  for (int64_t i = 0; i < n; ++i) store_q(y, i, saturate_round(xp[i] / scale, zp, 0, 255));
  Initializer s = make_tensor("float32", {});
  data_of<float>(s)[0] = scale;
  Initializer z = make_tensor("uint8", {});
  data_of<uint8_t>(z)[0] = static_cast<uint8_t>(zp);
  return {std::move(y), std::move(s), std::move(z)};
}

// ---- MatMulInteger / QLinearMatMul -----------------------------------------------------------

// numpy matmul shapes for rank >= 2 operands: batch dims broadcast.
struct MatMulShapes {
  Shape batch;  // broadcast batch dims of the output
  int64_t m, k, n;
  Shape a, b;
  Shape out() const {
    Shape o = batch;
    o.push_back(m);
    o.push_back(n);
    return o;
  }
};

MatMulShapes matmul_shapes(const Node& node, const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2)
    fail(node,
         "operands of rank < 2 are not supported; got " + shape_str(a) + " and " + shape_str(b));
  MatMulShapes s;
  s.a = a;
  s.b = b;
  s.m = a[a.size() - 2];
  s.k = a.back();
  s.n = b.back();
  if (b[b.size() - 2] != s.k)
    fail(node, "A " + shape_str(a) + " and B " + shape_str(b) + " do not multiply");
  s.batch = broadcast_shapes(node, {Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2)});
  return s;
}

// acc[batch, m, n] = sum_k (a - a_zp[m]) * (b - b_zp[n]) in int32, exactly.
std::vector<int32_t> int_matmul(const Node& node, const MatMulShapes& s,
                                const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                const QParams& az, const QParams& bz) {
  Shape out = s.out();
  std::vector<int32_t> acc(static_cast<size_t>(numel(out)), 0);
  Shape a_batch(s.a.begin(), s.a.end() - 2), b_batch(s.b.begin(), s.b.end() - 2);
  int64_t mk = s.m * s.k, kn = s.k * s.n, mn = s.m * s.n;
  (void)node;
  for_each_broadcast(s.batch, {a_batch, b_batch}, [&](int64_t o, const std::vector<int64_t>& off) {
    const int32_t* ap = a.data() + off[0] * mk;
    const int32_t* bp = b.data() + off[1] * kn;
    int32_t* yp = acc.data() + o * mn;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        int32_t sum = 0;
        for (int64_t kk = 0; kk < s.k; ++kk)
          sum += (ap[i * s.k + kk] - az.z(i)) * (bp[kk * s.n + j] - bz.z(j));
        yp[i * s.n + j] = sum;
      }
  });
  return acc;
}

// A quantized operand: uint8 or int8 only (the int32 of DequantizeLinear is
// not an operand type of the integer ops).
std::vector<int32_t> q8_values(const Node& node, const Initializer& t, const std::string& what) {
  if (!is_q8(t.type.dtype))
    fail(node, what + " has dtype " + t.type.dtype + "; only uint8 and int8 are supported");
  return zp_values(node, t);
}

void check_zp_type(const Node& node, const Initializer* zp, const Initializer& of,
                   const std::string& zname, const std::string& what) {
  if (zp && zp->type.dtype != of.type.dtype)
    fail(node, zname + " has dtype " + zp->type.dtype + " but " + what + " has " + of.type.dtype);
}

std::vector<Initializer> eval_matmul_integer(const Node& node,
                                             const std::vector<const Initializer*>& ins) {
  const Initializer& a = required_input(node, ins, 0);
  const Initializer& b = required_input(node, ins, 1);
  const Initializer* azp = optional_input(ins, 2);
  const Initializer* bzp = optional_input(ins, 3);
  std::vector<int32_t> av = q8_values(node, a, "A"), bv = q8_values(node, b, "B");
  check_zp_type(node, azp, a, "a_zero_point", "A");
  check_zp_type(node, bzp, b, "b_zero_point", "B");
  MatMulShapes s = matmul_shapes(node, a.type.shape, b.type.shape);
  // a's zero point may be per row (M values), b's per column (N values).
  QParams az = read_qparams(node, nullptr, azp, a.type.shape, a.type.shape.size() - 2, "",
                            "a_zero_point", a.type.dtype);
  QParams bz = read_qparams(node, nullptr, bzp, b.type.shape, b.type.shape.size() - 1, "",
                            "b_zero_point", b.type.dtype);
  std::vector<int32_t> acc = int_matmul(node, s, av, bv, az, bz);
  Initializer y = make_tensor("int32", s.out());
  std::copy(acc.begin(), acc.end(), data_of<int32_t>(y));
  return {std::move(y)};
}

std::vector<Initializer> eval_qlinear_matmul(const Node& node,
                                             const std::vector<const Initializer*>& ins) {
  for (size_t i = 0; i < 8; ++i) required_input(node, ins, i);
  const Initializer& a = *ins[0];
  const Initializer& b = *ins[3];
  std::vector<int32_t> av = q8_values(node, a, "a"), bv = q8_values(node, b, "b");
  check_zp_type(node, ins[2], a, "a_zero_point", "a");
  check_zp_type(node, ins[5], b, "b_zero_point", "b");
  MatMulShapes s = matmul_shapes(node, a.type.shape, b.type.shape);
  Shape out = s.out();
  QParams aq = read_qparams(node, ins[1], ins[2], a.type.shape, a.type.shape.size() - 2, "a_scale",
                            "a_zero_point", "uint8");
  QParams bq = read_qparams(node, ins[4], ins[5], b.type.shape, b.type.shape.size() - 1, "b_scale",
                            "b_zero_point", "uint8");
  if (!is_q8(ins[7]->type.dtype))
    fail(node,
         "y_zero_point has dtype " + ins[7]->type.dtype + "; only uint8 and int8 are supported");
  QParams yq =
      read_qparams(node, ins[6], ins[7], out, out.size() - 1, "y_scale", "y_zero_point", "uint8");
  // kiln's 9th input (not ONNX's: fold_qdq writes it for a Gemm's or an
  // Add's bias): int32 [N] in units of a_scale * b_scale[n], added to the
  // accumulator before the requantization, as QLinearConv's B.
  std::vector<int32_t> bias;
  if (const Initializer* b = optional_input(ins, 8)) {
    if (b->type.dtype != "int32") fail(node, "B has dtype " + b->type.dtype + "; it must be int32");
    if (b->type.shape != Shape{s.n})
      fail(node,
           "B " + shape_str(b->type.shape) + " must have shape [" + std::to_string(s.n) + "]");
    bias = b->as<int32_t>();
  }
  std::vector<int32_t> acc = int_matmul(node, s, av, bv, aq, bq);
  Initializer y = make_tensor(yq.qtype, out);
  int32_t lo = qmin_of(yq.qtype), hi = qmax_of(yq.qtype);
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t col = static_cast<int64_t>(i) % s.n, row = static_cast<int64_t>(i) / s.n % s.m;
    float mult = aq.s(row) * bq.s(col) / yq.s(col);
    int32_t a = acc[i] + (bias.empty() ? 0 : bias[static_cast<size_t>(col)]);
    store_q(y, static_cast<int64_t>(i),
            saturate_round(static_cast<float>(a) * mult, yq.z(col), lo, hi));
  }
  return {std::move(y)};
}

// ---- ConvInteger / QLinearConv ----------------------------------------------------------------

struct QConvShapes {
  int64_t n, c, h, w, m, kh, kw, group;
  Window win;
  Shape out() const { return {n, m, win.out[0], win.out[1]}; }
};

QConvShapes qconv_shapes(const Node& node, const Shape& x, const Shape& wt) {
  if (x.size() != 4 || wt.size() != 4)
    fail(node, "only 2-D convolution (NCHW input, OIHW weight) is supported; got input " +
                   shape_str(x) + " and weight " + shape_str(wt));
  QConvShapes s{x[0], x[1], x[2], x[3], wt[0], wt[2], wt[3], attr_int(node, "group", 1), {}};
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0)
    fail(node, "group " + std::to_string(s.group) + " does not divide the " + std::to_string(s.c) +
                   " input and " + std::to_string(s.m) + " output channels");
  if (wt[1] != s.c / s.group)
    fail(node, "weight " + shape_str(wt) + " needs " + std::to_string(s.c / s.group) +
                   " input channels per group");
  s.win = conv_window(node, {s.h, s.w}, {s.kh, s.kw});
  return s;
}

// acc[n, m, oh, ow] = sum (x - x_zp) * (w - w_zp[m]) in int32, exactly.
// Padding reads x_zp (a zero after the subtraction), as in ONNX.
std::vector<int32_t> int_conv(const QConvShapes& s, const std::vector<int32_t>& x,
                              const std::vector<int32_t>& w, int32_t x_zp, const QParams& wz) {
  const Window& win = s.win;
  int64_t oh_n = win.out[0], ow_n = win.out[1], cg = s.c / s.group, mg = s.m / s.group;
  std::vector<int32_t> acc(static_cast<size_t>(s.n * s.m * oh_n * ow_n), 0);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t m = 0; m < s.m; ++m) {
      int64_t c0 = (m / mg) * cg;
      int32_t wzp = wz.z(m);
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          int32_t sum = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < s.kh; ++ky) {
              int64_t ih = win.start(0, oh) + ky * win.dilation[0];
              if (ih < 0 || ih >= s.h) continue;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                int64_t iw = win.start(1, ow) + kx * win.dilation[1];
                if (iw < 0 || iw >= s.w) continue;
                sum += (x[((n * s.c + c0 + c) * s.h + ih) * s.w + iw] - x_zp) *
                       (w[((m * cg + c) * s.kh + ky) * s.kw + kx] - wzp);
              }
            }
          acc[((n * s.m + m) * oh_n + oh) * ow_n + ow] = sum;
        }
    }
  return acc;
}

std::vector<Initializer> eval_conv_integer(const Node& node,
                                           const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& w = required_input(node, ins, 1);
  const Initializer* xzp = optional_input(ins, 2);
  const Initializer* wzp = optional_input(ins, 3);
  std::vector<int32_t> xv = q8_values(node, x, "x"), wv = q8_values(node, w, "w");
  check_zp_type(node, xzp, x, "x_zero_point", "x");
  check_zp_type(node, wzp, w, "w_zero_point", "w");
  QConvShapes s = qconv_shapes(node, x.type.shape, w.type.shape);
  QParams xz = read_qparams(node, nullptr, xzp, x.type.shape, -1, "", "x_zero_point", "uint8");
  QParams wz = read_qparams(node, nullptr, wzp, w.type.shape, 0, "", "w_zero_point", "uint8");
  std::vector<int32_t> acc = int_conv(s, xv, wv, xz.z(0), wz);
  Initializer y = make_tensor("int32", s.out());
  std::copy(acc.begin(), acc.end(), data_of<int32_t>(y));
  return {std::move(y)};
}

std::vector<Initializer> eval_qlinear_conv(const Node& node,
                                           const std::vector<const Initializer*>& ins) {
  for (size_t i = 0; i < 8; ++i) required_input(node, ins, i);
  const Initializer& x = *ins[0];
  const Initializer& w = *ins[3];
  const Initializer* bias = optional_input(ins, 8);
  std::vector<int32_t> xv = q8_values(node, x, "x"), wv = q8_values(node, w, "w");
  check_zp_type(node, ins[2], x, "x_zero_point", "x");
  check_zp_type(node, ins[5], w, "w_zero_point", "w");
  if (!is_q8(ins[7]->type.dtype))
    fail(node,
         "y_zero_point has dtype " + ins[7]->type.dtype + "; only uint8 and int8 are supported");
  QConvShapes s = qconv_shapes(node, x.type.shape, w.type.shape);
  QParams xq =
      read_qparams(node, ins[1], ins[2], x.type.shape, -1, "x_scale", "x_zero_point", "uint8");
  QParams wq =
      read_qparams(node, ins[4], ins[5], w.type.shape, 0, "w_scale", "w_zero_point", "uint8");
  QParams yq = read_qparams(node, ins[6], ins[7], s.out(), -1, "y_scale", "y_zero_point", "uint8");
  std::vector<int32_t> b;
  if (bias) {
    if (bias->type.dtype != "int32")
      fail(node, "B has dtype " + bias->type.dtype + "; it must be int32");
    if (bias->type.shape != Shape{s.m})
      fail(node,
           "B " + shape_str(bias->type.shape) + " must have shape [" + std::to_string(s.m) + "]");
    b = bias->as<int32_t>();
  }
  std::vector<int32_t> acc = int_conv(s, xv, wv, xq.z(0), wq);
  Initializer y = make_tensor(yq.qtype, s.out());
  int32_t lo = qmin_of(yq.qtype), hi = qmax_of(yq.qtype);
  int64_t plane = s.win.out[0] * s.win.out[1];
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t m = static_cast<int64_t>(i) / plane % s.m;
    // M[m] in float32, in ONNX Runtime's order: (x_scale * w_scale[m]) / y_scale.
    float mult = xq.s(0) * wq.s(m) / yq.s(0);
    int32_t a = acc[i] + (bias ? b[static_cast<size_t>(m)] : 0);
    store_q(y, static_cast<int64_t>(i),
            saturate_round(static_cast<float>(a) * mult, yq.z(0), lo, hi));
  }
  return {std::move(y)};
}

// ---- the type rules -------------------------------------------------------------------------

const TensorType* type_at(const std::vector<const TensorType*>& in, size_t i) {
  return i < in.size() ? in[i] : nullptr;
}

const TensorType& need(const Node& node, const std::vector<const TensorType*>& in, size_t i,
                       const std::string& what) {
  const TensorType* t = type_at(in, i);
  if (!t) fail(node, "input " + std::to_string(i) + " (" + what + ") is missing");
  return *t;
}

void need_q8(const Node& node, const TensorType& t, const std::string& what) {
  if (!is_q8(t.dtype))
    fail(node, what + " has dtype " + t.dtype + "; only uint8 and int8 are supported");
}

// A zero point of a uint8 / int8 operand must have the operand's dtype.
void need_same(const Node& node, const TensorType* zp, const TensorType& of,
               const std::string& zname, const std::string& what) {
  if (zp && zp->dtype != of.dtype)
    fail(node, zname + " has dtype " + zp->dtype + " but " + what + " has " + of.dtype);
}

std::vector<TensorType> output_types(const Node& node, const std::vector<const TensorType*>& in) {
  const std::string& op = node.op_type;
  if (op == "QuantizeLinear") {
    const TensorType& x = need(node, in, 0, "x");
    const TensorType& s = need(node, in, 1, "y_scale");
    const TensorType* z = type_at(in, 2);
    if (x.dtype != "float32" && x.dtype != "int32")
      fail(node, "x has dtype " + x.dtype + "; only float32 and int32 are supported");
    if (z) need_q8(node, *z, "y_zero_point");
    check_qparam_types(node, &s, z, x.shape, channel_axis(node, x.shape.size()), "y_scale",
                       "y_zero_point");
    return {{z ? z->dtype : "uint8", x.shape}};
  }
  if (op == "DequantizeLinear") {
    const TensorType& x = need(node, in, 0, "x");
    const TensorType& s = need(node, in, 1, "x_scale");
    const TensorType* z = type_at(in, 2);
    if (!is_q8(x.dtype) && x.dtype != "int32")
      fail(node, "x has dtype " + x.dtype + "; only uint8, int8 and int32 are supported");
    need_same(node, z, x, "x_zero_point", "x");
    check_qparam_types(node, &s, z, x.shape, channel_axis(node, x.shape.size()), "x_scale",
                       "x_zero_point");
    return {{"float32", x.shape}};
  }
  if (op == "DynamicQuantizeLinear") {
    const TensorType& x = need(node, in, 0, "x");
    if (x.dtype != "float32") fail(node, "x has dtype " + x.dtype + "; it must be float32");
    return {{"uint8", x.shape}, {"float32", {}}, {"uint8", {}}};
  }
  bool qlinear = op == "QLinearMatMul" || op == "QLinearConv";
  bool conv = op == "QLinearConv" || op == "ConvInteger";
  // Operand positions: QLinear* (x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp[, B]),
  // *Integer (x, w[, x_zp[, w_zp]]).
  size_t ia = 0, ib = qlinear ? 3 : 1, iaz = 2, ibz = qlinear ? 5 : 3;
  std::string an = conv ? "x" : "a", bn = conv ? "w" : "b";
  const TensorType& a = need(node, in, ia, an);
  const TensorType& b = need(node, in, ib, bn);
  need_q8(node, a, an);
  need_q8(node, b, bn);
  const TensorType* as = qlinear ? &need(node, in, 1, an + "_scale") : nullptr;
  const TensorType* bs = qlinear ? &need(node, in, 4, bn + "_scale") : nullptr;
  const TensorType* az = qlinear ? &need(node, in, iaz, an + "_zero_point") : type_at(in, iaz);
  const TensorType* bz = qlinear ? &need(node, in, ibz, bn + "_zero_point") : type_at(in, ibz);
  need_same(node, az, a, an + "_zero_point", an);
  need_same(node, bz, b, bn + "_zero_point", bn);
  Shape out;
  if (conv) {
    QConvShapes s = qconv_shapes(node, a.shape, b.shape);
    out = s.out();
    check_qparam_types(node, as, az, a.shape, -1, "x_scale", "x_zero_point");
    check_qparam_types(node, bs, bz, b.shape, 0, "w_scale", "w_zero_point");
    if (const TensorType* bias = qlinear ? type_at(in, 8) : nullptr) {
      if (bias->dtype != "int32") fail(node, "B has dtype " + bias->dtype + "; it must be int32");
      if (bias->shape != Shape{s.m})
        fail(node,
             "B " + shape_str(bias->shape) + " must have shape [" + std::to_string(s.m) + "]");
    }
  } else {
    MatMulShapes s = matmul_shapes(node, a.shape, b.shape);
    out = s.out();
    // a's parameters may be per row (axis -2), b's per column (axis -1).
    check_qparam_types(node, as, az, a.shape, static_cast<int64_t>(a.shape.size()) - 2, "a_scale",
                       "a_zero_point");
    check_qparam_types(node, bs, bz, b.shape, static_cast<int64_t>(b.shape.size()) - 1, "b_scale",
                       "b_zero_point");
    // kiln's optional bias (fold_qdq), as QLinearConv's B but per column.
    if (const TensorType* bias = qlinear ? type_at(in, 8) : nullptr) {
      if (bias->dtype != "int32") fail(node, "B has dtype " + bias->dtype + "; it must be int32");
      if (bias->shape != Shape{s.n})
        fail(node,
             "B " + shape_str(bias->shape) + " must have shape [" + std::to_string(s.n) + "]");
    }
  }
  if (!qlinear) return {{"int32", out}};
  const TensorType& ys = need(node, in, 6, "y_scale");
  const TensorType& yz = need(node, in, 7, "y_zero_point");
  need_q8(node, yz, "y_zero_point");
  check_qparam_types(node, &ys, &yz, out, conv ? -1 : static_cast<int64_t>(out.size()) - 1,
                     "y_scale", "y_zero_point");
  return {{yz.dtype, out}};
}

// evaluate() checks its inputs' types with the rules above first.
EvaluateFn checked(std::vector<Initializer> (*ev)(const Node&,
                                                  const std::vector<const Initializer*>&)) {
  return [ev](const Node& node, const std::vector<const Initializer*>& ins) {
    std::vector<const TensorType*> types;
    for (const Initializer* t : ins) types.push_back(t ? &t->type : nullptr);
    output_types(node, types);
    return ev(node, ins);
  };
}

void reg(const std::string& op, OpPattern pattern,
         std::vector<Initializer> (*ev)(const Node&, const std::vector<const Initializer*>&),
         ComputeFn cp = {}) {
  register_op(OpDef{op, pattern, checked(ev), std::move(cp), {}});
}

}  // namespace

bool is_quantized_op(const std::string& op_type) {
  static const char* const kOps[] = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                     "MatMulInteger",  "QLinearMatMul",    "ConvInteger",
                                     "QLinearConv"};
  for (const char* op : kOps)
    if (op_type == op) return true;
  return false;
}

std::vector<TensorType> quantized_output_types(const Node& node,
                                               const std::vector<const TensorType*>& inputs) {
  return output_types(node, inputs);
}

void register_quantize_ops() {
  reg("QuantizeLinear", OpPattern::kBroadcast, eval_quantize, compute_quantize);
  reg("DequantizeLinear", OpPattern::kBroadcast, eval_dequantize, compute_dequantize);
  // Rewritten before kernels are built (graph/passes/fold_qdq.h).
  reg("DynamicQuantizeLinear", OpPattern::kOpaque, eval_dynamic_quantize);
  reg("MatMulInteger", OpPattern::kOpaque, eval_matmul_integer);
  reg("QLinearMatMul", OpPattern::kOpaque, eval_qlinear_matmul);
  reg("ConvInteger", OpPattern::kOpaque, eval_conv_integer);
  reg("QLinearConv", OpPattern::kOpaque, eval_qlinear_conv);
  register_op(OpDef{"kiln.QuantizeDequantize",
                    OpPattern::kBroadcast,
                    eval_fake_quant,
                    compute_fake_quant,
                    {1, 2}});
}

}  // namespace kiln::graph
