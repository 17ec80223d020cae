// Reductions and normalizations: ReduceMean/Sum/Max/Prod/LogSum/LogSumExp
// (and, evaluate only, ReduceMin/L1/L2/SumSquare), Softmax, LogSoftmax,
// LayerNormalization, MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool.
//
// evaluate is the reference (double accumulation for float32); compute is the
// plain tensor expression for the generic schedule: each reduction its own
// stage, the elementwise remainder in an output stage.
#include <cmath>
#include <functional>
#include <limits>
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

// ---- Row reductions -------------------------------------------------------------------

// value(i, k): the k-th of the n values reduced into output element i, with k
// walking memory contiguously (the reduced dims are the innermost ones).
using RowValue = std::function<Expr(const std::vector<Var>& i, const Expr& k)>;

// Partial results per row. A row of n values is reduced as kRowPartials
// interleaved partial reductions (partial p takes values p, p + 16, p + 32,
// ...), then the partials and the n % 16 tail are combined by a short scalar
// loop: the generic schedule vectorizes the partial axis (its innermost
// spatial axis, contiguous in the input) by the target's lanes with the
// reduction loop outside it, so the row is read with vector loads into vector
// accumulators and reduced horizontally once. 16 is a multiple of every
// target's float lanes (16 AVX-512, 8 AVX2, 4 NEON): the schedule splits it
// into 1, 2 or 4 vectors, which also gives independent accumulators.
constexpr int64_t kRowPartials = 16;

Expr reduce_of(ir::ReduceOp op, Expr v, std::vector<IterVar> axes) {
  switch (op) {
    case ir::ReduceOp::Max: return ir::reduce_max(std::move(v), std::move(axes));
    case ir::ReduceOp::Min: return ir::reduce_min(std::move(v), std::move(axes));
    case ir::ReduceOp::Prod: return ir::prod(std::move(v), std::move(axes));
    case ir::ReduceOp::Sum: break;
  }
  return ir::sum(std::move(v), std::move(axes));
}

Tensor row_reduce(ir::ReduceOp op, const std::vector<int64_t>& out_shape, int64_t n,
                  const RowValue& value, const std::string& name) {
  // Rows shorter than two vectors of partials gain nothing from them.
  if (n < 2 * kRowPartials) {
    IterVar k = ir::reduce_axis(n, "k");
    return ir::compute(
        shape_exprs(out_shape),
        [&](const std::vector<Var>& i) { return reduce_of(op, value(i, k->var), {k}); }, name);
  }
  const int64_t blocks = n / kRowPartials, tail = n % kRowPartials;
  std::vector<int64_t> part_shape = out_shape;
  part_shape.push_back(kRowPartials);
  IterVar ko = ir::reduce_axis(blocks, "ko");
  Tensor part = ir::compute(
      shape_exprs(part_shape),
      [&](const std::vector<Var>& ip) {
        std::vector<Var> i(ip.begin(), ip.end() - 1);
        return reduce_of(op, value(i, ko->var * kRowPartials + ip.back()), {ko});
      },
      name + ".partials");
  IterVar r = ir::reduce_axis(kRowPartials + tail, "p");
  return ir::compute(
      shape_exprs(out_shape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> pi(i.begin(), i.end());
        if (tail == 0) {
          pi.push_back(r->var);
          return reduce_of(op, ir::read(part, pi), {r});
        }
        // p < 16 takes partial p, the rest the tail's values; both indices
        // are clamped into range, since a select evaluates both sides.
        pi.push_back(ir::min(r->var, Expr(kRowPartials - 1)));
        Expr t = ir::max(r->var - Expr(kRowPartials), Expr(int64_t{0}));
        Expr v = ir::select(r->var < Expr(kRowPartials), ir::read(part, pi),
                            value(i, Expr(blocks * kRowPartials) + t));
        return reduce_of(op, v, {r});
      },
      name);
}

// ---- ReduceMean / Sum / Max / Prod / LogSum / LogSumExp ------------------------------

// kMin, kL1, kL2 and kSumSquare only evaluate: graph/passes/decompose_reductions.cc
// rewrites those nodes into ReduceSum / ReduceMax and elementwise ops.
enum class ReduceKind { kSum, kMean, kMax, kMin, kL1, kL2, kSumSquare, kProd, kLogSum, kLogSumExp };

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  bool keepdims = true;
  std::vector<int64_t> out_shape;
  int64_t count = 1;  // elements per output
};

// The reduced axes come from input 1 (ReduceSum >= 13, all >= 18; a graph
// constant) when the node has it, else from the `axes` attribute. Empty axes
// reduce everything, or nothing with noop_with_empty_axes.
ReducePlan reduce_plan(const Node& node, const std::vector<int64_t>& shape,
                       const Initializer* axes_input) {
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  if (node.inputs.size() > 1 && !node.inputs[1].empty()) {
    if (!axes_input) fail(node, "the axes input must be a graph constant");
    if (axes_input->type.dtype != "int64") fail(node, "the axes input must be int64");
    if (node.attrs.count("axes")) fail(node, "axes given both as attribute and input");
    axes = axes_input->as<int64_t>();
  } else {
    axes = attr_ints(node, "axes", {});
  }
  ReducePlan p;
  p.keepdims = attr_int(node, "keepdims", 1) != 0;
  bool noop = axes.empty() && attr_int(node, "noop_with_empty_axes", 0) != 0;
  p.reduced.assign(shape.size(), axes.empty() && !noop);
  for (int64_t a : axes) {
    int64_t d = normalize_axis(node, a, rank);
    if (p.reduced[d]) fail(node, "axis " + std::to_string(a) + " is listed twice");
    p.reduced[d] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (p.reduced[d]) p.count *= shape[d];
    if (!p.reduced[d])
      p.out_shape.push_back(shape[d]);
    else if (p.keepdims)
      p.out_shape.push_back(1);
  }
  return p;
}

// Calls f(o, i) for every input element i with o the flat index of the output
// element it reduces into.
template <typename F>
void for_each_reduced(const std::vector<int64_t>& shape, const ReducePlan& p, F&& f) {
  // Output stride of every input dim (0 along reduced dims).
  std::vector<int64_t> full_out;
  for (size_t d = 0; d < shape.size(); ++d) full_out.push_back(p.reduced[d] ? 1 : shape[d]);
  std::vector<int64_t> os = strides_of(full_out);
  for (size_t d = 0; d < shape.size(); ++d)
    if (p.reduced[d]) os[d] = 0;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t n_in = numel(shape);
  for (int64_t i = 0; i < n_in; ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) o += idx[d] * os[d];
    f(o, i);
    for (size_t d = shape.size(); d-- > 0;) {  // next row-major index
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// The accumulator type: double for floats, the type itself for integers
// (whose products wrap, computed unsigned so that C++ defines the wrap).
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double, T>;

template <typename T>
AccOf<T> combine_value(ReduceKind kind, AccOf<T> acc, AccOf<T> v) {
  using Acc = AccOf<T>;
  switch (kind) {
    case ReduceKind::kMax: return std::isnan(static_cast<double>(v)) || v > acc ? v : acc;
    case ReduceKind::kMin: return std::isnan(static_cast<double>(v)) || v < acc ? v : acc;
    case ReduceKind::kL1: return acc + (v < Acc(0) ? -v : v);
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare: return acc + v * v;
    case ReduceKind::kProd:
      if constexpr (std::is_integral_v<Acc>) {
        using U = std::make_unsigned_t<Acc>;
        return static_cast<Acc>(static_cast<U>(acc) * static_cast<U>(v));
      } else {
        return acc * v;
      }
    default: return acc + v;  // kSum, kMean, kLogSum
  }
}

template <typename T>
AccOf<T> reduce_init(ReduceKind kind) {
  using Acc = AccOf<T>;
  if (kind == ReduceKind::kProd) return Acc(1);
  if constexpr (!std::is_floating_point_v<T>) {
    if (kind == ReduceKind::kMax) return std::numeric_limits<T>::lowest();
    if (kind == ReduceKind::kMin) return std::numeric_limits<T>::max();
  }
  if (kind == ReduceKind::kMax) return -std::numeric_limits<Acc>::infinity();
  if (kind == ReduceKind::kMin) return std::numeric_limits<Acc>::infinity();
  return Acc(0);
}

// log(sum(exp(x))) as m + log(sum(exp(x - m))) with m the row's max, so that
// exp neither overflows nor underflows the whole sum away. An infinite m
// shifts by 0 instead (inf - inf would be NaN): all -inf gives log(0) = -inf,
// a +inf gives +inf, as the unshifted formula does.
template <typename T>
void log_sum_exp_loop(const Initializer& x, const ReducePlan& p, Initializer& y) {
  const std::vector<int64_t>& shape = x.type.shape;
  const T* xp = data_of<T>(x);
  int64_t n_out = y.type.num_elements();
  std::vector<double> mx(static_cast<size_t>(n_out), -std::numeric_limits<double>::infinity());
  for_each_reduced(shape, p, [&](int64_t o, int64_t i) {
    mx[o] = combine_value<double>(ReduceKind::kMax, mx[o], xp[i]);
  });
  for (double& m : mx)
    if (std::isinf(m)) m = 0;
  std::vector<double> sum(static_cast<size_t>(n_out), 0.0);
  for_each_reduced(shape, p,
                   [&](int64_t o, int64_t i) { sum[o] += std::exp(double(xp[i]) - mx[o]); });
  T* yp = data_of<T>(y);
  for (int64_t o = 0; o < n_out; ++o) yp[o] = static_cast<T>(mx[o] + std::log(sum[o]));
}

template <typename T>
void reduce_loop(ReduceKind kind, const Initializer& x, const ReducePlan& p, Initializer& y) {
  using Acc = AccOf<T>;
  if constexpr (std::is_floating_point_v<T>) {
    if (kind == ReduceKind::kLogSumExp) return log_sum_exp_loop<T>(x, p, y);
  }
  int64_t n_out = y.type.num_elements();
  std::vector<Acc> acc(static_cast<size_t>(n_out), reduce_init<T>(kind));
  const T* xp = data_of<T>(x);
  for_each_reduced(x.type.shape, p, [&](int64_t o, int64_t i) {
    acc[o] = combine_value<T>(kind, acc[o], static_cast<Acc>(xp[i]));
  });
  T* yp = data_of<T>(y);
  for (int64_t o = 0; o < n_out; ++o) {
    Acc v = acc[o];
    if (kind == ReduceKind::kMean) v = v / static_cast<Acc>(p.count);
    if (kind == ReduceKind::kL2) v = static_cast<Acc>(std::sqrt(static_cast<double>(v)));
    if (kind == ReduceKind::kLogSum) v = static_cast<Acc>(std::log(static_cast<double>(v)));
    yp[o] = static_cast<T>(v);
  }
}

EvaluateFn reduce_evaluate(ReduceKind kind) {
  return [kind](const Node& node, const std::vector<const Initializer*>& inputs) {
    const Initializer& x = required_input(node, inputs, 0);
    ReducePlan p = reduce_plan(node, x.type.shape, optional_input(inputs, 1));
    Initializer y = make_tensor(x.type.dtype, p.out_shape);
    if (p.count == 0 &&
        (kind == ReduceKind::kMean || kind == ReduceKind::kMax || kind == ReduceKind::kMin))
      fail(node, "reduction over an empty axis has no value");
    const std::string& dt = x.type.dtype;
    bool log_kind = kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp;
    if (dt == "float32")
      reduce_loop<float>(kind, x, p, y);
    else if (dt == "float64")
      reduce_loop<double>(kind, x, p, y);
    else if (dt == "int64" && !log_kind)
      reduce_loop<int64_t>(kind, x, p, y);
    else if (dt == "int32" && !log_kind)
      reduce_loop<int32_t>(kind, x, p, y);
    else
      fail(node, "dtype " + dt + " is not supported (" +
                     (log_kind ? "float32, float64" : "float32, float64, int32, int64") + ")");
    return std::vector<Initializer>{std::move(y)};
  };
}

// The reduction stages of one Reduce* node over x: value(i, idx) is the
// element reduced into output i from input index idx.
struct ReduceStages {
  const Tensor& x;
  std::vector<int64_t> shape;
  ReducePlan p;
  std::string base;  // the node's name, prefix of the stage names
  std::vector<IterVar> raxes;

  ReduceStages(const Tensor& t, std::vector<int64_t> s, ReducePlan plan, std::string name)
      : x(t), shape(std::move(s)), p(std::move(plan)), base(std::move(name)) {
    for (size_t d = 0; d < shape.size(); ++d)
      if (p.reduced[d])
        raxes.push_back(ir::reduce_axis(shape[d], std::string("r").append(std::to_string(d))));
  }

  using Value = std::function<Expr(const std::vector<Var>& i, const std::vector<Expr>& idx)>;

  // The input index of output index i, with the reduce vars along reduced dims.
  std::vector<Expr> source(const std::vector<Var>& i) const {
    std::vector<Expr> idx;
    size_t oi = 0, ri = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (p.reduced[d]) {
        idx.push_back(raxes[ri++]->var);
        if (p.keepdims) ++oi;
      } else {
        idx.push_back(i[oi++]);
      }
    }
    return idx;
  }

  // op over value(i, idx). Where the reduced dims are exactly the innermost
  // ones (each output's values lie contiguously in x) a row reduction with
  // vector partials; otherwise one reduction over all reduced axes.
  Tensor reduce(ir::ReduceOp op, const Value& value, const std::string& suffix) const {
    int64_t first = static_cast<int64_t>(shape.size());
    while (first > 0 && p.reduced[static_cast<size_t>(first - 1)]) --first;
    bool contiguous = true;
    for (int64_t d = 0; d < first; ++d)
      contiguous = contiguous && !p.reduced[static_cast<size_t>(d)];
    if (contiguous) {
      Shape row(shape.begin() + first, shape.end());
      return row_reduce(
          op, p.out_shape, p.count,
          [&](const std::vector<Var>& i, const Expr& k) {
            std::vector<Expr> idx(i.begin(), i.begin() + first);
            for (const Expr& e : unflatten_index(k, row)) idx.push_back(e);
            return value(i, idx);
          },
          base + suffix);
    }
    return ir::compute(
        shape_exprs(p.out_shape),
        [&](const std::vector<Var>& i) { return reduce_of(op, value(i, source(i)), raxes); },
        base + suffix);
  }

  // f(r[i]) elementwise over a reduction's result r.
  Tensor map(const Tensor& r, const std::function<Expr(const Expr&, const std::vector<Var>&)>& f,
             const std::string& suffix) const {
    return ir::compute(
        r->shape,
        [&](const std::vector<Var>& i) {
          return f(ir::read(r, {i.begin(), i.end()}), i);
        },
        base + suffix);
  }
};

// ReduceLogSumExp: m = max, s = m where finite else 0 (see log_sum_exp_loop),
// then s + log(sum(exp(x - s))).
Tensor log_sum_exp_stages(const ReduceStages& st) {
  auto read_x = [&](const std::vector<Var>&, const std::vector<Expr>& idx) {
    return ir::read(st.x, idx);
  };
  Tensor mx = st.reduce(ir::ReduceOp::Max, read_x, ".max");
  Tensor shift = st.map(
      mx,
      [](const Expr& m, const std::vector<Var>&) {
        Expr inf = ir::make_const(m.dtype(), std::numeric_limits<double>::infinity());
        return ir::select(ir::eq(ir::fabs(m), inf), ir::make_const(m.dtype(), 0), m);
      },
      ".shift");
  Tensor sum = st.reduce(
      ir::ReduceOp::Sum,
      [&](const std::vector<Var>& i, const std::vector<Expr>& idx) {
        return ir::exp(ir::read(st.x, idx) - ir::read(shift, {i.begin(), i.end()}));
      },
      ".sum");
  return st.map(
      sum,
      [&](const Expr& v, const std::vector<Var>& i) {
        return ir::read(shift, {i.begin(), i.end()}) + ir::log(v);
      },
      ".log_sum_exp");
}

ComputeFn reduce_compute(ReduceKind kind) {
  return
      [kind](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        const Tensor& x = required_tensor(node, in, 0);
        std::vector<int64_t> shape = static_shape(x);
        const Initializer* axes = in.constants.size() > 1 ? in.constants[1] : nullptr;
        ReducePlan p = reduce_plan(node, shape, axes);
        check_out_type(node, out_types, 0, p.out_shape, x->dtype.str());
        if (p.count == 0) fail(node, "reduction over an empty axis is not supported");
        bool log_kind = kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp;
        if (log_kind && !x->dtype.is_float()) fail(node, "only float inputs are supported");
        ReduceStages st(x, shape, p, node.name);
        // noop_with_empty_axes: a reduction over no axes, each output one
        // element: the identity, except that ReduceLogSum still takes the log
        // (as ONNX's reference does from opset 18; log-sum-exp of one value
        // is the value).
        if (st.raxes.empty())
          return std::vector<Tensor>{ir::compute(
              shape_exprs(p.out_shape),
              [&](const std::vector<Var>& i) {
                Expr v = ir::read(x, st.source(i));
                return kind == ReduceKind::kLogSum ? ir::log(v) : v;
              },
              node.name + ".copy")};
        if (kind == ReduceKind::kLogSumExp) return std::vector<Tensor>{log_sum_exp_stages(st)};
        auto read_x = [&](const std::vector<Var>&, const std::vector<Expr>& idx) {
          return ir::read(x, idx);
        };
        ir::ReduceOp op = kind == ReduceKind::kMax    ? ir::ReduceOp::Max
                          : kind == ReduceKind::kProd ? ir::ReduceOp::Prod
                                                      : ir::ReduceOp::Sum;
        const char* suffix = kind == ReduceKind::kMax    ? ".max"
                             : kind == ReduceKind::kProd ? ".prod"
                                                         : ".sum";
        Tensor r = st.reduce(op, read_x, suffix);
        if (kind == ReduceKind::kMean)
          return std::vector<Tensor>{st.map(
              r,
              [&](const Expr& v, const std::vector<Var>&) {
                return v / ir::make_const(x->dtype, static_cast<double>(p.count));
              },
              ".mean")};
        if (kind == ReduceKind::kLogSum)
          return std::vector<Tensor>{st.map(
              r, [](const Expr& v, const std::vector<Var>&) { return ir::log(v); }, ".log")};
        return std::vector<Tensor>{r};
      };
}

// ---- Softmax ---------------------------------------------------------------------------

// Opset >= 13 semantics: softmax along one axis (default -1); LogSoftmax
// (log_softmax) is x - max - log(sum(exp(x - max))) along it.
std::vector<Initializer> softmax_rows_evaluate(const Node& node,
                                               const std::vector<const Initializer*>& inputs,
                                               bool log_softmax) {
  const Initializer& x = required_input(node, inputs, 0);
  require_f32(node, x, "input");
  const std::vector<int64_t>& shape = x.type.shape;
  int64_t axis =
      normalize_axis(node, attr_int(node, "axis", -1), static_cast<int64_t>(shape.size()));
  int64_t outer = 1, len = shape[axis], inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];

  Initializer y = make_tensor("float32", shape);
  const float* xp = data_of<float>(x);
  float* yp = data_of<float>(y);
  std::vector<double> e(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const float* row = xp + o * len * inner + in;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < len; ++k) mx = std::max<double>(mx, row[k * inner]);
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) sum += e[k] = std::exp(row[k * inner] - mx);
      for (int64_t k = 0; k < len; ++k)
        yp[o * len * inner + in + k * inner] =
            static_cast<float>(log_softmax ? row[k * inner] - mx - std::log(sum) : e[k] / sum);
    }
  return {std::move(y)};
}

std::vector<Initializer> softmax_evaluate(const Node& node,
                                          const std::vector<const Initializer*>& inputs) {
  return softmax_rows_evaluate(node, inputs, false);
}

std::vector<Initializer> log_softmax_evaluate(const Node& node,
                                              const std::vector<const Initializer*>& inputs) {
  return softmax_rows_evaluate(node, inputs, true);
}

std::vector<Tensor> softmax_rows_compute(const Node& node, const ComputeInputs& in,
                                         const std::vector<TensorType>& out_types,
                                         bool log_softmax) {
  const Tensor& x = required_tensor(node, in, 0);
  std::vector<int64_t> shape = static_shape(x);
  check_out_type(node, out_types, 0, shape, "float32");
  if (x->dtype != ir::DataType::f32()) fail(node, "only float32 is supported");
  size_t axis = static_cast<size_t>(
      normalize_axis(node, attr_int(node, "axis", -1), static_cast<int64_t>(shape.size())));
  std::vector<int64_t> row_shape = shape;
  row_shape[axis] = 1;
  // x's index with the softmax axis replaced by `k`.
  auto along = [&](const std::vector<Var>& i, Expr k) {
    std::vector<Expr> idx(i.begin(), i.end());
    idx[axis] = k;
    return idx;
  };
  // Along the innermost axis (dims after it all 1) a row is contiguous: the
  // max and the sum run as row reductions with vector partials.
  bool innermost = true;
  for (size_t d = axis + 1; d < shape.size(); ++d) innermost = innermost && shape[d] == 1;
  Tensor mx, sum, e;
  if (innermost) {
    mx = row_reduce(
        ir::ReduceOp::Max, row_shape, shape[axis],
        [&](const std::vector<Var>& i, const Expr& k) { return ir::read(x, along(i, k)); },
        node.name + ".max");
    // exp(x - max) once per element: the row kernel computes this stage per
    // row into a row buffer (schedule_generic's shared row stages), which
    // both the sum and the scaling read.
    e = ir::compute(
        shape_exprs(shape),
        [&](const std::vector<Var>& i) {
          return ir::exp(ir::read(x, {i.begin(), i.end()}) - ir::read(mx, along(i, int64_t{0})));
        },
        node.name + ".exp");
    sum = row_reduce(
        ir::ReduceOp::Sum, row_shape, shape[axis],
        [&](const std::vector<Var>& i, const Expr& k) { return ir::read(e, along(i, k)); },
        node.name + ".sum");
  } else {
    IterVar k1 = ir::reduce_axis(shape[axis], "k");
    mx = ir::compute(
        shape_exprs(row_shape),
        [&](const std::vector<Var>& i) {
          return ir::reduce_max(ir::read(x, along(i, k1->var)), {k1});
        },
        node.name + ".max");
    IterVar k2 = ir::reduce_axis(shape[axis], "k");
    sum = ir::compute(
        shape_exprs(row_shape),
        [&](const std::vector<Var>& i) {
          Expr m = ir::read(mx, along(i, int64_t{0}));
          return ir::sum(ir::exp(ir::read(x, along(i, k2->var)) - m), {k2});
        },
        node.name + ".sum");
  }
  if (log_softmax) {
    // max + log(sum) once per row (a per-row stage in a row kernel), then
    // one subtraction per element.
    Tensor shift = ir::compute(
        shape_exprs(row_shape),
        [&](const std::vector<Var>& i) {
          std::vector<Expr> r(i.begin(), i.end());
          return ir::read(mx, r) + ir::log(ir::read(sum, r));
        },
        node.name + ".shift");
    Tensor y = ir::compute(
        shape_exprs(shape),
        [&](const std::vector<Var>& i) {
          return ir::read(x, {i.begin(), i.end()}) - ir::read(shift, along(i, int64_t{0}));
        },
        node.name + ".log_softmax");
    return {y};
  }
  // In a row kernel (innermost axis) 1 / sum is a per-row stage computed once
  // per row: the row is then scaled by a multiply instead of a division per
  // element (a vector division costs several multiplies' throughput).
  Tensor inv;
  if (innermost)
    inv = ir::compute(
        shape_exprs(row_shape),
        [&](const std::vector<Var>& i) {
          return Expr(1.0f) / ir::read(sum, {i.begin(), i.end()});
        },
        node.name + ".inv");
  Tensor y = ir::compute(
      shape_exprs(shape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        if (innermost) return ir::read(e, idx) * ir::read(inv, along(i, int64_t{0}));
        Expr m = ir::read(mx, along(i, int64_t{0}));
        return ir::exp(ir::read(x, idx) - m) / ir::read(sum, along(i, int64_t{0}));
      },
      node.name + ".softmax");
  return {y};
}

std::vector<Tensor> softmax_compute(const Node& node, const ComputeInputs& in,
                                    const std::vector<TensorType>& out_types) {
  return softmax_rows_compute(node, in, out_types, false);
}

std::vector<Tensor> log_softmax_compute(const Node& node, const ComputeInputs& in,
                                        const std::vector<TensorType>& out_types) {
  return softmax_rows_compute(node, in, out_types, true);
}

// ---- InstanceNormalization (evaluate only) ---------------------------------------------
// Normalizes each (n, c) plane of [N, C, spatial...] over its spatial dims,
// then scale[c] and B[c]. graph/passes/instance_norm.cc rewrites it into a
// LayerNormalization over the spatial dims and a per-channel Mul and Add.

std::vector<Initializer> instance_norm_evaluate(const Node& node,
                                                const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& scale = required_input(node, inputs, 1);
  const Initializer& bias = required_input(node, inputs, 2);
  require_f32(node, x, "input");
  require_f32(node, scale, "scale");
  require_f32(node, bias, "B");
  const std::vector<int64_t>& xs = x.type.shape;
  if (xs.size() < 3) fail(node, "input must have rank >= 3, got " + shape_str(xs));
  if (scale.type.shape != std::vector<int64_t>{xs[1]} ||
      bias.type.shape != std::vector<int64_t>{xs[1]})
    fail(node, "scale and B must have shape [" + std::to_string(xs[1]) + "]");
  int64_t plane = 1;
  for (size_t d = 2; d < xs.size(); ++d) plane *= xs[d];
  const double eps = attr_float(node, "epsilon", 1e-5f);
  Initializer y = make_tensor("float32", xs);
  const float* xp = data_of<float>(x);
  float* yp = data_of<float>(y);
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc) {
    const float* row = xp + nc * plane;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < plane; ++j) mean += row[j];
    mean /= static_cast<double>(plane);
    for (int64_t j = 0; j < plane; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(plane);
    const int64_t c = nc % xs[1];
    const double a = data_of<float>(scale)[c] / std::sqrt(var + eps);
    for (int64_t j = 0; j < plane; ++j)
      yp[nc * plane + j] = static_cast<float>((row[j] - mean) * a + data_of<float>(bias)[c]);
  }
  return {std::move(y)};
}

// ---- LayerNormalization ----------------------------------------------------------------

// Normalizes over dims [axis, rank); Scale and B broadcast (numpy) to X. Outputs
// Y and, when asked for, Mean and InvStdDev of shape X.shape[:axis] + [1, ...].
struct LayerNormShapes {
  std::vector<int64_t> x, stats;
  int64_t axis, outer, inner;
};

LayerNormShapes layer_norm_shapes(const Node& node, const std::vector<int64_t>& x) {
  LayerNormShapes s;
  s.x = x;
  s.axis = normalize_axis(node, attr_int(node, "axis", -1), static_cast<int64_t>(x.size()));
  s.outer = s.inner = 1;
  s.stats = x;
  for (size_t d = 0; d < x.size(); ++d) {
    if (static_cast<int64_t>(d) < s.axis) {
      s.outer *= x[d];
    } else {
      s.inner *= x[d];
      s.stats[d] = 1;
    }
  }
  if (s.inner == 0) fail(node, "normalizing over an empty shape");
  if (attr_int(node, "stash_type", 1) != 1) fail(node, "only stash_type 1 (float32) is supported");
  return s;
}

std::vector<Initializer> layer_norm_evaluate(const Node& node,
                                             const std::vector<const Initializer*>& inputs) {
  const Initializer& x = required_input(node, inputs, 0);
  const Initializer& scale = required_input(node, inputs, 1);
  const Initializer* bias = optional_input(inputs, 2);
  require_f32(node, x, "X");
  require_f32(node, scale, "Scale");
  if (bias) require_f32(node, *bias, "B");
  LayerNormShapes s = layer_norm_shapes(node, x.type.shape);
  double eps = attr_float(node, "epsilon", 1e-5f);
  std::vector<int64_t> ss = broadcast_strides(node, scale.type.shape, s.x, "Scale");
  std::vector<int64_t> bs =
      bias ? broadcast_strides(node, bias->type.shape, s.x, "B") : std::vector<int64_t>{};

  Initializer y = make_tensor("float32", s.x);
  Initializer mean_t = make_tensor("float32", s.stats);
  Initializer inv_t = make_tensor("float32", s.stats);
  const float* xp = data_of<float>(x);
  float* yp = data_of<float>(y);
  std::vector<int64_t> idx(s.x.size(), 0);  // running index of element (o, j)
  for (int64_t o = 0; o < s.outer; ++o) {
    const float* row = xp + o * s.inner;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < s.inner; ++j) mean += row[j];
    mean /= static_cast<double>(s.inner);
    for (int64_t j = 0; j < s.inner; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(s.inner);
    double inv = 1.0 / std::sqrt(var + eps);
    data_of<float>(mean_t)[o] = static_cast<float>(mean);
    data_of<float>(inv_t)[o] = static_cast<float>(inv);
    for (int64_t j = 0; j < s.inner; ++j) {
      int64_t si = 0, bi = 0;
      for (size_t d = 0; d < idx.size(); ++d) {
        si += idx[d] * ss[d];
        if (bias) bi += idx[d] * bs[d];
      }
      double v = (row[j] - mean) * inv * data_of<float>(scale)[si];
      if (bias) v += data_of<float>(*bias)[bi];
      yp[o * s.inner + j] = static_cast<float>(v);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < s.x[d]) break;
        idx[d] = 0;
      }
    }
  }
  std::vector<Initializer> out;
  out.push_back(std::move(y));
  if (node.outputs.size() > 1) out.push_back(std::move(mean_t));
  if (node.outputs.size() > 2) out.push_back(std::move(inv_t));
  return out;
}

std::vector<Tensor> layer_norm_compute(const Node& node, const ComputeInputs& in,
                                       const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Tensor& scale = required_tensor(node, in, 1);
  Tensor bias = in.tensors.size() > 2 ? in.tensors[2] : nullptr;
  LayerNormShapes s = layer_norm_shapes(node, static_shape(x));
  std::vector<int64_t> scale_shape = static_shape(scale);
  std::vector<int64_t> bias_shape = bias ? static_shape(bias) : std::vector<int64_t>{};
  broadcast_strides(node, scale_shape, s.x, "Scale");
  if (bias) broadcast_strides(node, bias_shape, s.x, "B");
  check_out_type(node, out_types, 0, s.x, "float32");
  for (size_t o = 1; o < node.outputs.size(); ++o)
    check_out_type(node, out_types, o, s.stats, "float32");
  float eps = attr_float(node, "epsilon", 1e-5f);
  size_t axis = static_cast<size_t>(s.axis);

  auto stat_at = [&](const Tensor& t, const std::vector<Var>& i) {
    std::vector<Expr> idx(i.begin(), i.begin() + axis);
    idx.resize(s.x.size(), Expr(int64_t{0}));
    return ir::read(t, idx);
  };
  Expr inv_n = Expr(static_cast<float>(1.0 / static_cast<double>(s.inner)));
  // The normalized dims are the innermost ones: each row is contiguous, and
  // both sums run as row reductions with vector partials.
  Shape row(s.x.begin() + static_cast<std::ptrdiff_t>(axis), s.x.end());
  auto x_row = [&](const std::vector<Var>& i, const Expr& k) {
    std::vector<Expr> idx(i.begin(), i.begin() + static_cast<std::ptrdiff_t>(axis));
    for (const Expr& e : unflatten_index(k, row)) idx.push_back(e);
    return ir::read(x, idx);
  };
  Tensor sum = row_reduce(ir::ReduceOp::Sum, s.stats, s.inner, x_row, node.name + ".sum");
  Tensor mean = ir::compute(
      shape_exprs(s.stats), [&](const std::vector<Var>& i) { return stat_at(sum, i) * inv_n; },
      node.name + ".mean");
  Tensor sq = row_reduce(
      ir::ReduceOp::Sum, s.stats, s.inner,
      [&](const std::vector<Var>& i, const Expr& k) {
        Expr d = x_row(i, k) - stat_at(mean, i);
        return d * d;
      },
      node.name + ".sqsum");
  Tensor inv = ir::compute(
      shape_exprs(s.stats),
      [&](const std::vector<Var>& i) {
        return Expr(1.0f) / ir::sqrt(stat_at(sq, i) * inv_n + Expr(eps));
      },
      node.name + ".invstd");
  Tensor y = ir::compute(
      shape_exprs(s.x),
      [&](const std::vector<Var>& i) {
        Expr v = (ir::read(x, {i.begin(), i.end()}) - stat_at(mean, i)) * stat_at(inv, i) *
                 broadcast_read(scale, i);
        if (bias) v = v + broadcast_read(bias, i);
        return v;
      },
      node.name + ".layernorm");
  std::vector<Tensor> out = {y};
  if (node.outputs.size() > 1) out.push_back(mean);
  if (node.outputs.size() > 2) out.push_back(inv);
  return out;
}

// ---- MaxPool / AveragePool / LpPool ----------------------------------------------------

// LpPool: (sum over the window of |x|^p)^(1/p), p a positive integer; a
// padded tap adds nothing (ONNX Runtime's kernel skips it, as |0|^p = 0).
enum class PoolKind { kMax, kAverage, kLp };

// The pools also run on NCHW[b]c data (graph::propagate_layout, between
// blocked convolutions): the node then carries kiln_block = b, its input is
// [N, C/b, H, W, b] and its output [N, C/b, OH, OW, b]. The attribute keeps
// this apart from a 3-D pool over a 5-D NCDHW input.
struct PoolShapes {
  int64_t n, c, h, w;  // c: channel blocks when blocked
  int64_t block;       // 0: NCHW
  Window win;
  bool count_include_pad;
  // MaxPool's Indices output: each maximum's flat position in X (NCHW only),
  // row-major (storage_order 0) or with W before H (1).
  bool indices;
  bool column_major;
  int64_t p;  // LpPool's
  std::vector<int64_t> out_shape() const {
    if (block) return {n, c, win.out[0], win.out[1], block};
    return {n, c, win.out[0], win.out[1]};
  }
};

// kiln_block of a pool node, checked against its input's shape.
int64_t pool_block(const Node& node, const std::vector<int64_t>& x) {
  int64_t block = attr_int(node, "kiln_block", 0);
  if (block < 0 || (block > 0 && (x.size() != 5 || x[4] != block)))
    fail(node, "kiln_block " + std::to_string(block) + " needs an NCHW" + std::to_string(block) +
                   "c input; got " + shape_str(x));
  return block;
}

// Whether a MaxPool node uses its second output, Indices.
bool wants_indices(const Node& node, PoolKind kind) {
  return kind == PoolKind::kMax && node.outputs.size() > 1 && !node.outputs[1].empty();
}

// The flat position in X of element (plane, ih, iw), plane = n * C + c, as
// MaxPool's Indices output holds it.
int64_t flat_position(const PoolShapes& s, int64_t plane, int64_t ih, int64_t iw) {
  return plane * s.h * s.w + (s.column_major ? iw * s.h + ih : ih * s.w + iw);
}

// LpPool's p (opset 1's float p reaches kiln as opset 11's integer one,
// through ONNX's version converter).
int64_t lp_order(const Node& node) {
  const int64_t p = attr_int(node, "p", 2);
  if (p < 1) fail(node, "p must be >= 1, got " + std::to_string(p));
  return p;
}

PoolShapes pool_shapes(const Node& node, PoolKind kind, const std::vector<int64_t>& x) {
  const int64_t block = pool_block(node, x);
  if (!block && x.size() != 4)
    fail(node, "only 2-D pooling over NCHW input is supported; got input " + shape_str(x));
  const bool indices = wants_indices(node, kind);
  if (indices && block) fail(node, "the Indices output needs NCHW input, not NCHW[b]c");
  const int64_t order = attr_int(node, "storage_order", 0);
  if (order != 0 && order != 1) fail(node, "storage_order must be 0 or 1");
  PoolShapes s{x[0],
               x[1],
               x[2],
               x[3],
               block,
               pool_window(node, {x[2], x[3]}),
               attr_int(node, "count_include_pad", 0) != 0,
               indices,
               order == 1,
               kind == PoolKind::kLp ? lp_order(node) : 0};
  return s;
}

// Number of taps k in [0, kernel) of output o's window along dim d that land in
// [lo, hi): the divisor of AveragePool.
int64_t taps_inside(const Window& w, size_t d, int64_t o, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < w.kernel[d]; ++k) {
    int64_t p = w.start(d, o) + k * w.dilation[d];
    n += p >= lo && p < hi;
  }
  return n;
}

// The same count as an expression of the output index o.
Expr taps_inside_expr(const Window& w, size_t d, Expr o, int64_t lo, int64_t hi) {
  Expr start = o * w.stride[d] - w.pad_begin[d];
  int64_t dil = w.dilation[d];
  // First tap with start + k * dil >= lo, last with start + k * dil <= hi - 1.
  Expr first = ir::max(ir::floordiv(Expr(lo) - start + (dil - 1), dil), Expr(int64_t{0}));
  Expr last = ir::min(ir::floordiv(Expr(hi - 1) - start, dil), Expr(w.kernel[d] - 1));
  return ir::max(last - first + 1, Expr(int64_t{0}));
}

// [lo, hi) of positions AveragePool counts along dim d.
std::pair<int64_t, int64_t> counted_range(const PoolShapes& s, size_t d) {
  if (!s.count_include_pad) return {0, s.win.in[d]};
  return {-s.win.pad_begin[d], s.win.in[d] + s.win.pad_end[d]};
}

// MaxPool also takes uint8 / int8 data (fold_qdq's DQ -> MaxPool -> Q with
// equal parameters: the max commutes with the monotone dequantization), the
// output of the same dtype; padded taps are skipped as in float.
bool is_8bit(const std::string& dtype) { return dtype == "uint8" || dtype == "int8"; }

// The reference's accumulator: its start, one tap, and the result.
double pool_start(PoolKind kind) {
  return kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
}
double pool_add(PoolKind kind, int64_t p, double acc, double v) {
  switch (kind) {
    case PoolKind::kMax: return std::max(acc, v);
    case PoolKind::kLp: return acc + std::pow(std::fabs(v), static_cast<double>(p));
    case PoolKind::kAverage: break;
  }
  return acc + v;
}
double lp_finish(double acc, int64_t p) { return std::pow(acc, 1.0 / static_cast<double>(p)); }

void check_pool_dtype(const Node& node, PoolKind kind, const std::string& dtype) {
  if (dtype == "float32" || (kind == PoolKind::kMax && is_8bit(dtype))) return;
  fail(node, "X has dtype " + dtype + "; " +
                 (kind == PoolKind::kMax ? "float32, uint8 or int8" : "only float32") +
                 " is supported");
}

// x's element at i as a double (float32, uint8 or int8).
double element(const Initializer& x, int64_t i) {
  if (x.type.dtype == "uint8") return data_of<uint8_t>(x)[i];
  if (x.type.dtype == "int8") return data_of<int8_t>(x)[i];
  return data_of<float>(x)[i];
}

void set_element(Initializer& y, int64_t i, double v) {
  if (y.type.dtype == "uint8")
    data_of<uint8_t>(y)[i] = static_cast<uint8_t>(v);
  else if (y.type.dtype == "int8")
    data_of<int8_t>(y)[i] = static_cast<int8_t>(v);
  else
    data_of<float>(y)[i] = static_cast<float>(v);
}

EvaluateFn pool_evaluate(PoolKind kind) {
  return [kind](const Node& node, const std::vector<const Initializer*>& inputs) {
    const Initializer& x = required_input(node, inputs, 0);
    check_pool_dtype(node, kind, x.type.dtype);
    PoolShapes s = pool_shapes(node, kind, x.type.shape);
    const Window& win = s.win;
    Initializer y = make_tensor(x.type.dtype, s.out_shape());
    Initializer index = make_tensor("int64", s.indices ? s.out_shape() : Shape{});
    auto [lo_h, hi_h] = counted_range(s, 0);
    auto [lo_w, hi_w] = counted_range(s, 1);
    // Element (ih, iw) of plane (nc, lane) is at (nc * H * W + ih * W + iw) * B + lane.
    const int64_t lanes = std::max<int64_t>(s.block, 1);
    for (int64_t nc = 0; nc < s.n * s.c; ++nc)
      for (int64_t lane = 0; lane < lanes; ++lane)
        for (int64_t oh = 0; oh < win.out[0]; ++oh)
          for (int64_t ow = 0; ow < win.out[1]; ++ow) {
            double acc = pool_start(kind);
            int64_t best = -1;  // the first maximum in window order (ONNX's reference)
            for (int64_t ky = 0; ky < win.kernel[0]; ++ky) {
              int64_t ih = win.start(0, oh) + ky * win.dilation[0];
              if (ih < 0 || ih >= s.h) continue;
              for (int64_t kx = 0; kx < win.kernel[1]; ++kx) {
                int64_t iw = win.start(1, ow) + kx * win.dilation[1];
                if (iw < 0 || iw >= s.w) continue;
                double v = element(x, ((nc * s.h + ih) * s.w + iw) * lanes + lane);
                if (kind == PoolKind::kMax && (best < 0 || v > acc))
                  best = flat_position(s, nc, ih, iw);
                acc = pool_add(kind, s.p, acc, v);
              }
            }
            if (kind == PoolKind::kAverage)
              acc /= static_cast<double>(taps_inside(win, 0, oh, lo_h, hi_h) *
                                         taps_inside(win, 1, ow, lo_w, hi_w));
            if (kind == PoolKind::kLp) acc = lp_finish(acc, s.p);
            const int64_t at = ((nc * win.out[0] + oh) * win.out[1] + ow) * lanes + lane;
            set_element(y, at, acc);
            if (s.indices) data_of<int64_t>(index)[at] = best;
          }
    if (s.indices) return std::vector<Initializer>{std::move(y), std::move(index)};
    return std::vector<Initializer>{std::move(y)};
  };
}

// The 3-D reference (NCDHW, no kiln_block): the compiled path runs it as
// 2-D pools (graph/passes/lower_3d_windows.h), and this is what they are
// compared with. Padded taps are skipped; AveragePool divides by the product
// of the per-dim counts, as the 2-D one.
std::vector<Initializer> pool3d_evaluate(PoolKind kind, const Node& node, const Initializer& x) {
  check_pool_dtype(node, kind, x.type.dtype);
  if (wants_indices(node, kind)) fail(node, "the Indices output of a 3-D MaxPool is not supported");
  const std::vector<int64_t>& xs = x.type.shape;
  const Window win = pool_window(node, {xs[2], xs[3], xs[4]});
  const bool include_pad = attr_int(node, "count_include_pad", 0) != 0;
  const int64_t p = kind == PoolKind::kLp ? lp_order(node) : 0;
  std::vector<int64_t> lo(3), hi(3);
  for (size_t d = 0; d < 3; ++d) {
    lo[d] = include_pad ? -win.pad_begin[d] : 0;
    hi[d] = include_pad ? win.in[d] + win.pad_end[d] : win.in[d];
  }
  Initializer y = make_tensor(x.type.dtype, {xs[0], xs[1], win.out[0], win.out[1], win.out[2]});
  int64_t at = 0;
  for (int64_t nc = 0; nc < xs[0] * xs[1]; ++nc)
    for (int64_t od = 0; od < win.out[0]; ++od)
      for (int64_t oh = 0; oh < win.out[1]; ++oh)
        for (int64_t ow = 0; ow < win.out[2]; ++ow, ++at) {
          double acc = pool_start(kind);
          for (int64_t kd = 0; kd < win.kernel[0]; ++kd) {
            int64_t id = win.start(0, od) + kd * win.dilation[0];
            if (id < 0 || id >= xs[2]) continue;
            for (int64_t ky = 0; ky < win.kernel[1]; ++ky) {
              int64_t ih = win.start(1, oh) + ky * win.dilation[1];
              if (ih < 0 || ih >= xs[3]) continue;
              for (int64_t kx = 0; kx < win.kernel[2]; ++kx) {
                int64_t iw = win.start(2, ow) + kx * win.dilation[2];
                if (iw < 0 || iw >= xs[4]) continue;
                double v = element(x, ((nc * xs[2] + id) * xs[3] + ih) * xs[4] + iw);
                acc = pool_add(kind, p, acc, v);
              }
            }
          }
          if (kind == PoolKind::kAverage)
            acc /= static_cast<double>(taps_inside(win, 0, od, lo[0], hi[0]) *
                                       taps_inside(win, 1, oh, lo[1], hi[1]) *
                                       taps_inside(win, 2, ow, lo[2], hi[2]));
          if (kind == PoolKind::kLp) acc = lp_finish(acc, p);
          set_element(y, at, acc);
        }
  return {std::move(y)};
}

// The pools' reference at any supported rank: 3-D above, 1-D and 2-D (and
// NCHW[b]c, which carries kiln_block) in pool_evaluate.
EvaluateFn pool_evaluate_any(PoolKind kind) {
  EvaluateFn low = evaluate_1d_as_2d(pool_evaluate(kind), false);
  return [kind, low](const Node& node, const std::vector<const Initializer*>& inputs) {
    if (!inputs.empty() && inputs[0] && inputs[0]->type.shape.size() == 5 &&
        attr_int(node, "kiln_block", 0) == 0)
      return pool3d_evaluate(kind, node, *inputs[0]);
    return low(node, inputs);
  };
}

// MaxPool's Indices: the first tap (in window order) of a real pixel that
// equals the maximum, then its flat position in X. Padded taps never match.
Tensor max_pool_indices(const Node& node, const PoolShapes& s, const Tensor& x, const Tensor& max,
                        const std::vector<int64_t>& bound) {
  const Window& win = s.win;
  const int64_t taps = win.kernel[0] * win.kernel[1];
  IterVar ry = ir::reduce_axis(win.kernel[0], "ry");
  IterVar rx = ir::reduce_axis(win.kernel[1], "rx");
  auto position = [&](const std::vector<Var>& i, const Expr& ky, const Expr& kx) {
    return std::pair{i[2] * win.stride[0] - win.pad_begin[0] + ky * win.dilation[0],
                     i[3] * win.stride[1] - win.pad_begin[1] + kx * win.dilation[1]};
  };
  Tensor first = ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        auto [h, w] = position(i, ry->var, rx->var);
        Expr real = ir::logical_and(ir::logical_and(h >= Expr(int64_t{0}), h < Expr(s.h)),
                                    ir::logical_and(w >= Expr(int64_t{0}), w < Expr(s.w)));
        Expr v = guarded_read(x, {i[0], i[1], h, w}, bound,
                              ir::reduce_identity(ir::ReduceOp::Max, x->dtype));
        Expr hit = ir::logical_and(real, ir::eq(v, ir::read(max, vars_to_exprs(i))));
        Expr tap = ry->var * win.kernel[1] + rx->var;
        return ir::reduce_min(ir::select(hit, tap, Expr(taps)), {ry, rx});
      },
      node.name + ".argmax");
  return ir::compute(
      shape_exprs(s.out_shape()),
      [&](const std::vector<Var>& i) {
        // A window always holds a real pixel; with a NaN nothing may match.
        Expr tap = clamp_index(ir::read(first, vars_to_exprs(i)), 0, taps - 1);
        auto [h, w] = position(i, ir::floordiv(tap, Expr(win.kernel[1])),
                               ir::floormod(tap, Expr(win.kernel[1])));
        h = clamp_index(h, 0, s.h - 1);
        w = clamp_index(w, 0, s.w - 1);
        Expr plane = i[0] * s.c + i[1];
        return plane * Expr(s.h * s.w) + (s.column_major ? w * Expr(s.h) + h : h * Expr(s.w) + w);
      },
      node.name + ".indices");
}

ComputeFn pool_compute(PoolKind kind) {
  return [kind](const Node& node, const ComputeInputs& in,
                const std::vector<TensorType>& out_types) {
    const Tensor& x = required_tensor(node, in, 0);
    PoolShapes s = pool_shapes(node, kind, static_shape(x));
    // The output's inferred dtype is the input's (check_out_type compares the
    // dtype name; ir_dtype maps it back for the comparison with x's).
    const std::string dtype = out_types.empty() ? "" : out_types[0].dtype;
    check_pool_dtype(node, kind, dtype);
    check_out_type(node, out_types, 0, s.out_shape(), dtype);
    ir::DataType dt = ir_dtype(dtype);
    if (!(x->dtype == dt))
      fail(node, "X's element type differs from the inferred output dtype " + dtype);
    const Window& win = s.win;
    std::vector<int64_t> bound = {0, 0, win.leaves_input(0) ? s.h : 0,
                                  win.leaves_input(1) ? s.w : 0};
    if (s.block) bound.push_back(0);
    // A padded tap reads the type's lowest value: never above a real tap (a
    // window always holds one), so it changes no maximum.
    Expr fill = kind == PoolKind::kMax ? ir::reduce_identity(ir::ReduceOp::Max, dt) : Expr(0.0f);
    IterVar ry = ir::reduce_axis(win.kernel[0], "ry");
    IterVar rx = ir::reduce_axis(win.kernel[1], "rx");
    Tensor r = ir::compute(
        shape_exprs(s.out_shape()),
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * win.stride[0] - win.pad_begin[0] + ry->var * win.dilation[0];
          Expr w = i[3] * win.stride[1] - win.pad_begin[1] + rx->var * win.dilation[1];
          std::vector<Expr> idx = {i[0], i[1], h, w};
          if (s.block) idx.push_back(i[4]);  // the lane: contiguous, vectorized
          Expr v = guarded_read(x, idx, bound, fill, /*test_per_dim=*/s.block != 0);
          if (kind == PoolKind::kMax) return ir::reduce_max(v, {ry, rx});
          return ir::sum(kind == PoolKind::kLp ? abs_pow(v, s.p) : v, {ry, rx});
        },
        node.name + (kind == PoolKind::kMax ? ".maxpool" : ".sumpool"));
    if (kind == PoolKind::kMax && s.indices) {
      check_out_type(node, out_types, 1, s.out_shape(), "int64");
      return std::vector<Tensor>{r, max_pool_indices(node, s, x, r, bound)};
    }
    if (kind == PoolKind::kMax) return std::vector<Tensor>{r};
    if (kind == PoolKind::kLp)
      return std::vector<Tensor>{ir::compute(
          r->shape,
          [&](const std::vector<Var>& i) { return root_of(ir::read(r, vars_to_exprs(i)), s.p); },
          node.name + ".lppool")};
    // Pairs, not structured bindings: the lambda captures them (clang 14 cannot capture bindings).
    const auto range_h = counted_range(s, 0), range_w = counted_range(s, 1);
    Tensor y = ir::compute(
        r->shape,
        [&](const std::vector<Var>& i) {
          Expr count = taps_inside_expr(win, 0, i[2], range_h.first, range_h.second) *
                       taps_inside_expr(win, 1, i[3], range_w.first, range_w.second);
          return ir::read(r, {i.begin(), i.end()}) / ir::cast(ir::DataType::f32(), count);
        },
        node.name + ".avgpool");
    return std::vector<Tensor>{y};
  };
}

// ---- GlobalAveragePool / GlobalMaxPool ----------------------------------------------------

// With kiln_block = b (as the pools above): input [N, C/b, H, W, b], output
// [N, C/b, 1, 1, b].
std::vector<int64_t> global_pool_shape(const Node& node, const std::vector<int64_t>& x) {
  if (x.size() < 3) fail(node, "input must have rank >= 3 (N, C, spatial...); got " + shape_str(x));
  const int64_t block = pool_block(node, x);
  std::vector<int64_t> out = x;
  for (size_t d = 2; d < out.size() - (block ? 1 : 0); ++d) out[d] = 1;
  return out;
}

EvaluateFn global_pool_evaluate(PoolKind kind) {
  return [kind](const Node& node, const std::vector<const Initializer*>& inputs) {
    const Initializer& x = required_input(node, inputs, 0);
    require_f32(node, x, "X");
    std::vector<int64_t> out_shape = global_pool_shape(node, x.type.shape);
    // Element j of plane (p, lane) is at (p * area + j) * lanes + lane.
    const int64_t lanes = std::max<int64_t>(pool_block(node, x.type.shape), 1);
    int64_t planes = x.type.shape[0] * x.type.shape[1];
    int64_t area = planes ? x.type.num_elements() / planes / lanes : 0;
    if (area == 0) fail(node, "empty spatial dims");
    Initializer y = make_tensor("float32", out_shape);
    const float* xp = data_of<float>(x);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t lane = 0; lane < lanes; ++lane) {
        double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t j = 0; j < area; ++j) {
          double v = xp[(p * area + j) * lanes + lane];
          acc = kind == PoolKind::kMax ? std::max(acc, v) : acc + v;
        }
        if (kind == PoolKind::kAverage) acc /= static_cast<double>(area);
        data_of<float>(y)[p * lanes + lane] = static_cast<float>(acc);
      }
    return std::vector<Initializer>{std::move(y)};
  };
}

ComputeFn global_pool_compute(PoolKind kind) {
  return
      [kind](const Node& node, const ComputeInputs& in, const std::vector<TensorType>& out_types) {
        const Tensor& x = required_tensor(node, in, 0);
        std::vector<int64_t> shape = static_shape(x);
        std::vector<int64_t> out_shape = global_pool_shape(node, shape);
        check_out_type(node, out_types, 0, out_shape, "float32");
        const int64_t block = pool_block(node, shape);
        int64_t area = 1;
        for (size_t d = 2; d < shape.size() - (block ? 1 : 0); ++d) area *= shape[d];
        if (area == 0) fail(node, "empty spatial dims");
        if (block) {
          // The lanes are the innermost output axis, contiguous in x: the
          // generic schedule vectorizes them inside the reduction over H, W.
          IterVar rh = ir::reduce_axis(shape[2], "rh"), rw = ir::reduce_axis(shape[3], "rw");
          Tensor red = ir::compute(
              shape_exprs(out_shape),
              [&](const std::vector<Var>& i) {
                Expr v = ir::read(x, {i[0], i[1], rh->var, rw->var, i[4]});
                return kind == PoolKind::kMax ? ir::reduce_max(v, {rh, rw}) : ir::sum(v, {rh, rw});
              },
              node.name + (kind == PoolKind::kMax ? ".max" : ".sum"));
          if (kind == PoolKind::kMax) return std::vector<Tensor>{red};
          return std::vector<Tensor>{ir::compute(
              red->shape,
              [&](const std::vector<Var>& i) {
                return ir::read(red, {i.begin(), i.end()}) *
                       Expr(static_cast<float>(1.0 / static_cast<double>(area)));
              },
              node.name + ".mean")};
        }
        // Each plane is contiguous: a row reduction with vector partials.
        Shape plane(shape.begin() + 2, shape.end());
        Tensor red = row_reduce(
            kind == PoolKind::kMax ? ir::ReduceOp::Max : ir::ReduceOp::Sum, out_shape, area,
            [&](const std::vector<Var>& i, const Expr& k) {
              std::vector<Expr> idx = {i[0], i[1]};
              for (const Expr& e : unflatten_index(k, plane)) idx.push_back(e);
              return ir::read(x, idx);
            },
            node.name + (kind == PoolKind::kMax ? ".max" : ".sum"));
        if (kind == PoolKind::kMax) return std::vector<Tensor>{red};
        Tensor y = ir::compute(
            red->shape,
            [&](const std::vector<Var>& i) {
              return ir::read(red, {i.begin(), i.end()}) * Expr(static_cast<float>(1.0 / area));
            },
            node.name + ".mean");
        return std::vector<Tensor>{y};
      };
}

}  // namespace

void register_reduce_ops() {
  for (auto [op, kind] :
       {std::pair{"ReduceMin", ReduceKind::kMin}, std::pair{"ReduceL1", ReduceKind::kL1},
        std::pair{"ReduceL2", ReduceKind::kL2},
        std::pair{"ReduceSumSquare", ReduceKind::kSumSquare}})
    register_op({op, OpPattern::kReduction, reduce_evaluate(kind), nullptr, {1}});
  register_op({"ReduceSum",
               OpPattern::kReduction,
               reduce_evaluate(ReduceKind::kSum),
               reduce_compute(ReduceKind::kSum),
               {1}});
  register_op({"ReduceMean",
               OpPattern::kReduction,
               reduce_evaluate(ReduceKind::kMean),
               reduce_compute(ReduceKind::kMean),
               {1}});
  register_op({"ReduceMax",
               OpPattern::kReduction,
               reduce_evaluate(ReduceKind::kMax),
               reduce_compute(ReduceKind::kMax),
               {1}});
  for (auto [op, kind] :
       {std::pair{"ReduceProd", ReduceKind::kProd}, std::pair{"ReduceLogSum", ReduceKind::kLogSum},
        std::pair{"ReduceLogSumExp", ReduceKind::kLogSumExp}})
    register_op({op, OpPattern::kReduction, reduce_evaluate(kind), reduce_compute(kind), {1}});
  register_op({"Softmax", OpPattern::kReduction, softmax_evaluate, softmax_compute, {}});
  register_op({"LogSoftmax", OpPattern::kReduction, log_softmax_evaluate, log_softmax_compute, {}});
  register_op(
      {"LayerNormalization", OpPattern::kReduction, layer_norm_evaluate, layer_norm_compute, {}});
  register_op(
      {"InstanceNormalization", OpPattern::kReduction, instance_norm_evaluate, nullptr, {}});
  register_op({"MaxPool",
               OpPattern::kReduction,
               pool_evaluate_any(PoolKind::kMax),
               pool_compute(PoolKind::kMax),
               {}});
  register_op({"AveragePool",
               OpPattern::kReduction,
               pool_evaluate_any(PoolKind::kAverage),
               pool_compute(PoolKind::kAverage),
               {}});
  register_op({"LpPool",
               OpPattern::kReduction,
               pool_evaluate_any(PoolKind::kLp),
               pool_compute(PoolKind::kLp),
               {}});
  register_op({"GlobalAveragePool",
               OpPattern::kReduction,
               global_pool_evaluate(PoolKind::kAverage),
               global_pool_compute(PoolKind::kAverage),
               {}});
  register_op({"GlobalMaxPool",
               OpPattern::kReduction,
               global_pool_evaluate(PoolKind::kMax),
               global_pool_compute(PoolKind::kMax),
               {}});
}

}  // namespace kiln::graph
