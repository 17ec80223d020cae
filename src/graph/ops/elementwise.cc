// Elementwise and broadcasting operators: arithmetic, math functions
// (trigonometric and hyperbolic ones too), activations, comparisons, Where,
// Cast, CastLike, IsNaN, IsInf, Shrink, BitShift, inference
// BatchNormalization, Identity and Dropout.
//
// evaluate() computes in the element type itself (float ops in float, integer
// ops in the integer type) so that it matches what a kernel computes, except
// for transcendental functions, which it computes in double and rounds once:
// the reference is at least as accurate as the kernel.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers
using ir::Expr;

// Which element types an operator accepts in evaluate().
enum class Types { kFloat, kNumeric, kAll };

template <Types kTypes, typename T>
constexpr bool accepts() {
  if constexpr (kTypes == Types::kFloat) return std::is_floating_point_v<T>;
  if constexpr (kTypes == Types::kNumeric) return !std::is_same_v<T, bool>;
  return true;
}

std::vector<Shape> shapes_of(const std::vector<const Initializer*>& ins) {
  std::vector<Shape> s;
  for (auto* t : ins) s.push_back(t->type.shape);
  return s;
}

// All inputs present and of one dtype (ONNX's single type parameter T).
void check_same_dtype(const Node& node, const std::vector<const Initializer*>& ins) {
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i]) fail(node, "input " + std::to_string(i) + " is missing");
    if (ins[i]->type.dtype != ins[0]->type.dtype)
      fail(node,
           "inputs have different dtypes " + ins[0]->type.dtype + " and " + ins[i]->type.dtype);
  }
}

// out[o] = op(v) where v[k] is input k's (broadcast) element, all inputs of
// one dtype T. The result has dtype T, or bool when kBoolOut.
template <Types kTypes, bool kBoolOut = false, typename Op>
Initializer eval_map(const Node& node, const std::vector<const Initializer*>& ins, Op op) {
  check_same_dtype(node, ins);
  if (ins.empty()) fail(node, "no inputs");
  std::vector<Shape> shapes = shapes_of(ins);
  Shape out_shape = broadcast_shapes(node, shapes);
  const std::string& dt = ins[0]->type.dtype;
  return visit_dtype(node, dt, [&](auto tag) -> Initializer {
    using T = decltype(tag);
    if constexpr (!accepts<kTypes, T>()) {
      fail(node, "dtype " + dt + " is not supported");
    } else {
      using R = std::conditional_t<kBoolOut, bool, T>;
      Initializer out = make_tensor(dtype_of<R>(), out_shape);
      R* o = data_of<R>(out);
      std::vector<const T*> src;
      for (auto* t : ins) src.push_back(data_of<T>(*t));
      auto v = std::make_unique<T[]>(ins.size());  // not vector<T>: T may be bool
      for_each_broadcast(out_shape, shapes, [&](int64_t i, const std::vector<int64_t>& offs) {
        for (size_t k = 0; k < ins.size(); ++k) v[k] = src[k][offs[k]];
        o[i] = static_cast<R>(op(v.get()));
      });
      return out;
    }
  });
}

// A transcendental function on float types, computed in double.
template <typename F>
EvaluateFn eval_float_fn(F f) {
  return [f](const Node& node, const std::vector<const Initializer*>& ins) {
    return std::vector<Initializer>{
        eval_map<Types::kFloat>(node, {&required_input(node, ins, 0)},
                                [&](auto* v) { return f(static_cast<double>(v[0])); })};
  };
}

// ---- compute helpers ------------------------------------------------------------

using ExprFn = std::function<Expr(const std::vector<Expr>&)>;

// One output of out_types[0] whose element reads every input in `tensors`
// with broadcasting and combines them with f.
ir::Tensor compute_map(const std::vector<TensorType>& out_types,
                       const std::vector<ir::Tensor>& tensors, const ExprFn& f,
                       const std::string& name) {
  const TensorType& ot = out_types.at(0);
  ir::DataType odt = ir_dtype(ot.dtype);
  return ir::compute(
      shape_exprs(ot.shape),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> v;
        for (auto& t : tensors) v.push_back(broadcast_read(t, i));
        Expr r = f(v);
        return r.dtype() == odt ? r : ir::cast(odt, r);
      },
      name);
}

// The first n inputs as TE tensors (all required).
std::vector<ir::Tensor> first_tensors(const Node& node, const ComputeInputs& in, size_t n) {
  std::vector<ir::Tensor> t;
  for (size_t i = 0; i < n; ++i) t.push_back(required_tensor(node, in, i));
  return t;
}

ComputeFn map_compute(size_t n_inputs, ExprFn f) {
  return [n_inputs, f](const Node& node, const ComputeInputs& in,
                       const std::vector<TensorType>& out_types) {
    return std::vector<ir::Tensor>{
        compute_map(out_types, first_tensors(node, in, n_inputs), f, node.op_type)};
  };
}

Expr konst(const Expr& like, double v) { return ir::make_const(like.dtype(), v); }

// ---- registration helpers ---------------------------------------------------------

void reg(const std::string& op, EvaluateFn ev, ComputeFn cp, std::vector<int> consts = {}) {
  register_op(OpDef{op, OpPattern::kBroadcast, std::move(ev), std::move(cp), std::move(consts)});
}

// A unary operator: evaluate op(x) over the given types, compute f(x).
template <Types kTypes, typename Op>
void reg_unary(const std::string& name, Op op, ExprFn f) {
  reg(
      name,
      [op](const Node& node, const std::vector<const Initializer*>& ins) {
        return std::vector<Initializer>{eval_map<kTypes>(node, {&required_input(node, ins, 0)},
                                                         [&](auto* v) { return op(v[0]); })};
      },
      map_compute(1, std::move(f)));
}

template <Types kTypes, bool kBoolOut = false, typename Op>
void reg_binary(const std::string& name, Op op, ExprFn f) {
  reg(
      name,
      [op](const Node& node, const std::vector<const Initializer*>& ins) {
        if (ins.size() != 2) fail(node, "expects 2 inputs");
        return std::vector<Initializer>{
            eval_map<kTypes, kBoolOut>(node, ins, [&](auto* v) { return op(v[0], v[1], node); })};
      },
      map_compute(2, std::move(f)));
}

// ---- Arithmetic -------------------------------------------------------------------

// Integer Div truncates toward zero (C semantics, like ONNX Runtime).
template <typename T>
T div_op(T a, T b, const Node& node) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) fail(node, "integer division by zero");
    if constexpr (std::is_signed_v<T>)
      if (b == -1)  // no trap on INT_MIN / -1: the negation, wrapped (unsigned arithmetic)
        return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  }
  return static_cast<T>(a / b);
}

// Integer division in a kernel cannot throw or trap: a zero divisor gives 0
// (the constant folder reports it as an error first), and a divisor of -1
// gives the negation, wrapped (INT_MIN / -1 = INT_MIN, as ONNX Runtime gives;
// x86's idiv would raise SIGFPE).
Expr div_expr(const Expr& a, const Expr& b) {
  if (a.dtype().is_float()) return a / b;
  Expr zero = konst(b, 0);
  if (a.dtype().is_uint()) {
    Expr safe = ir::select(ir::eq(b, zero), konst(b, 1), b);
    return ir::select(ir::eq(b, zero), zero, a / safe);
  }
  Expr minus_one = konst(b, -1);
  Expr special = ir::logical_or(ir::eq(b, zero), ir::eq(b, minus_one));
  Expr safe = ir::select(special, konst(b, 1), b);
  Expr negated = zero - a;  // wraps: two's complement
  return ir::select(ir::eq(b, zero), zero, ir::select(ir::eq(b, minus_one), negated, a / safe));
}

void register_arithmetic() {
  reg_binary<Types::kNumeric>(
      "Add", [](auto a, auto b, const Node&) { return a + b; },
      [](const std::vector<Expr>& v) { return v[0] + v[1]; });
  reg_binary<Types::kNumeric>(
      "Sub", [](auto a, auto b, const Node&) { return a - b; },
      [](const std::vector<Expr>& v) { return v[0] - v[1]; });
  reg_binary<Types::kNumeric>(
      "Mul", [](auto a, auto b, const Node&) { return a * b; },
      [](const std::vector<Expr>& v) { return v[0] * v[1]; });
  reg_binary<Types::kNumeric>(
      "Div", [](auto a, auto b, const Node& n) { return div_op(a, b, n); },
      [](const std::vector<Expr>& v) { return div_expr(v[0], v[1]); });
}

// Pow: the exponent may have another dtype than the base (T1, T2). Integer
// results go through double and truncate (as ONNX Runtime does).
std::vector<Initializer> eval_pow(const Node& node, const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& y = required_input(node, ins, 1);
  Shape out_shape = broadcast_shapes(node, {x.type.shape, y.type.shape});
  std::vector<double> yv = to_doubles(node, y);
  return {visit_dtype(node, x.type.dtype, [&](auto tag) -> Initializer {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail(node, "bool base is not supported");
    } else {
      Initializer out = make_tensor(x.type.dtype, out_shape);
      const T* xp = data_of<T>(x);
      T* o = data_of<T>(out);
      for_each_broadcast(out_shape, {x.type.shape, y.type.shape},
                         [&](int64_t i, const std::vector<int64_t>& offs) {
                           double e = yv[offs[1]];
                           if constexpr (std::is_same_v<T, float>)
                             o[i] = std::pow(xp[offs[0]], static_cast<float>(e));
                           else
                             o[i] = static_cast<T>(std::pow(static_cast<double>(xp[offs[0]]), e));
                         });
      return out;
    }
  })};
}

// When the exponent is one constant value, small integer powers become
// multiplications (x*x for the common Pow(x, 2)) and 0.5 becomes sqrt.
std::vector<ir::Tensor> compute_pow(const Node& node, const ComputeInputs& in,
                                    const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  std::optional<double> k;
  if (const Initializer* c = const_input(in, 1)) {
    std::vector<double> v = to_doubles(node, *c);
    if (!v.empty() && std::all_of(v.begin(), v.end(), [&](double e) { return e == v[0]; }))
      k = v[0];
  }
  bool fl = x->dtype.is_float();
  if (k && fl && (*k == 1 || *k == 2 || *k == 3 || *k == 0.5)) {
    double e = *k;
    return {compute_map(
        out_types, {x},
        [e](const std::vector<Expr>& v) {
          if (e == 0.5) return ir::sqrt(v[0]);
          Expr r = v[0];
          for (int i = 1; i < static_cast<int>(e); ++i) r = r * v[0];
          return r;
        },
        "Pow")};
  }
  const ir::Tensor& y = required_tensor(node, in, 1);
  return {compute_map(
      out_types, {x, y},
      [fl](const std::vector<Expr>& v) {
        if (fl) return ir::pow(v[0], ir::cast(v[0].dtype(), v[1]));
        ir::DataType d = ir::DataType::f64();
        return ir::cast(v[0].dtype(), ir::pow(ir::cast(d, v[0]), ir::cast(d, v[1])));
      },
      "Pow")};
}

// ---- Unary math and activations -------------------------------------------------

template <typename T>
T relu_op(T x) {
  if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>)
    return x < T(0) ? T(0) : x;  // NaN stays NaN
  return x;
}

void register_unary() {
  reg("Sqrt", eval_float_fn([](double x) { return std::sqrt(x); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::sqrt(v[0]); }));
  reg("Exp", eval_float_fn([](double x) { return std::exp(x); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::exp(v[0]); }));
  reg("Log", eval_float_fn([](double x) { return std::log(x); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::log(v[0]); }));
  reg("Erf", eval_float_fn([](double x) { return std::erf(x); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::erf(v[0]); }));
  reg("Tanh", eval_float_fn([](double x) { return std::tanh(x); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::tanh(v[0]); }));
  reg("Sigmoid", eval_float_fn([](double x) { return 1.0 / (1.0 + std::exp(-x)); }),
      map_compute(1, [](const std::vector<Expr>& v) { return ir::sigmoid(v[0]); }));
  reg_unary<Types::kFloat>(
      "Reciprocal", [](auto x) { return decltype(x)(1) / x; },
      [](const std::vector<Expr>& v) { return konst(v[0], 1) / v[0]; });
  reg_unary<Types::kNumeric>(
      "Neg", [](auto x) { return static_cast<decltype(x)>(-x); },
      [](const std::vector<Expr>& v) { return -v[0]; });
  reg_unary<Types::kNumeric>(
      "Abs",
      [](auto x) {
        using T = decltype(x);
        if constexpr (std::is_floating_point_v<T>)
          return std::fabs(x);
        else if constexpr (std::is_signed_v<T>)
          return static_cast<T>(x < 0 ? -x : x);
        else
          return x;
      },
      [](const std::vector<Expr>& v) {
        if (v[0].dtype().is_float()) return ir::fabs(v[0]);
        if (v[0].dtype().is_uint()) return v[0];
        return ir::select(v[0] < konst(v[0], 0), -v[0], v[0]);
      });
  reg_unary<Types::kNumeric>(
      "Relu", [](auto x) { return relu_op(x); },
      [](const std::vector<Expr>& v) {
        if (v[0].dtype().is_uint()) return v[0];
        return ir::select(v[0] < konst(v[0], 0), konst(v[0], 0), v[0]);
      });
}

// Activations with float attributes.
void register_parametric() {
  reg(
      "LeakyRelu",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        float alpha = attr_float(node, "alpha", 0.01f);
        return std::vector<Initializer>{
            eval_map<Types::kFloat>(node, {&required_input(node, ins, 0)}, [&](auto* v) {
              using T = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
              return v[0] < T(0) ? v[0] * static_cast<T>(alpha) : v[0];
            })};
      },
      [](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        float alpha = attr_float(node, "alpha", 0.01f);
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [alpha](const std::vector<Expr>& v) {
              return ir::select(v[0] < konst(v[0], 0), v[0] * konst(v[0], alpha), v[0]);
            },
            "LeakyRelu")};
      });
  // HardSigmoid(x) = max(0, min(1, alpha * x + beta)); HardSwish(x) = x * HardSigmoid(x)
  // with alpha = 1/6, beta = 0.5.
  auto hard = [](bool swish) {
    auto params = [swish](const Node& node) {
      if (swish) return std::pair<float, float>{1.0f / 6.0f, 0.5f};
      return std::pair<float, float>{attr_float(node, "alpha", 0.2f),
                                     attr_float(node, "beta", 0.5f)};
    };
    EvaluateFn ev = [=](const Node& node, const std::vector<const Initializer*>& ins) {
      const auto [alpha, beta] = params(node);  // copied below: clang 14 cannot capture bindings
      const float a = alpha, b = beta;
      return std::vector<Initializer>{
          eval_map<Types::kFloat>(node, {&required_input(node, ins, 0)}, [&](auto* v) {
            using T = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
            T h = std::max(T(0), std::min(T(1), static_cast<T>(a) * v[0] + static_cast<T>(b)));
            return swish ? v[0] * h : h;
          })};
    };
    ComputeFn cp = [=](const Node& node, const ComputeInputs& in,
                       const std::vector<TensorType>& out_types) {
      const auto [alpha, beta] = params(node);
      const float a = alpha, b = beta;
      return std::vector<ir::Tensor>{compute_map(
          out_types, {required_tensor(node, in, 0)},
          [=](const std::vector<Expr>& v) {
            Expr x = v[0];
            Expr h = ir::max(konst(x, 0), ir::min(konst(x, 1), x * konst(x, a) + konst(x, b)));
            return swish ? x * h : h;
          },
          node.op_type)};
    };
    return std::pair{ev, cp};
  };
  // Gelu (opset 20): x * Phi(x), Phi by erf ("none") or by tanh ("tanh").
  // fuse_gelu also writes it for the exported Div/Erf/Add/Mul/Mul pattern,
  // so that a Linear's GELU is one elementwise op its epilogue can take.
  auto gelu_tanh = [](const Node& node) {
    std::string a = attr_string(node, "approximate", "none");
    if (a != "none" && a != "tanh")
      throw std::invalid_argument("node '" + node.name + "' (Gelu): approximate '" + a +
                                  "' is neither 'none' nor 'tanh'");
    return a == "tanh";
  };
  reg(
      "Gelu",
      [gelu_tanh](const Node& node, const std::vector<const Initializer*>& ins) {
        const bool tanh_form = gelu_tanh(node);
        return std::vector<Initializer>{
            eval_map<Types::kFloat>(node, {&required_input(node, ins, 0)}, [&](auto* v) {
              using T = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
              double x = static_cast<double>(v[0]);
              double phi =
                  tanh_form
                      ? 0.5 * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
                      : 0.5 * (1.0 + std::erf(x * 0.7071067811865476));
              return static_cast<T>(x * phi);
            })};
      },
      [gelu_tanh](const Node& node, const ComputeInputs& in,
                  const std::vector<TensorType>& out_types) {
        const bool tanh_form = gelu_tanh(node);
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [tanh_form](const std::vector<Expr>& v) {
              Expr x = v[0];
              Expr inner = tanh_form ? ir::tanh(konst(x, 0.7978845608028654) *
                                                (x + konst(x, 0.044715) * x * x * x))
                                     : ir::erf(x * konst(x, 0.7071067811865476));
              return x * konst(x, 0.5) * (konst(x, 1) + inner);
            },
            "Gelu")};
      });
  auto [hs_ev, hs_cp] = hard(false);
  reg("HardSigmoid", hs_ev, hs_cp);
  auto [hw_ev, hw_cp] = hard(true);
  reg("HardSwish", hw_ev, hw_cp);
}

// Clip bounds: inputs 1 and 2 (opset >= 11) or attributes min/max (older).
// nullopt where unbounded.
std::pair<std::optional<double>, std::optional<double>> clip_bounds(const Node& node,
                                                                    const Initializer* lo,
                                                                    const Initializer* hi) {
  auto scalar = [&](const Initializer* t) -> std::optional<double> {
    if (!t) return std::nullopt;
    std::vector<double> v = to_doubles(node, *t);
    if (v.size() != 1) fail(node, "min/max must be scalars");
    return v[0];
  };
  std::optional<double> a = scalar(lo), b = scalar(hi);
  if (auto m = node.attr<float>("min")) a = *m;
  if (auto m = node.attr<float>("max")) b = *m;
  return {a, b};
}

std::vector<Initializer> eval_clip(const Node& node, const std::vector<const Initializer*>& ins) {
  // Not a structured binding: the lambda captures them (clang 14 cannot capture bindings).
  std::optional<double> lo, hi;
  std::tie(lo, hi) = clip_bounds(node, optional_input(ins, 1), optional_input(ins, 2));
  return {eval_map<Types::kNumeric>(node, {&required_input(node, ins, 0)}, [&](auto* v) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
    T x = v[0];
    if (lo && x < static_cast<T>(*lo)) x = static_cast<T>(*lo);
    if (hi && x > static_cast<T>(*hi)) x = static_cast<T>(*hi);
    return x;
  })};
}

// Bounds are build-time constants (folded into the kernel) or scalars fed at
// run time (tensor inputs 1 and 2, read once per element: a broadcast load).
std::vector<ir::Tensor> compute_clip(const Node& node, const ComputeInputs& in,
                                     const std::vector<TensorType>& out_types) {
  std::optional<double> lo, hi;
  std::tie(lo, hi) = clip_bounds(node, const_input(in, 1), const_input(in, 2));
  std::vector<ir::Tensor> tensors = {required_tensor(node, in, 0)};
  int lo_arg = -1, hi_arg = -1;
  for (size_t k : {1, 2}) {
    if (k >= in.tensors.size() || !in.tensors[k]) continue;
    for (const Expr& d : in.tensors[k]->shape)
      if (const int64_t* n = ir::as_const_int(d); !n || *n != 1)
        fail(node, "min/max must be scalars");
    (k == 1 ? lo_arg : hi_arg) = static_cast<int>(tensors.size());
    tensors.push_back(in.tensors[k]);
  }
  return {compute_map(
      out_types, tensors,
      [lo, hi, lo_arg, hi_arg](const std::vector<Expr>& v) {
        Expr x = v[0];
        Expr l = lo_arg >= 0 ? v[lo_arg] : lo ? konst(x, *lo) : Expr();
        Expr h = hi_arg >= 0 ? v[hi_arg] : hi ? konst(x, *hi) : Expr();
        if (l) x = ir::select(x < l, l, x);
        if (h) x = ir::select(x > h, h, x);
        return x;
      },
      "Clip")};
}

// Max / Min over any number of broadcast inputs, folded left: a > b ? a : b
// (exactly ir::max's select, so NaN handling agrees with kernels).
void register_minmax() {
  for (bool is_max : {true, false}) {
    reg(
        is_max ? "Max" : "Min",
        [is_max](const Node& node, const std::vector<const Initializer*>& ins) {
          size_t n = ins.size();
          return std::vector<Initializer>{eval_map<Types::kNumeric>(node, ins, [&](auto* v) {
            auto r = v[0];
            for (size_t k = 1; k < n; ++k) r = (is_max ? r > v[k] : r < v[k]) ? r : v[k];
            return r;
          })};
        },
        [is_max](const Node& node, const ComputeInputs& in,
                 const std::vector<TensorType>& out_types) {
          return std::vector<ir::Tensor>{compute_map(
              out_types, first_tensors(node, in, in.tensors.size()),
              [is_max](const std::vector<Expr>& v) {
                Expr r = v[0];
                for (size_t k = 1; k < v.size(); ++k)
                  r = is_max ? ir::max(r, v[k]) : ir::min(r, v[k]);
                return r;
              },
              node.op_type)};
        });
  }
}

// ---- More activations and rounding -------------------------------------------------

// A float activation with float attributes: evaluate f(x, attrs) in double,
// compute g(x, attrs) in the element type.
void reg_float_attrs(const std::string& name, std::vector<std::pair<std::string, float>> attrs,
                     std::function<double(double, const std::vector<double>&)> f,
                     std::function<Expr(const Expr&, const std::vector<double>&)> g) {
  auto read = [attrs](const Node& node) {
    std::vector<double> a;
    for (const auto& [key, dflt] : attrs) a.push_back(attr_float(node, key, dflt));
    return a;
  };
  reg(
      name,
      [read, f](const Node& node, const std::vector<const Initializer*>& ins) {
        std::vector<double> a = read(node);
        return std::vector<Initializer>{
            eval_map<Types::kFloat>(node, {&required_input(node, ins, 0)},
                                    [&](auto* v) { return f(static_cast<double>(v[0]), a); })};
      },
      [read, g, name](const Node& node, const ComputeInputs& in,
                      const std::vector<TensorType>& out_types) {
        std::vector<double> a = read(node);
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [&](const std::vector<Expr>& v) { return g(v[0], a); }, name)};
      });
}

// log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
double softplus_value(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
// log1p(e) to full precision: log(u) * e / (u - 1) with u = 1 + e cancels
// u's rounding (Goldberg); e itself where u rounds to 1.
Expr log1p_expr(const Expr& e) {
  Expr u = konst(e, 1) + e;
  Expr d = u - konst(e, 1);
  return ir::select(ir::eq(d, konst(e, 0)), e, ir::log(u) * e / d);
}
Expr softplus_expr(const Expr& x) {
  return ir::max(x, konst(x, 0)) + log1p_expr(ir::exp(-ir::fabs(x)));
}

Expr expm1_expr(const Expr& x) { return ir::exp(x) - konst(x, 1); }

void register_activations() {
  using A = const std::vector<double>&;
  reg_float_attrs(
      "Softplus", {}, [](double x, A) { return softplus_value(x); },
      [](const Expr& x, A) { return softplus_expr(x); });
  reg_float_attrs(
      "Softsign", {}, [](double x, A) { return x / (1 + std::fabs(x)); },
      [](const Expr& x, A) { return x / (konst(x, 1) + ir::fabs(x)); });
  // Mish (opset 18): x * tanh(softplus(x)).
  reg_float_attrs(
      "Mish", {}, [](double x, A) { return x * std::tanh(softplus_value(x)); },
      [](const Expr& x, A) { return x * ir::tanh(softplus_expr(x)); });
  reg_float_attrs(
      "Elu", {{"alpha", 1.0f}}, [](double x, A a) { return x < 0 ? a[0] * std::expm1(x) : x; },
      [](const Expr& x, A a) {
        return ir::select(x < konst(x, 0), konst(x, a[0]) * expm1_expr(x), x);
      });
  reg_float_attrs(
      "Selu", {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}},
      [](double x, A a) { return a[1] * (x <= 0 ? a[0] * std::expm1(x) : x); },
      [](const Expr& x, A a) {
        return konst(x, a[1]) * ir::select(x <= konst(x, 0), konst(x, a[0]) * expm1_expr(x), x);
      });
  // Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
  reg_float_attrs(
      "Celu", {{"alpha", 1.0f}},
      [](double x, A a) { return std::max(0.0, x) + std::min(0.0, a[0] * std::expm1(x / a[0])); },
      [](const Expr& x, A a) {
        return ir::max(x, konst(x, 0)) +
               ir::min(konst(x, 0), konst(x, a[0]) * expm1_expr(x / konst(x, a[0])));
      });
  reg_float_attrs(
      "ThresholdedRelu", {{"alpha", 1.0f}}, [](double x, A a) { return x > a[0] ? x : 0.0; },
      [](const Expr& x, A a) { return ir::select(x > konst(x, a[0]), x, konst(x, 0)); });
  reg_float_attrs(
      "Floor", {}, [](double x, A) { return std::floor(x); },
      [](const Expr& x, A) { return ir::floor(x); });
  reg_float_attrs(
      "Ceil", {}, [](double x, A) { return std::ceil(x); },
      [](const Expr& x, A) { return ir::ceil(x); });
  // ONNX Round: half to even.
  reg_float_attrs(
      "Round", {}, [](double x, A) { return std::nearbyint(x); },
      [](const Expr& x, A) { return ir::round_even(x); });
  reg_unary<Types::kNumeric>(
      "Sign",
      [](auto x) {
        using T = decltype(x);
        return static_cast<T>((T(0) < x) - (x < T(0)));
      },
      [](const std::vector<Expr>& v) {
        Expr zero = konst(v[0], 0);
        return ir::select(v[0] > zero, konst(v[0], 1),
                          ir::select(v[0] < zero, konst(v[0], -1), zero));
      });
  // PRelu(x, slope): the slope broadcasts to x (typically [C, 1, 1]).
  reg_binary<Types::kNumeric>(
      "PRelu",
      [](auto x, auto slope, const Node&) {
        return x < decltype(x)(0) ? static_cast<decltype(x)>(x * slope) : x;
      },
      [](const std::vector<Expr>& v) {
        return ir::select(v[0] < konst(v[0], 0), v[0] * v[1], v[0]);
      });
}

// Sum and Mean over any number of broadcast inputs.
void register_sum_mean() {
  for (bool mean : {false, true}) {
    reg(
        mean ? "Mean" : "Sum",
        [mean](const Node& node, const std::vector<const Initializer*>& ins) {
          size_t n = ins.size();
          return std::vector<Initializer>{eval_map<Types::kNumeric>(node, ins, [&](auto* v) {
            auto r = v[0];
            for (size_t k = 1; k < n; ++k) r = static_cast<decltype(r)>(r + v[k]);
            return mean ? static_cast<decltype(r)>(r / static_cast<decltype(r)>(n)) : r;
          })};
        },
        [mean](const Node& node, const ComputeInputs& in,
               const std::vector<TensorType>& out_types) {
          return std::vector<ir::Tensor>{compute_map(
              out_types, first_tensors(node, in, in.tensors.size()),
              [mean](const std::vector<Expr>& v) {
                Expr r = v[0];
                for (size_t k = 1; k < v.size(); ++k) r = r + v[k];
                return mean ? div_expr(r, konst(r, static_cast<double>(v.size()))) : r;
              },
              node.op_type)};
        });
  }
}

// ---- Comparison, selection, conversion -------------------------------------------

std::vector<Initializer> eval_where(const Node& node, const std::vector<const Initializer*>& ins) {
  const Initializer& c = required_input(node, ins, 0);
  if (c.type.dtype != "bool") fail(node, "condition must be bool, got " + c.type.dtype);
  std::vector<const Initializer*> xy = {&required_input(node, ins, 1),
                                        &required_input(node, ins, 2)};
  check_same_dtype(node, xy);
  std::vector<Shape> shapes = {c.type.shape, xy[0]->type.shape, xy[1]->type.shape};
  Shape out_shape = broadcast_shapes(node, shapes);
  Initializer out = make_tensor(xy[0]->type.dtype, out_shape);
  size_t es = dtype_size(out.type.dtype);
  const uint8_t* cp = c.data.data();
  for_each_broadcast(out_shape, shapes, [&](int64_t i, const std::vector<int64_t>& offs) {
    const Initializer* src = cp[offs[0]] ? xy[0] : xy[1];
    std::memcpy(out.data.data() + i * es, src->data.data() + offs[cp[offs[0]] ? 1 : 2] * es, es);
  });
  return {out};
}

// x converted to dtype dst element by element (Cast, CastLike).
Initializer cast_to(const Node& node, const Initializer& x, const std::string& dst) {
  Initializer out = make_tensor(dst, x.type.shape);
  int64_t n = x.type.num_elements();
  visit_dtype(node, x.type.dtype, [&](auto from) {
    using F = decltype(from);
    visit_dtype(node, dst, [&](auto to_tag) {
      using T = decltype(to_tag);
      const F* s = data_of<F>(x);
      T* d = data_of<T>(out);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, bool>)
          d[i] = s[i] != F(0);  // NaN -> true, as in C
        else
          d[i] = static_cast<T>(s[i]);
      }
    });
  });
  return out;
}

std::vector<Initializer> eval_cast(const Node& node, const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  auto to = node.attr<int64_t>("to");
  if (!to) fail(node, "attribute 'to' is missing");
  return {cast_to(node, x, onnx_dtype_name(node, *to))};
}

// Integer Mod: the result takes the divisor's sign (Python's %) unless fmod=1,
// which truncates like C's fmod (required for floats by ONNX).
template <typename T>
T mod_op(T a, T b, const Node& node) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    if (b == 0) fail(node, "integer modulo by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return T(0);
      T r = static_cast<T>(a % b);
      if (attr_int(node, "fmod", 0) == 0 && r != 0 && ((r < 0) != (b < 0)))
        r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}

std::vector<Initializer> eval_mod(const Node& node, const std::vector<const Initializer*>& ins) {
  if (ins.size() != 2) fail(node, "expects 2 inputs");
  bool fmod = attr_int(node, "fmod", 0) != 0;
  if (!fmod && ins[0] && (ins[0]->type.dtype == "float32" || ins[0]->type.dtype == "float64"))
    fail(node, "fmod must be 1 for floating-point inputs");
  return {eval_map<Types::kNumeric>(node, ins, [&](auto* v) { return mod_op(v[0], v[1], node); })};
}

// Mod in a kernel. Floats: C's fmod (the quotient truncated toward zero).
// Integers: C's % (fmod=1) or the divisor's sign (Python's %, fmod=0). A
// kernel cannot throw: a zero divisor gives 0 and -1 gives 0 (no trap on
// INT_MIN % -1); the constant folder reports a zero divisor as an error.
std::vector<ir::Tensor> compute_mod(const Node& node, const ComputeInputs& in,
                                    const std::vector<TensorType>& out_types) {
  const bool fmod = attr_int(node, "fmod", 0) != 0;
  if (ir_dtype(out_types.at(0).dtype).is_float() && !fmod)
    fail(node, "fmod must be 1 for floating-point inputs");
  return {compute_map(
      out_types, first_tensors(node, in, 2),
      [fmod](const std::vector<Expr>& v) {
        const Expr &a = v[0], &b = v[1];
        if (a.dtype().is_float()) {
          Expr q = a / b;
          Expr trunc = ir::select(q < konst(q, 0), ir::ceil(q), ir::floor(q));
          return a - trunc * b;
        }
        Expr zero = konst(b, 0);
        const bool is_signed = !a.dtype().is_uint();
        Expr no_rem =
            is_signed ? ir::logical_or(ir::eq(b, zero), ir::eq(b, konst(b, -1))) : ir::eq(b, zero);
        Expr r = a % ir::select(no_rem, konst(b, 1), b);
        if (is_signed && !fmod) {
          Expr other_sign = ir::ne(r < zero, b < zero);
          r = ir::select(ir::logical_and(ir::ne(r, zero), other_sign), r + b, r);
        }
        return ir::select(no_rem, zero, r);
      },
      "Mod")};
}

void register_logic() {
  reg_binary<Types::kAll, true>(
      "Equal", [](auto a, auto b, const Node&) { return a == b; },
      [](const std::vector<Expr>& v) { return ir::eq(v[0], v[1]); });
  reg_binary<Types::kNumeric, true>(
      "Greater", [](auto a, auto b, const Node&) { return a > b; },
      [](const std::vector<Expr>& v) { return v[0] > v[1]; });
  reg_binary<Types::kNumeric, true>(
      "Less", [](auto a, auto b, const Node&) { return a < b; },
      [](const std::vector<Expr>& v) { return v[0] < v[1]; });
  reg_binary<Types::kNumeric, true>(
      "GreaterOrEqual", [](auto a, auto b, const Node&) { return a >= b; },
      [](const std::vector<Expr>& v) { return v[0] >= v[1]; });
  reg_binary<Types::kNumeric, true>(
      "LessOrEqual", [](auto a, auto b, const Node&) { return a <= b; },
      [](const std::vector<Expr>& v) { return v[0] <= v[1]; });
  reg_binary<Types::kAll>(
      "And", [](auto a, auto b, const Node&) { return a && b; },
      [](const std::vector<Expr>& v) { return ir::logical_and(v[0], v[1]); });
  reg_binary<Types::kAll>(
      "Or", [](auto a, auto b, const Node&) { return a || b; },
      [](const std::vector<Expr>& v) { return ir::logical_or(v[0], v[1]); });
  reg_binary<Types::kAll>(
      "Xor", [](auto a, auto b, const Node&) { return bool(a) != bool(b); },
      [](const std::vector<Expr>& v) { return ir::ne(v[0], v[1]); });
  reg_unary<Types::kAll>(
      "Not", [](auto a) { return !a; },
      [](const std::vector<Expr>& v) { return ir::logical_not(v[0]); });
  reg("Mod", eval_mod, compute_mod);
  reg("Where", eval_where,
      map_compute(3, [](const std::vector<Expr>& v) { return ir::select(v[0], v[1], v[2]); }));
  reg("Cast", eval_cast,
      [](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        ir::DataType to = ir_dtype(onnx_dtype_name(node, attr_int(node, "to", 0)));
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [to](const std::vector<Expr>& v) { return ir::cast(to, v[0]); }, "Cast")};
      });
}

// ---- BatchNormalization (inference), Identity, Dropout ------------------------------

void check_bn(const Node& node, const Shape& x, const std::vector<const Initializer*>* ins) {
  if (attr_int(node, "training_mode", 0) != 0) fail(node, "training_mode=1 is not supported");
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) fail(node, "training outputs (mean, var) are not supported");
  if (x.size() < 2) fail(node, "X must have rank >= 2, got " + shape_str(x));
  if (!ins) return;
  for (size_t i = 1; i < 5; ++i) {
    const Initializer& p = required_input(node, *ins, i);
    if (p.type.shape != Shape{x[1]})
      fail(node, "input " + std::to_string(i) + " must have shape [" + std::to_string(x[1]) +
                     "], got " + shape_str(p.type.shape));
  }
}

std::vector<Initializer> eval_bn(const Node& node, const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  check_bn(node, x.type.shape, &ins);
  double eps = attr_float(node, "epsilon", 1e-5f);
  int64_t c = x.type.shape[1];
  int64_t inner = numel(Shape(x.type.shape.begin() + 2, x.type.shape.end()));
  int64_t outer = x.type.shape[0];
  return {visit_dtype(node, x.type.dtype, [&](auto tag) -> Initializer {
    using T = decltype(tag);
    if constexpr (!std::is_floating_point_v<T>) {
      fail(node, "dtype " + x.type.dtype + " is not supported");
    } else {
      std::vector<std::vector<double>> p;
      for (size_t i = 1; i < 5; ++i) p.push_back(to_doubles(node, *ins[i]));
      Initializer out = make_tensor(x.type.dtype, x.type.shape);
      const T* s = data_of<T>(x);
      T* d = data_of<T>(out);
      for (int64_t n = 0; n < outer; ++n)
        for (int64_t ch = 0; ch < c; ++ch) {
          double a = p[0][ch] / std::sqrt(p[3][ch] + eps), m = p[2][ch], b = p[1][ch];
          int64_t base = (n * c + ch) * inner;
          for (int64_t j = 0; j < inner; ++j)
            d[base + j] = static_cast<T>((s[base + j] - m) * a + b);
        }
      return out;
    }
  })};
}

std::vector<ir::Tensor> compute_bn(const Node& node, const ComputeInputs& in,
                                   const std::vector<TensorType>& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  check_bn(node, static_shape(x), nullptr);
  std::vector<ir::Tensor> p;
  for (size_t i = 1; i < 5; ++i) p.push_back(required_tensor(node, in, i));
  float eps = attr_float(node, "epsilon", 1e-5f);
  const TensorType& ot = out_types.at(0);
  return {ir::compute(
      shape_exprs(ot.shape),
      [&](const std::vector<ir::Var>& i) {
        auto per_c = [&](int k) {
          Expr v = ir::at(p[k], i[1]);
          return v.dtype() == x->dtype ? v : ir::cast(x->dtype, v);
        };
        Expr xv = ir::read(x, vars_to_exprs(i));
        Expr a = per_c(0) / ir::sqrt(per_c(3) + konst(xv, eps));
        return (xv - per_c(2)) * a + per_c(1);
      },
      "BatchNormalization")};
}

// Training mode drops nothing only with a ratio of 0 (the default is 0.5).
void check_inference_dropout(const Node& node, const Initializer* training_mode,
                             const Initializer* ratio) {
  if (!training_mode) return;
  std::vector<double> v = to_doubles(node, *training_mode);
  if (v.empty() || v[0] == 0) return;
  std::vector<double> r = ratio ? to_doubles(node, *ratio) : std::vector<double>{};
  if (r.size() != 1 || r[0] != 0)
    fail(node, "training_mode=true is not supported (only with a ratio of 0)");
}

std::vector<Initializer> eval_dropout(const Node& node,
                                      const std::vector<const Initializer*>& ins) {
  check_inference_dropout(node, optional_input(ins, 2), optional_input(ins, 1));
  std::vector<Initializer> out = {required_input(node, ins, 0)};
  if (node.outputs.size() > 1 && !node.outputs[1].empty()) {
    Initializer mask = make_tensor("bool", out[0].type.shape);
    std::fill(mask.data.begin(), mask.data.end(), uint8_t{1});
    out.push_back(mask);
  }
  return out;
}

std::vector<ir::Tensor> compute_dropout(const Node& node, const ComputeInputs& in,
                                        const std::vector<TensorType>& out_types) {
  if (const Initializer* tm = const_input(in, 2)) {
    check_inference_dropout(node, tm, const_input(in, 1));
  } else if (in.tensors.size() > 2 && in.tensors[2]) {
    fail(node, "training_mode must be a constant");
  }
  const ir::Tensor& x = required_tensor(node, in, 0);
  std::vector<ir::Tensor> outs = {compute_map(
      out_types, {x}, [](const std::vector<Expr>& v) { return v[0]; }, "Dropout")};
  if (out_types.size() > 1) {
    outs.push_back(ir::compute(
        shape_exprs(out_types[1].shape),
        [](const std::vector<ir::Var>&) { return ir::make_bool(true); }, "DropoutMask"));
  }
  return outs;
}

// ---- Trigonometric and hyperbolic functions -----------------------------------------

// float32 and float64 (ONNX also lists float16, which kiln's graph does not
// hold). The kernels: ir::sin & co. (vector polynomials for float32,
// codegen/intrinsics.h; libm per lane for float64).
void register_trig() {
  using UnaryIr = Expr (*)(Expr);
  const std::tuple<const char*, double (*)(double), UnaryIr> fns[] = {
      {"Sin", std::sin, ir::sin},       {"Cos", std::cos, ir::cos},
      {"Tan", std::tan, ir::tan},       {"Asin", std::asin, ir::asin},
      {"Acos", std::acos, ir::acos},    {"Atan", std::atan, ir::atan},
      {"Sinh", std::sinh, ir::sinh},    {"Cosh", std::cosh, ir::cosh},
      {"Asinh", std::asinh, ir::asinh}, {"Acosh", std::acosh, ir::acosh},
      {"Atanh", std::atanh, ir::atanh}};
  for (const auto& [name, ref, ir_fn] : fns) {
    UnaryIr f = ir_fn;  // a copy: clang 14 cannot capture structured bindings
    reg(name, eval_float_fn(ref),
        map_compute(1, [f](const std::vector<Expr>& v) { return f(v[0]); }));
  }
}

// ---- IsNaN, IsInf -------------------------------------------------------------------

// IsInf's detect_negative / detect_positive (both default 1).
std::pair<bool, bool> inf_signs(const Node& node) {
  return {attr_int(node, "detect_negative", 1) != 0, attr_int(node, "detect_positive", 1) != 0};
}

void register_float_classes() {
  // x != x is true only for NaN (codegen's != is the unordered compare, as C's).
  reg(
      "IsNaN",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        return std::vector<Initializer>{eval_map<Types::kFloat, true>(
            node, {&required_input(node, ins, 0)}, [](auto* v) { return std::isnan(v[0]); })};
      },
      map_compute(1, [](const std::vector<Expr>& v) { return ir::ne(v[0], v[0]); }));
  reg(
      "IsInf",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        auto [neg, pos] = inf_signs(node);
        const bool n = neg, p = pos;  // copies: clang 14 cannot capture bindings
        return std::vector<Initializer>{eval_map<Types::kFloat, true>(
            node, {&required_input(node, ins, 0)},
            [&](auto* v) { return std::isinf(v[0]) && (v[0] < 0 ? n : p); })};
      },
      [](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        auto [neg, pos] = inf_signs(node);
        const bool n = neg, p = pos;
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [n, p](const std::vector<Expr>& v) {
              Expr inf = konst(v[0], std::numeric_limits<double>::infinity());
              Expr r = ir::make_bool(false);
              if (p) r = ir::eq(v[0], inf);
              if (n) r = p ? ir::logical_or(r, ir::eq(v[0], -inf)) : ir::eq(v[0], -inf);
              return r;
            },
            "IsInf")};
      });
}

// ---- Shrink -------------------------------------------------------------------------

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between. Integer x
// is computed in double and truncated back (as ONNX's numpy reference casts).
double shrink_value(double x, double bias, double lambd) {
  return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0;
}

std::pair<double, double> shrink_attrs(const Node& node) {
  double lambd = attr_float(node, "lambd", 0.5f);
  if (!(lambd >= 0)) fail(node, "lambd must be >= 0, got " + std::to_string(lambd));
  return {attr_float(node, "bias", 0.0f), lambd};
}

void register_shrink() {
  reg(
      "Shrink",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        auto [bias, lambd] = shrink_attrs(node);
        const double b = bias, l = lambd;
        return std::vector<Initializer>{
            eval_map<Types::kNumeric>(node, {&required_input(node, ins, 0)}, [&](auto* v) {
              using T = std::remove_cv_t<std::remove_pointer_t<decltype(v)>>;
              if constexpr (std::is_same_v<T, float>)  // float32 arithmetic, as the kernel
                return v[0] < -static_cast<float>(l)  ? v[0] + static_cast<float>(b)
                       : v[0] > static_cast<float>(l) ? v[0] - static_cast<float>(b)
                                                      : 0.0f;
              else
                return static_cast<T>(shrink_value(static_cast<double>(v[0]), b, l));
            })};
      },
      [](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        auto [bias, lambd] = shrink_attrs(node);
        const double b = bias, l = lambd;
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [b, l](const std::vector<Expr>& v) {
              Expr x = v[0].dtype().is_float() ? v[0] : ir::cast(ir::DataType::f64(), v[0]);
              Expr r = ir::select(x < konst(x, -l), x + konst(x, b),
                                  ir::select(x > konst(x, l), x - konst(x, b), konst(x, 0)));
              return r.dtype() == v[0].dtype() ? r : ir::cast(v[0].dtype(), r);
            },
            "Shrink")};
      });
}

// ---- CastLike -----------------------------------------------------------------------

// CastLike(x, like): Cast to like's dtype; like's values are never read, so
// the kernel takes only x.
void register_cast_like() {
  reg(
      "CastLike",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        const Initializer& like = required_input(node, ins, 1);
        return std::vector<Initializer>{
            cast_to(node, required_input(node, ins, 0), like.type.dtype)};
      },
      [](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        ir::DataType to = ir_dtype(out_types.at(0).dtype);
        return std::vector<ir::Tensor>{compute_map(
            out_types, {required_tensor(node, in, 0)},
            [to](const std::vector<Expr>& v) { return ir::cast(to, v[0]); }, "CastLike")};
      });
}

// ---- BitShift -----------------------------------------------------------------------

// direction LEFT (true) or RIGHT; OpError for anything else.
bool shifts_left(const Node& node) {
  std::string d = attr_string(node, "direction", "");
  if (d != "LEFT" && d != "RIGHT")
    fail(node, "direction must be \"LEFT\" or \"RIGHT\", got \"" + d + "\"");
  return d == "LEFT";
}

// ONNX's BitShift is defined on unsigned types only; both inputs have one dtype.
void check_bit_shift_dtype(const Node& node, const std::string& x, const std::string& y) {
  if (x != "uint8" && x != "uint16" && x != "uint32" && x != "uint64")
    fail(node, "BitShift needs uint8, uint16, uint32 or uint64 inputs, got " + x);
  if (y != x) fail(node, "X and Y have different dtypes " + x + " and " + y);
}

// x << y and x >> y; a shift by the bit width or more gives 0 (numpy's
// definition, ONNX's reference; ir::Intrinsic::ShiftLeft).
template <typename T>
T shift_value(bool left, T x, T y) {
  if (y >= sizeof(T) * 8) return T(0);
  return static_cast<T>(left ? x << y : x >> y);
}

template <typename T>
Initializer eval_shift(bool left, const Initializer& x, const Initializer& y, const Shape& out) {
  Initializer r = make_tensor(x.type.dtype, out);
  const T* xp = reinterpret_cast<const T*>(x.data.data());
  const T* yp = reinterpret_cast<const T*>(y.data.data());
  T* rp = reinterpret_cast<T*>(r.data.data());
  for_each_broadcast(out, {x.type.shape, y.type.shape},
                     [&](int64_t i, const std::vector<int64_t>& offs) {
                       rp[i] = shift_value(left, xp[offs[0]], yp[offs[1]]);
                     });
  return r;
}

std::vector<Initializer> eval_bit_shift(const Node& node,
                                        const std::vector<const Initializer*>& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& y = required_input(node, ins, 1);
  check_bit_shift_dtype(node, x.type.dtype, y.type.dtype);
  bool left = shifts_left(node);
  Shape out = broadcast_shapes(node, {x.type.shape, y.type.shape});
  const std::string& dt = x.type.dtype;
  if (dt == "uint8") return {eval_shift<uint8_t>(left, x, y, out)};
  if (dt == "uint16") return {eval_shift<uint16_t>(left, x, y, out)};
  if (dt == "uint32") return {eval_shift<uint32_t>(left, x, y, out)};
  return {eval_shift<uint64_t>(left, x, y, out)};
}

std::vector<ir::Tensor> compute_bit_shift(const Node& node, const ComputeInputs& in,
                                          const std::vector<TensorType>& out_types) {
  std::vector<ir::Tensor> t = first_tensors(node, in, 2);
  check_bit_shift_dtype(node, t[0]->dtype.str(), t[1]->dtype.str());
  bool left = shifts_left(node);
  return {compute_map(
      out_types, t,
      [left](const std::vector<Expr>& v) {
        return left ? ir::shift_left(v[0], v[1]) : ir::shift_right(v[0], v[1]);
      },
      "BitShift")};
}

void register_bit_shift() { reg("BitShift", eval_bit_shift, compute_bit_shift); }

}  // namespace

void register_elementwise_ops() {
  register_arithmetic();
  reg("Pow", eval_pow, compute_pow);
  register_unary();
  register_parametric();
  register_op(OpDef{.op_type = "Clip",
                    .pattern = OpPattern::kBroadcast,
                    .evaluate = eval_clip,
                    .compute = compute_clip,
                    .constant_inputs = {1, 2},
                    .constant_inputs_may_vary = true});
  register_minmax();
  register_activations();
  register_sum_mean();
  register_logic();
  reg("BatchNormalization", eval_bn, compute_bn);
  reg(
      "Identity",
      [](const Node& node, const std::vector<const Initializer*>& ins) {
        return std::vector<Initializer>{required_input(node, ins, 0)};
      },
      map_compute(1, [](const std::vector<Expr>& v) { return v[0]; }));
  // The ratio may be fed at run time (it matters only in training mode).
  register_op(OpDef{.op_type = "Dropout",
                    .pattern = OpPattern::kBroadcast,
                    .evaluate = eval_dropout,
                    .compute = compute_dropout,
                    .constant_inputs = {1, 2},
                    .constant_inputs_may_vary = true});
  register_trig();
  register_float_classes();
  register_shrink();
  register_cast_like();
  register_bit_shift();
}

}  // namespace kiln::graph
