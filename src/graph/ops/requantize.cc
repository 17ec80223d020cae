// kiln.Requantize(x, bias, multiplier; zero_point, qmin, qmax): the integer
// templates' epilogue (graph/passes/apply_templates.cc, docs/quantization.md).
//
//   y = saturate(round_half_even(float(x + bias) * multiplier) + zero_point)
//
// into [qmin, qmax] (uint8 when qmin >= 0, else int8). x is int32 (an int8
// template's accumulator), uint8 or int8; bias int32 and multiplier float32
// broadcast against x (per channel in NCHW[x]c: [1, C/b, 1, 1, b]). This is
// exactly the requantization of QLinearConv / QLinearMatMul as ONNX Runtime
// computes it (multiplier = x_scale * w_scale[c] / y_scale in float32), and
// with bias 128, multiplier 1 and range [0, 255] the exact int8 -> uint8
// shift the templates' uint8 data needs. Elementwise (kBroadcast): it fuses
// into the template as its epilogue, in the register tile.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers

struct Params {
  int32_t zp, qmin, qmax;
  std::string out_dtype;
};

Params params_of(const Node& node) {
  Params p{static_cast<int32_t>(attr_int(node, "zero_point", 0)),
           static_cast<int32_t>(attr_int(node, "qmin", 0)),
           static_cast<int32_t>(attr_int(node, "qmax", 255)), ""};
  if (p.qmin == 0 && p.qmax == 255)
    p.out_dtype = "uint8";
  else if (p.qmin == -128 && p.qmax == 127)
    p.out_dtype = "int8";
  else
    fail(node, "qmin/qmax must be 0/255 (uint8) or -128/127 (int8)");
  if (p.zp < p.qmin || p.zp > p.qmax) fail(node, "zero_point is outside [qmin, qmax]");
  return p;
}

bool integer_input(const std::string& dtype) {
  return dtype == "int32" || dtype == "uint8" || dtype == "int8";
}

float round_half_even_host(float v) {
  float f = std::floor(v);
  float d = v - f;
  if (d > 0.5f) return f + 1.0f;
  if (d < 0.5f) return f;
  return std::fmod(f, 2.0f) == 0.0f ? f : f + 1.0f;
}

std::vector<Initializer> eval_requantize(const Node& node,
                                         const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& b = required_input(node, ins, 1);
  const Initializer& m = required_input(node, ins, 2);
  if (!integer_input(x.type.dtype)) fail(node, "x must be int32, uint8 or int8");
  if (b.type.dtype != "int32") fail(node, "bias must be int32");
  require_f32(node, m, "multiplier");
  Params p = params_of(node);
  Shape out = broadcast_shapes(node, {x.type.shape, b.type.shape, m.type.shape});
  if (out != x.type.shape) fail(node, "bias and multiplier must broadcast to x's shape");
  std::vector<int32_t> xv(static_cast<size_t>(numel(out)));
  visit_dtype(node, x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = data_of<T>(x);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<int32_t>(xp[i]);
  });
  const int32_t* bp = data_of<int32_t>(b);
  const float* mp = data_of<float>(m);
  Initializer y = make_tensor(p.out_dtype, out);
  for_each_broadcast(out, {b.type.shape, m.type.shape}, [&](int64_t i, const Shape& at) {
    float v = static_cast<float>(xv[static_cast<size_t>(i)] + bp[at[0]]) * mp[at[1]];
    v = std::clamp(v, static_cast<float>(p.qmin - p.zp), static_cast<float>(p.qmax - p.zp));
    int32_t q = static_cast<int32_t>(round_half_even_host(v)) + p.zp;
    if (p.out_dtype == "uint8")
      data_of<uint8_t>(y)[i] = static_cast<uint8_t>(q);
    else
      data_of<int8_t>(y)[i] = static_cast<int8_t>(q);
  });
  return {std::move(y)};
}

std::vector<ir::Tensor> compute_requantize(const Node& node, const ComputeInputs& in,
                                           const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& b = required_tensor(node, in, 1);
  const ir::Tensor& m = required_tensor(node, in, 2);
  Params p = params_of(node);
  Shape xs = static_shape(x);
  check_out_type(node, out_types, 0, xs, p.out_dtype);
  ir::DataType i32 = ir::DataType::i32(), f32 = ir::DataType::f32();
  float lo = static_cast<float>(p.qmin - p.zp), hi = static_cast<float>(p.qmax - p.zp);
  return {ir::compute(
      shape_exprs(xs),
      [&](const std::vector<ir::Var>& i) {
        Expr acc = ir::read(x, vars_to_exprs(i));
        if (acc.dtype() != i32) acc = ir::cast(i32, acc);
        Expr v = ir::cast(f32, acc + broadcast_read(b, i)) * broadcast_read(m, i);
        // Clamped before rounding: the bounds are integers, so this is
        // saturate(round(v) + zp), and the cast never sees an out-of-range value.
        v = ir::max(ir::min(v, ir::make_float(hi)), ir::make_float(lo));
        Expr r = ir::cast(i32, ir::round_even(v)) + ir::make_int(p.zp, i32);
        return ir::cast(ir_dtype(p.out_dtype), r);
      },
      node.name)};
}

}  // namespace

void register_requantize_ops() {
  register_op(
      OpDef{"kiln.Requantize", OpPattern::kBroadcast, eval_requantize, compute_requantize, {}});
}

}  // namespace kiln::graph
