// Ordering operators: ArgMax, ArgMin, Hardmax, CumSum, TopK.
//
// evaluate is the reference with ONNX semantics (ties: the lowest index, or
// the highest with select_last_index; TopK's ties: the lower index first).
// compute is a tensor expression the generic schedule compiles: reductions
// for the arg-extremes, a log-step scan for CumSum, a sorting network for
// TopK, each step a data-parallel stage.
//
// NaN: the references treat NaN as an ordinary value that compares false;
// the kernels do not promise anything about rows holding NaN (their indices
// stay within the axis).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers
using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;
using Inputs = std::vector<const Initializer*>;
using Outputs = std::vector<TensorType>;

// A tensor viewed as [outer, n, inner] around one axis.
struct AxisView {
  int64_t axis = 0, outer = 1, n = 1, inner = 1;
};

AxisView axis_view(const Node& node, const Shape& shape, int64_t axis_attr) {
  AxisView v;
  if (shape.empty()) fail(node, "input must have rank >= 1");
  v.axis = normalize_axis(node, axis_attr, static_cast<int64_t>(shape.size()));
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    (d < v.axis ? v.outer : d == v.axis ? v.n : v.inner) *= shape[d];
  return v;
}

// The element at position k of row (o, in) of a view.
inline int64_t at(const AxisView& v, int64_t o, int64_t k, int64_t in) {
  return (o * v.n + k) * v.inner + in;
}

// idx with the axis' coordinate replaced by k.
std::vector<Expr> along(const std::vector<Var>& i, size_t axis, const Expr& k) {
  std::vector<Expr> idx = vars_to_exprs(i);
  idx[axis] = k;
  return idx;
}

// A stage computed into its own buffer: a reduction over one tap, which the
// generic schedule never inlines. The scan's and the sorting network's steps
// each read the step before twice: inlined, the reads would double per step.
Tensor materialize(const Shape& shape, const std::function<Expr(const std::vector<Var>&)>& fn,
                   const std::string& name) {
  IterVar one = ir::reduce_axis(Expr(int64_t{1}), "one");
  return ir::compute(
      shape_exprs(shape), [&](const std::vector<Var>& i) { return ir::sum(fn(i), {one}); }, name);
}

// Calls f(T{}) for the numeric dtypes these operators take.
template <typename F>
decltype(auto) visit_numeric(const Node& node, const std::string& dtype, F&& f) {
  if (dtype == "bool") fail(node, "bool is not supported");
  return visit_dtype(node, dtype, std::forward<F>(f));
}

// ---- ArgMax, ArgMin ------------------------------------------------------------------
// Two reductions along the axis: the extreme m, then the first (or last)
// position whose value equals m. Output int64.

struct ArgSpec {
  AxisView v;
  bool keepdims, last;
  Shape out;
};

ArgSpec arg_spec(const Node& node, const Shape& shape) {
  ArgSpec s{axis_view(node, shape, attr_int(node, "axis", 0)),
            attr_int(node, "keepdims", 1) != 0,
            attr_int(node, "select_last_index", 0) != 0,
            {}};
  if (s.v.n == 0) fail(node, "cannot take the arg-extreme of an empty axis");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) != s.v.axis)
      s.out.push_back(shape[d]);
    else if (s.keepdims)
      s.out.push_back(1);
  }
  return s;
}

template <typename T>
int64_t arg_extreme(const T* x, const AxisView& v, int64_t o, int64_t in, bool max, bool last) {
  int64_t best = 0;
  for (int64_t k = 1; k < v.n; ++k) {
    T a = x[at(v, o, k, in)], b = x[at(v, o, best, in)];
    bool better = max ? a > b : a < b;
    if (better || (last && a == b)) best = k;
  }
  return best;
}

EvaluateFn eval_arg(bool max) {
  return [max](const Node& node, const Inputs& ins) {
    const Initializer& x = required_input(node, ins, 0);
    ArgSpec s = arg_spec(node, x.type.shape);
    Initializer y = make_tensor("int64", s.out);
    int64_t* yp = data_of<int64_t>(y);
    visit_numeric(node, x.type.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t o = 0; o < s.v.outer; ++o)
        for (int64_t in = 0; in < s.v.inner; ++in)
          yp[o * s.v.inner + in] = arg_extreme(data_of<T>(x), s.v, o, in, max, s.last);
    });
    return std::vector<Initializer>{std::move(y)};
  };
}

// The extreme along the axis, shaped as x with the axis of extent 1.
Tensor extreme_along(const Tensor& x, size_t axis, bool max, const std::string& name) {
  Shape row = static_shape(x);
  const int64_t n = row[axis];
  row[axis] = 1;
  IterVar k = ir::reduce_axis(Expr(n), "k");
  return ir::compute(
      shape_exprs(row),
      [&](const std::vector<Var>& i) {
        Expr v = ir::read(x, along(i, axis, k->var));
        return max ? ir::reduce_max(v, {k}) : ir::reduce_min(v, {k});
      },
      name);
}

// The first (or last) position along the axis where x equals m (extreme_along's
// output), in `out_shape` (x's shape without the axis, or with it at extent
// 1). Clamped into the axis: with a NaN in the row nothing may equal m.
Tensor position_of(const Tensor& x, const Tensor& m, size_t axis, bool last, bool keepdims,
                   const Shape& out_shape, const std::string& name) {
  const int64_t n = static_shape(x)[axis];
  IterVar k = ir::reduce_axis(Expr(n), "k");
  Tensor pos = ir::compute(
      shape_exprs(out_shape),
      [&](const std::vector<Var>& o) {
        std::vector<Var> i = o;  // x's index: the axis re-inserted
        if (!keepdims) i.insert(i.begin() + static_cast<std::ptrdiff_t>(axis), k->var);
        Expr hit = ir::eq(ir::read(x, along(i, axis, k->var)),
                          ir::read(m, along(i, axis, Expr(int64_t{0}))));
        Expr kv = k->var;
        return last ? ir::reduce_max(ir::select(hit, kv, Expr(int64_t{-1})), {k})
                    : ir::reduce_min(ir::select(hit, kv, Expr(n)), {k});
      },
      name + ".pos");
  return ir::compute(
      shape_exprs(out_shape),
      [&](const std::vector<Var>& o) {
        return clamp_index(ir::read(pos, vars_to_exprs(o)), 0, n - 1);
      },
      name);
}

ComputeFn compute_arg(bool max) {
  return [max](const Node& node, const ComputeInputs& in, const Outputs& out_types) {
    const Tensor& x = required_tensor(node, in, 0);
    ArgSpec s = arg_spec(node, static_shape(x));
    check_out_type(node, out_types, 0, s.out, "int64");
    const size_t axis = static_cast<size_t>(s.v.axis);
    Tensor m = extreme_along(x, axis, max, node.op_type + ".extreme");
    return std::vector<Tensor>{position_of(x, m, axis, s.last, s.keepdims, s.out, node.op_type)};
  };
}

// ---- Hardmax -----------------------------------------------------------------------
// 1 at the first maximum along the axis (default -1), 0 elsewhere. Opset < 13
// coerces to 2-D first; the frontend rewrites those nodes
// (frontend/legacy_ops.h), so the registry implements opset 13.

std::vector<Initializer> eval_hardmax(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  AxisView v = axis_view(node, x.type.shape, attr_int(node, "axis", -1));
  Initializer y = make_tensor(x.type.dtype, x.type.shape);
  visit_numeric(node, x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t in = 0; in < v.inner; ++in)
        if (v.n > 0)
          data_of<T>(y)[at(v, o, arg_extreme(data_of<T>(x), v, o, in, true, false), in)] = T(1);
  });
  return {y};
}

std::vector<Tensor> compute_hardmax(const Node& node, const ComputeInputs& in,
                                    const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Shape shape = static_shape(x);
  AxisView v = axis_view(node, shape, attr_int(node, "axis", -1));
  check_out_type(node, out_types, 0, shape, x->dtype.str());
  const size_t axis = static_cast<size_t>(v.axis);
  Shape row = shape;
  row[axis] = 1;
  Tensor m = extreme_along(x, axis, true, "Hardmax.max");
  Tensor pos = position_of(x, m, axis, false, true, row, "Hardmax.argmax");
  return {ir::compute(
      shape_exprs(shape),
      [&](const std::vector<Var>& i) {
        Expr hit = ir::eq(Expr(i[axis]), ir::read(pos, along(i, axis, Expr(int64_t{0}))));
        return ir::select(hit, ir::make_const(x->dtype, 1), ir::make_const(x->dtype, 0));
      },
      "Hardmax")};
}

// ---- CumSum --------------------------------------------------------------------------
// Running sums along a constant axis; exclusive shifts by one, reverse runs
// from the end. The kernel is a Hillis-Steele scan: ceil(log2 n) steps, step
// s adding the value 2^s positions back, each step a data-parallel stage
// over the whole tensor (all axes parallel, vector loads along contiguous
// inner axes). Cost: N * ceil(log2 n) additions and as many passes over the
// tensor (N elements, n along the axis), against N for a sequential scan,
// which a tensor expression cannot state; the sums associate differently
// from the reference's left-to-right order (float rounding differs).

int64_t cumsum_axis(const Node& node, const Initializer* axis, size_t rank) {
  if (!axis) fail(node, "axis must be a graph constant");
  Shape a = to_ints(node, *axis);
  if (a.size() != 1) fail(node, "axis must have one element");
  return normalize_axis(node, a[0], static_cast<int64_t>(rank));
}

std::vector<Initializer> eval_cumsum(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  int64_t axis = cumsum_axis(node, optional_input(ins, 1), x.type.shape.size());
  AxisView v = axis_view(node, x.type.shape, axis);
  const bool exclusive = attr_int(node, "exclusive", 0) != 0;
  const bool reverse = attr_int(node, "reverse", 0) != 0;
  Initializer y = make_tensor(x.type.dtype, x.type.shape);
  visit_numeric(node, x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    const T* xp = data_of<T>(x);
    T* yp = data_of<T>(y);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t in = 0; in < v.inner; ++in) {
        Acc acc = 0;
        for (int64_t s = 0; s < v.n; ++s) {
          const int64_t k = reverse ? v.n - 1 - s : s;
          const Acc xv = static_cast<Acc>(xp[at(v, o, k, in)]);
          if (!exclusive) acc += xv;
          yp[at(v, o, k, in)] = static_cast<T>(acc);
          if (exclusive) acc += xv;
        }
      }
  });
  return {y};
}

// x[.., k - d, ..] (k + d with reverse) where that lies in the axis, else 0.
Expr shifted(const Tensor& t, const std::vector<Var>& i, size_t axis, int64_t n, int64_t d,
             bool reverse) {
  Expr k = i[axis];
  Expr src = reverse ? k + Expr(d) : k - Expr(d);
  Expr inside = reverse ? src < Expr(n) : src >= Expr(int64_t{0});
  return ir::select(inside, ir::read(t, along(i, axis, clamp_index(src, 0, n - 1))),
                    ir::make_const(t->dtype, 0));
}

std::vector<Tensor> compute_cumsum(const Node& node, const ComputeInputs& in,
                                   const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Shape shape = static_shape(x);
  const size_t axis = static_cast<size_t>(cumsum_axis(node, const_input(in, 1), shape.size()));
  check_out_type(node, out_types, 0, shape, x->dtype.str());
  if (x->dtype.is_bool()) fail(node, "bool is not supported");
  const bool exclusive = attr_int(node, "exclusive", 0) != 0;
  const bool reverse = attr_int(node, "reverse", 0) != 0;
  const int64_t n = shape[axis];
  // Step 0: the input, shifted by one for an exclusive sum (inlined).
  Tensor cur = x;
  if (exclusive)
    cur = ir::compute(
        shape_exprs(shape),
        [&](const std::vector<Var>& i) { return shifted(x, i, axis, n, 1, reverse); },
        "CumSum.shift");
  for (int64_t d = 1; d < n; d *= 2) {
    Tensor prev = cur;
    cur = materialize(
        shape,
        [&](const std::vector<Var>& i) {
          return ir::read(prev, vars_to_exprs(i)) + shifted(prev, i, axis, n, d, reverse);
        },
        "CumSum.step" + std::to_string(d));
  }
  if (cur->is_placeholder)  // n <= 1 and inclusive: a copy
    cur = ir::compute(
        shape_exprs(shape),
        [&](const std::vector<Var>& i) { return ir::read(x, vars_to_exprs(i)); }, "CumSum");
  return {cur};
}

// ---- TopK ------------------------------------------------------------------------------
// The k largest (or smallest) along the axis, sorted, ties by the lower
// index; k is a build-time constant. Both kernels order (value, index) keys,
// so the order is total and ties go to the lower index, and both return the
// k sorted (sorted=0 gets them sorted as well, which ONNX allows):
// - a bitonic network sorting each row's positions, padded to N = 2^L >= n:
//   L(L+1)/2 compare-exchange steps, each a data-parallel stage over
//   [outer, N, inner] positions; padding sorts last. Cost: N L(L+1)/2
//   compare-exchanges per row (n log^2 n), independent of k.
// - for small k, selection: k rounds, round t two reductions along the axis
//   (the best value ranking after round t-1's, then its first position).
//   Cost: 2 k n per row, 2k passes over the input.
// The one with fewer passes is taken (top-5 of 1000: 10 passes, not 55).

struct TopKSpec {
  AxisView v;
  int64_t k;
  bool largest;
  Shape out;
};

TopKSpec topk_spec(const Node& node, const Shape& shape, const Initializer* k_input) {
  TopKSpec s{axis_view(node, shape, attr_int(node, "axis", -1)), 0,
             attr_int(node, "largest", 1) != 0, shape};
  if (auto k = node.attr<int64_t>("k")) {  // opset < 10
    s.k = *k;
  } else {
    if (!k_input) fail(node, "K must be a graph constant");
    Shape kv = to_ints(node, *k_input);
    if (kv.size() != 1) fail(node, "K must have one element");
    s.k = kv[0];
  }
  if (s.k < 0 || s.k > s.v.n)
    fail(node,
         "K " + std::to_string(s.k) + " is out of range for an axis of " + std::to_string(s.v.n));
  s.out[s.v.axis] = s.k;
  return s;
}

template <typename T>
void topk_rows(const Initializer& x, const TopKSpec& s, Initializer& values, Initializer& idx) {
  const T* xp = data_of<T>(x);
  std::vector<int64_t> order(static_cast<size_t>(s.v.n));
  for (int64_t o = 0; o < s.v.outer; ++o)
    for (int64_t in = 0; in < s.v.inner; ++in) {
      std::iota(order.begin(), order.end(), int64_t{0});
      auto key = [&](int64_t k) { return xp[at(s.v, o, k, in)]; };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return s.largest ? key(a) > key(b) : key(a) < key(b);
      });
      AxisView ov = s.v;
      ov.n = s.k;
      for (int64_t r = 0; r < s.k; ++r) {
        data_of<T>(values)[at(ov, o, r, in)] = key(order[r]);
        data_of<int64_t>(idx)[at(ov, o, r, in)] = order[r];
      }
    }
}

std::vector<Initializer> eval_topk(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  TopKSpec s = topk_spec(node, x.type.shape, optional_input(ins, 1));
  Initializer values = make_tensor(x.type.dtype, s.out);
  Initializer idx = make_tensor("int64", s.out);
  visit_numeric(node, x.type.dtype, [&](auto tag) { topk_rows<decltype(tag)>(x, s, values, idx); });
  return {values, idx};
}

// One compare-exchange step of the network: blocks of `size`, partners `d`
// apart. Position j keeps the earlier (in the output order) of perm[j] and
// perm[partner] when it is the lower of the pair in an ascending block or
// the upper in a descending one, else the later.
Tensor bitonic_step(const Tensor& x, const Tensor& perm, const Shape& pshape, size_t axis,
                    int64_t n, bool largest, int64_t size, int64_t d) {
  return materialize(
      pshape,
      [&](const std::vector<Var>& i) {
        Expr j = i[axis];
        Expr lower = ir::floormod(j, Expr(2 * d)) < Expr(d);
        Expr ascending = ir::floormod(j, Expr(2 * size)) < Expr(size);
        Expr partner = ir::select(lower, j + Expr(d), j - Expr(d));
        Expr a = ir::read(perm, vars_to_exprs(i));
        Expr b = ir::read(perm, along(i, axis, partner));
        Expr va = ir::read(x, along(i, axis, clamp_index(a, 0, n - 1)));
        Expr vb = ir::read(x, along(i, axis, clamp_index(b, 0, n - 1)));
        Expr better = largest ? va > vb : va < vb;
        Expr tie = ir::logical_and(ir::eq(va, vb), a < b);
        // a sorts before b: a is a real position, and b is padding or ranks after a.
        Expr a_first =
            ir::logical_and(a < Expr(n), ir::logical_or(b >= Expr(n), ir::logical_or(better, tie)));
        Expr keep_first =
            ir::eq(ir::cast(ir::DataType::i64(), lower), ir::cast(ir::DataType::i64(), ascending));
        return ir::select(keep_first, ir::select(a_first, a, b), ir::select(a_first, b, a));
      },
      "TopK.step" + std::to_string(size) + "_" + std::to_string(d));
}

// Selection rounds beat the network when they make fewer passes; their
// output is a select chain over the rounds, so k stays small.
constexpr int64_t kMaxSelectionK = 16;

bool use_selection(int64_t k, int64_t padded) {
  int64_t steps = 0;
  for (int64_t size = 2; size <= padded; size *= 2)
    for (int64_t d = size / 2; d >= 1; d /= 2) ++steps;
  return k >= 1 && k <= kMaxSelectionK && 2 * k < steps;
}

// Round t of selection: the best value along the axis ranking after
// (prev_v, prev_i) (every value in round 0), and the first position holding
// it after prev_i, both shaped as x with the axis of extent 1.
std::pair<Tensor, Tensor> select_round(const Tensor& x, size_t axis, bool largest,
                                       const Tensor& prev_v, const Tensor& prev_i, int64_t t) {
  Shape row = static_shape(x);
  const int64_t n = row[axis];
  row[axis] = 1;
  const ir::ReduceOp op = largest ? ir::ReduceOp::Max : ir::ReduceOp::Min;
  auto after = [&](const std::vector<Var>& i, const Expr& j, const Expr& xj) -> Expr {
    if (!prev_v) return ir::make_bool(true);
    Expr v = ir::read(prev_v, along(i, axis, Expr(int64_t{0})));
    Expr p = ir::read(prev_i, along(i, axis, Expr(int64_t{0})));
    Expr worse = largest ? xj < v : xj > v;
    return ir::logical_or(worse, ir::logical_and(ir::eq(xj, v), j > p));
  };
  IterVar r1 = ir::reduce_axis(Expr(n), "k");
  Tensor best = ir::compute(
      shape_exprs(row),
      [&](const std::vector<Var>& i) {
        Expr xj = ir::read(x, along(i, axis, r1->var));
        Expr v = ir::select(after(i, r1->var, xj), xj, ir::reduce_identity(op, x->dtype));
        return largest ? ir::reduce_max(v, {r1}) : ir::reduce_min(v, {r1});
      },
      "TopK.value" + std::to_string(t));
  IterVar r2 = ir::reduce_axis(Expr(n), "k");
  Tensor pos = ir::compute(
      shape_exprs(row),
      [&](const std::vector<Var>& i) {
        Expr j = r2->var;
        Expr xj = ir::read(x, along(i, axis, j));
        Expr hit = ir::logical_and(ir::eq(xj, ir::read(best, along(i, axis, Expr(int64_t{0})))),
                                   after(i, j, xj));
        return ir::reduce_min(ir::select(hit, j, Expr(n)), {r2});
      },
      "TopK.index" + std::to_string(t));
  return {best, pos};
}

// out[.., r, ..] = rounds[r][.., 0, ..]: a select chain over the rounds.
Tensor gather_rounds(const std::vector<Tensor>& rounds, const Shape& out, size_t axis,
                     int64_t n_clamp, const std::string& name) {
  return ir::compute(
      shape_exprs(out),
      [&](const std::vector<Var>& i) {
        auto at = [&](size_t t) {
          Expr v = ir::read(rounds[t], along(i, axis, Expr(int64_t{0})));
          return n_clamp > 0 ? clamp_index(v, 0, n_clamp - 1) : v;
        };
        Expr v = at(rounds.size() - 1);
        for (size_t t = rounds.size() - 1; t-- > 0;)
          v = ir::select(ir::eq(Expr(i[axis]), Expr(static_cast<int64_t>(t))), at(t), v);
        return v;
      },
      name);
}

std::vector<Tensor> topk_by_selection(const Tensor& x, const TopKSpec& s, size_t axis) {
  std::vector<Tensor> values, indices;
  for (int64_t t = 0; t < s.k; ++t) {
    auto [v, i] = select_round(x, axis, s.largest, t ? values.back() : nullptr,
                               t ? indices.back() : nullptr, t);
    values.push_back(v);
    indices.push_back(i);
  }
  return {gather_rounds(values, s.out, axis, 0, "TopK.values"),
          gather_rounds(indices, s.out, axis, s.v.n, "TopK.indices")};
}

std::vector<Tensor> compute_topk(const Node& node, const ComputeInputs& in,
                                 const Outputs& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const Shape shape = static_shape(x);
  TopKSpec s = topk_spec(node, shape, const_input(in, 1));
  check_out_type(node, out_types, 0, s.out, x->dtype.str());
  check_out_type(node, out_types, 1, s.out, "int64");
  const size_t axis = static_cast<size_t>(s.v.axis);
  const int64_t n = s.v.n;
  int64_t padded = 1;
  while (padded < n) padded *= 2;
  if (use_selection(s.k, padded)) return topk_by_selection(x, s, axis);
  Shape pshape = shape;
  pshape[axis] = padded;
  // The identity permutation, then the network's steps.
  Tensor perm = ir::compute(
      shape_exprs(pshape), [&](const std::vector<Var>& i) { return Expr(i[axis]); }, "TopK.iota");
  for (int64_t size = 2; size <= padded; size *= 2)
    for (int64_t d = size / 2; d >= 1; d /= 2)
      perm = bitonic_step(x, perm, pshape, axis, n, s.largest, size, d);
  if (perm->reduce_axis.empty())  // n <= 1: no step; the identity computed once
    perm = materialize(
        pshape, [&](const std::vector<Var>& i) { return ir::read(perm, vars_to_exprs(i)); },
        "TopK.order");
  Tensor indices = ir::compute(
      shape_exprs(s.out),
      [&](const std::vector<Var>& i) { return ir::read(perm, vars_to_exprs(i)); }, "TopK.indices");
  Tensor values = ir::compute(
      shape_exprs(s.out),
      [&](const std::vector<Var>& i) {
        Expr p = clamp_index(ir::read(perm, vars_to_exprs(i)), 0, n - 1);
        return ir::read(x, along(i, axis, p));
      },
      "TopK.values");
  return {values, indices};
}

}  // namespace

void register_ordering_ops() {
  register_op(OpDef{"ArgMax", OpPattern::kReduction, eval_arg(true), compute_arg(true), {}});
  register_op(OpDef{"ArgMin", OpPattern::kReduction, eval_arg(false), compute_arg(false), {}});
  register_op(OpDef{"Hardmax", OpPattern::kReduction, eval_hardmax, compute_hardmax, {}});
  register_op(OpDef{"CumSum", OpPattern::kOpaque, eval_cumsum, compute_cumsum, {1}});
  register_op(OpDef{"TopK", OpPattern::kOpaque, eval_topk, compute_topk, {1}});
}

}  // namespace kiln::graph
