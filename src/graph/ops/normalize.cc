// Normalizations by windows and Lp norms: LRN (local response normalization
// across channels), LpNormalization and GlobalLpPool, on float32 and float64.
// (MeanVarianceNormalization is an ONNX function: the frontend expands it.)
//
// evaluate is the reference (double accumulation); compute is the plain
// tensor expression for the generic schedule: the sums one stage, the
// elementwise remainder another.
#include <cmath>
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

// x^e for x > 0 through the vector exp and log (ir::pow is one libm call per lane).
Expr pow_positive(const Expr& x, double e) {
  return ir::exp(ir::make_const(x.dtype(), e) * ir::log(x));
}

Expr konst(const Expr& like, double v) { return ir::make_const(like.dtype(), v); }

// OpError unless x is float32 or float64 (ONNX also lists float16 and bfloat16).
void require_float(const Node& node, const std::string& dtype) {
  if (dtype != "float32" && dtype != "float64")
    fail(node, "only float32 and float64 are supported, got " + dtype);
}

// f(T{}) with T float or double for x's dtype.
template <typename F>
std::vector<Initializer> by_float_type(const Node& node, const Initializer& x, F&& f) {
  require_float(node, x.type.dtype);
  if (x.type.dtype == "float64") return {f(double{})};
  return {f(float{})};
}

// ---- LRN ----------------------------------------------------------------------------

// y = x / (bias + alpha / size * sum of x^2 over the channels [c - lo, c + hi])^beta
// with lo = floor((size - 1) / 2), hi = ceil((size - 1) / 2), clipped to [0, C).
struct LrnAttrs {
  double alpha, beta, bias;
  int64_t size, lo, hi;
};

LrnAttrs lrn_attrs(const Node& node, const Shape& x) {
  if (x.size() < 3) fail(node, "X must have rank >= 3 (N, C, D1, ...), got " + shape_str(x));
  LrnAttrs a{attr_float(node, "alpha", 1e-4f),
             attr_float(node, "beta", 0.75f),
             attr_float(node, "bias", 1.0f),
             attr_int(node, "size", 0),
             0,
             0};
  if (a.size < 1) fail(node, "attribute 'size' must be given and >= 1");
  a.lo = (a.size - 1) / 2;
  a.hi = a.size - 1 - a.lo;
  return a;
}

template <typename T>
Initializer lrn_values(const Initializer& x, const LrnAttrs& a) {
  const Shape& s = x.type.shape;
  int64_t c_dim = s[1], inner = numel(Shape(s.begin() + 2, s.end()));
  Initializer y = make_tensor(x.type.dtype, s);
  const T* xp = data_of<T>(x);
  T* yp = data_of<T>(y);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < c_dim; ++c)
      for (int64_t j = 0; j < inner; ++j) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - a.lo); k <= std::min(c_dim - 1, c + a.hi); ++k) {
          double v = xp[(n * c_dim + k) * inner + j];
          sq += v * v;
        }
        int64_t at = (n * c_dim + c) * inner + j;
        yp[at] = static_cast<T>(xp[at] / std::pow(a.bias + a.alpha / a.size * sq, a.beta));
      }
  return y;
}

std::vector<Initializer> lrn_evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  require_float(node, x.type.dtype);
  LrnAttrs a = lrn_attrs(node, x.type.shape);
  return by_float_type(node, x, [&](auto t) { return lrn_values<decltype(t)>(x, a); });
}

std::vector<Tensor> lrn_compute(const Node& node, const ComputeInputs& in,
                                const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  require_float(node, x->dtype.str());
  Shape s = static_shape(x);
  LrnAttrs a = lrn_attrs(node, s);
  check_out_type(node, out_types, 0, s, x->dtype.str());
  Shape bound(s.size(), 0);
  bound[1] = s[1];  // only the channel index leaves the tensor (reads 0 there)
  IterVar k = ir::reduce_axis(a.size, "k");
  Tensor sq = ir::compute(
      shape_exprs(s),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        idx[1] = i[1] - Expr(a.lo) + k->var;
        Expr v = guarded_read(x, idx, bound, ir::make_const(x->dtype, 0));
        return ir::sum(v * v, {k});
      },
      node.name + ".sqsum");
  Tensor y = ir::compute(
      shape_exprs(s),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        Expr q = ir::read(sq, idx);
        Expr base = konst(q, a.bias) + konst(q, a.alpha / static_cast<double>(a.size)) * q;
        return ir::read(x, idx) * pow_positive(base, -a.beta);
      },
      node.name + ".lrn");
  return {y};
}

// ---- LpNormalization ----------------------------------------------------------------

// x / ||x||_p along `axis` (p is 1 or 2). A zero norm divides by zero, as
// ONNX's reference does (0 / 0 is NaN).
struct LpNormAttrs {
  int64_t axis, p;
};

LpNormAttrs lp_norm_attrs(const Node& node, const Shape& x) {
  LpNormAttrs a{attr_int(node, "axis", -1), attr_int(node, "p", 2)};
  if (a.p != 1 && a.p != 2) fail(node, "p must be 1 or 2, got " + std::to_string(a.p));
  a.axis = normalize_axis(node, a.axis, static_cast<int64_t>(x.size()));
  return a;
}

template <typename T>
Initializer lp_norm_values(const Initializer& x, const LpNormAttrs& a) {
  const Shape& s = x.type.shape;
  int64_t outer = numel(Shape(s.begin(), s.begin() + a.axis)), len = s[a.axis];
  int64_t inner = numel(Shape(s.begin() + a.axis + 1, s.end()));
  Initializer y = make_tensor(x.type.dtype, s);
  const T* xp = data_of<T>(x);
  T* yp = data_of<T>(y);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double norm = 0;
      for (int64_t k = 0; k < len; ++k) {
        double v = xp[(o * len + k) * inner + j];
        norm += a.p == 1 ? std::fabs(v) : v * v;
      }
      if (a.p == 2) norm = std::sqrt(norm);
      for (int64_t k = 0; k < len; ++k) {
        int64_t at = (o * len + k) * inner + j;
        yp[at] = static_cast<T>(xp[at] / norm);
      }
    }
  return y;
}

std::vector<Initializer> lp_norm_evaluate(const Node& node,
                                          const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  LpNormAttrs a = lp_norm_attrs(node, x.type.shape);
  return by_float_type(node, x, [&](auto t) { return lp_norm_values<decltype(t)>(x, a); });
}

std::vector<Tensor> lp_norm_compute(const Node& node, const ComputeInputs& in,
                                    const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  require_float(node, x->dtype.str());
  Shape s = static_shape(x);
  LpNormAttrs a = lp_norm_attrs(node, s);
  check_out_type(node, out_types, 0, s, x->dtype.str());
  size_t axis = static_cast<size_t>(a.axis);
  Shape row = s;
  row[axis] = 1;
  IterVar k = ir::reduce_axis(s[axis], "k");
  Tensor norm = ir::compute(
      shape_exprs(row),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        idx[axis] = k->var;
        Expr v = ir::read(x, idx);
        return ir::sum(a.p == 1 ? ir::fabs(v) : v * v, {k});
      },
      node.name + ".norm");
  Tensor y = ir::compute(
      shape_exprs(s),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end()), r = idx;
        r[axis] = Expr(int64_t{0});
        Expr n = ir::read(norm, r);
        return ir::read(x, idx) / (a.p == 1 ? n : ir::sqrt(n));
      },
      node.name + ".lpnorm");
  return {y};
}

// ---- GlobalLpPool -------------------------------------------------------------------

// (sum over the spatial dims of |x|^p)^(1/p) per (n, c), p a positive integer.
int64_t lp_pool_p(const Node& node, const Shape& x) {
  if (x.size() < 3) fail(node, "X must have rank >= 3 (N, C, D1, ...), got " + shape_str(x));
  int64_t p = attr_int(node, "p", 2);
  if (p < 1) fail(node, "p must be >= 1, got " + std::to_string(p));
  return p;
}

Shape global_shape(const Shape& x) {
  Shape out = x;
  for (size_t d = 2; d < out.size(); ++d) out[d] = 1;
  return out;
}

template <typename T>
Initializer lp_pool_values(const Initializer& x, int64_t p) {
  const Shape& s = x.type.shape;
  int64_t planes = s[0] * s[1], area = numel(Shape(s.begin() + 2, s.end()));
  Initializer y = make_tensor(x.type.dtype, global_shape(s));
  const T* xp = data_of<T>(x);
  const double e = static_cast<double>(p);
  for (int64_t q = 0; q < planes; ++q) {
    double acc = 0;
    for (int64_t j = 0; j < area; ++j) acc += std::pow(std::fabs(double(xp[q * area + j])), e);
    data_of<T>(y)[q] = static_cast<T>(std::pow(acc, 1.0 / e));
  }
  return y;
}

std::vector<Initializer> lp_pool_evaluate(const Node& node,
                                          const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  int64_t p = lp_pool_p(node, x.type.shape);
  return by_float_type(node, x, [&](auto t) { return lp_pool_values<decltype(t)>(x, p); });
}

std::vector<Tensor> lp_pool_compute(const Node& node, const ComputeInputs& in,
                                    const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  require_float(node, x->dtype.str());
  Shape s = static_shape(x);
  const int64_t p = lp_pool_p(node, s);
  Shape out = global_shape(s);
  check_out_type(node, out_types, 0, out, x->dtype.str());
  std::vector<IterVar> axes;
  for (size_t d = 2; d < s.size(); ++d)
    axes.push_back(ir::reduce_axis(s[d], "r" + std::to_string(d)));
  Tensor sum = ir::compute(
      shape_exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx = {i[0], i[1]};
        for (const IterVar& r : axes) idx.push_back(r->var);
        return ir::sum(abs_pow(ir::read(x, idx), p), axes);
      },
      node.name + ".sum");
  Tensor y = ir::compute(
      shape_exprs(out),
      [&](const std::vector<Var>& i) {
        return root_of(ir::read(sum, {i.begin(), i.end()}), p);
      },
      node.name + ".lppool");
  return {y};
}

}  // namespace

void register_normalize_ops() {
  register_op({"LRN", OpPattern::kReduction, lrn_evaluate, lrn_compute, {}});
  register_op({"LpNormalization", OpPattern::kReduction, lp_norm_evaluate, lp_norm_compute, {}});
  register_op({"GlobalLpPool", OpPattern::kReduction, lp_pool_evaluate, lp_pool_compute, {}});
}

}  // namespace kiln::graph
