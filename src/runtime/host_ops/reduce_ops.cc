// Host reductions and scans: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
// ReduceSumSquare with their axes from input 1 (ReduceSum from opset 13,
// all from opset 18) or the `axes` attribute, fed at run time or reading run-time
// shaped tensors; CumSum with a run-time axis.
//
// Semantics are those of the graph's reference (graph/ops/reduce.cc): float
// types accumulate in double, integers in their own type (sums and products
// wrap); empty axes reduce everything, or nothing with noop_with_empty_axes
// (a reduction over no axes: each output element reduces one input element,
// so ReduceSumSquare squares and ReduceLogSum takes the log); a reduction
// over an empty axis gives the kind's identity (0, 1, -inf for Max, +inf for
// Min, NaN for a float Mean).
//
// The input is read as a strided view: adjacent axes that are all reduced
// or all kept merge, and the walk hands out whole innermost runs, contiguous
// in the input, either reduced into one accumulator (a reduced inner axis)
// or combined elementwise into a contiguous row of accumulators (a kept
// one), so that no index is recomputed per element.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The input as merged axes: extent, input stride and output stride (0 on a
// reduced axis), outermost first.
struct ReduceView {
  Shape extent, in_stride, out_stride;
  Shape out_shape;    // the node's output shape (keepdims applied)
  int64_t count = 1;  // input elements per output element
  int64_t out_numel = 1;
};

ReduceView reduce_view(const HostOpContext& ctx, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  Shape axes;
  if (ctx.input(1)) {
    if (ctx.has_attr("axes")) ctx.fail("axes given both as attribute and input");
    axes = ctx.int_values(1);
  } else {
    axes = ctx.attr_ints("axes");
  }
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(shape.size(), axes.empty() && !noop);
  for (int64_t a : axes) {
    int64_t d = host_axis(ctx, a, rank, "axis");
    if (rank == 0) continue;  // a scalar: axis 0 or -1 reduces its one element
    if (reduced[d]) ctx.fail("axis " + std::to_string(a) + " is listed twice");
    reduced[d] = true;
  }
  ReduceView v;
  Shape dense = host_strides(shape);
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      v.count *= shape[d];
      if (keepdims) v.out_shape.push_back(1);
    } else {
      v.out_shape.push_back(shape[d]);
    }
  }
  v.out_numel = host_numel(v.out_shape);
  // Output strides per input axis, then merge neighbours of the same kind
  // (both reduced, or both kept) whose strides chain.
  int64_t os = 1;
  Shape out_stride(shape.size(), 0);
  for (int64_t d = rank; d-- > 0;)
    if (!reduced[d]) out_stride[d] = os, os *= shape[d];
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;  // neither reduced nor kept matters
    if (!v.extent.empty() && (v.out_stride.back() == 0) == (out_stride[d] == 0) &&
        v.in_stride.back() == dense[d] * shape[d] &&
        v.out_stride.back() == out_stride[d] * shape[d]) {
      v.extent.back() *= shape[d];
      v.in_stride.back() = dense[d];
      v.out_stride.back() = out_stride[d];
      continue;
    }
    v.extent.push_back(shape[d]);
    v.in_stride.push_back(dense[d]);
    v.out_stride.push_back(out_stride[d]);
  }
  return v;
}

// Calls run(o, i, n, step) for every innermost run of the view: the n input
// elements from i on (contiguous) go to outputs o, o + step, ... (step 0:
// all into output o).
template <typename F>
void for_each_run(const ReduceView& v, F&& run) {
  if (host_numel(v.extent) == 0) return;
  const size_t rank = v.extent.size();
  if (rank == 0) return run(int64_t{0}, int64_t{0}, int64_t{1}, int64_t{0});
  const int64_t n = v.extent[rank - 1], step = v.out_stride[rank - 1];
  Shape index(rank, 0);
  int64_t i = 0, o = 0;
  for (;;) {
    run(o, i, n, step);
    size_t d = rank - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      i += v.in_stride[d], o += v.out_stride[d];
      if (++index[d] < v.extent[d]) break;
      i -= v.in_stride[d] * v.extent[d], o -= v.out_stride[d] * v.extent[d];
      index[d] = 0;
    }
  }
}

template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// Integer sums and products wrap (computed unsigned, where C++ defines it).
template <typename A>
A wrap_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename A>
A wrap_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

// Folds input elements into accumulators: the element's contribution
// (|x|, x*x, ...) combined with + or *, max or min.
template <Kind K, typename A>
A combine(A acc, A v) {
  if constexpr (K == Kind::kMax) return is_nan(v) || v > acc ? v : acc;
  if constexpr (K == Kind::kMin) return is_nan(v) || v < acc ? v : acc;
  if constexpr (K == Kind::kProd) return wrap_mul(acc, v);
  if constexpr (K == Kind::kL1) return wrap_add(acc, v < A(0) ? A(-v) : v);
  if constexpr (K == Kind::kL2 || K == Kind::kSumSquare) return wrap_add(acc, wrap_mul(v, v));
  return wrap_add(acc, v);  // kSum, kMean, kLogSum
}

template <Kind K, typename T>
AccOf<T> identity_of() {
  using A = AccOf<T>;
  if constexpr (K == Kind::kProd) return A(1);
  if constexpr (K == Kind::kMax)
    return std::is_floating_point_v<T> ? -std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::lowest();
  if constexpr (K == Kind::kMin)
    return std::is_floating_point_v<T> ? std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::max();
  return A(0);
}

// acc[o] = fold of the view's input elements reducing into o.
template <Kind K, typename T, typename A>
void accumulate(const ReduceView& v, const T* x, A* acc) {
  for_each_run(v, [&](int64_t o, int64_t i, int64_t n, int64_t step) {
    const T* xs = x + i;
    if (step == 0) {
      A a = acc[o];
      for (int64_t k = 0; k < n; ++k) a = combine<K, A>(a, static_cast<A>(xs[k]));
      acc[o] = a;
    } else {  // a kept inner axis: its output stride is 1
      A* as = acc + o;
      for (int64_t k = 0; k < n; ++k) as[k] = combine<K, A>(as[k], static_cast<A>(xs[k]));
    }
  });
}

// log(sum(exp(x))) as m + log(sum(exp(x - m))), m the maximum, as the graph's
// reference computes it (an infinite m shifts by 0).
template <typename T>
void log_sum_exp(const ReduceView& v, const T* x, T* y) {
  std::vector<double> m(static_cast<size_t>(v.out_numel), -std::numeric_limits<double>::infinity());
  accumulate<Kind::kMax>(v, x, m.data());
  for (double& e : m)
    if (std::isinf(e)) e = 0;
  std::vector<double> sum(static_cast<size_t>(v.out_numel), 0.0);
  for_each_run(v, [&](int64_t o, int64_t i, int64_t n, int64_t step) {
    const T* xs = x + i;
    if (step == 0) {
      double s = sum[o];
      const double mo = m[o];
      for (int64_t k = 0; k < n; ++k) s += std::exp(static_cast<double>(xs[k]) - mo);
      sum[o] = s;
    } else {
      for (int64_t k = 0; k < n; ++k) sum[o + k] += std::exp(static_cast<double>(xs[k]) - m[o + k]);
    }
  });
  for (int64_t o = 0; o < v.out_numel; ++o) y[o] = static_cast<T>(m[o] + std::log(sum[o]));
}

template <Kind K>
void reduce(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const ReduceView v = reduce_view(ctx, in.shape);
  constexpr bool log_kind = K == Kind::kLogSum || K == Kind::kLogSumExp;
  dispatch_dtype(ctx, in.dtype, [&](auto t) {
    using T = decltype(t);
    using A = AccOf<T>;
    if (in.dtype.code == DTypeCode::Bool) ctx.fail("a bool input is not supported");
    if constexpr (log_kind && !std::is_floating_point_v<T>) {
      ctx.fail("only float inputs are supported");
    } else {
      if constexpr (!std::is_floating_point_v<T>)
        if (K == Kind::kMean && v.count == 0) ctx.fail("the mean of an empty axis has no value");
      T* y = ctx.allocate_as<T>(0, v.out_shape);
      if constexpr (K == Kind::kLogSumExp) {
        log_sum_exp(v, in.as<T>(), y);
      } else {
        std::vector<A> acc(static_cast<size_t>(v.out_numel), identity_of<K, T>());
        accumulate<K>(v, in.as<T>(), acc.data());
        for (int64_t o = 0; o < v.out_numel; ++o) {
          A a = acc[o];
          if constexpr (K == Kind::kMean) {
            if constexpr (std::is_floating_point_v<T>)
              a = a / static_cast<A>(v.count);
            else
              a = static_cast<A>(a / static_cast<A>(v.count));
          }
          if constexpr (K == Kind::kL2) a = static_cast<A>(std::sqrt(static_cast<double>(a)));
          if constexpr (K == Kind::kLogSum) a = std::log(a);
          y[o] = static_cast<T>(a);
        }
      }
    }
  });
}

// CumSum(x, axis): running sums along a run-time axis; `exclusive` shifts
// by one, `reverse` runs from the end. The input is [outer, n, inner]
// around the axis; each outer block carries a row of `inner` accumulators
// down the axis, so the inner loop is contiguous.
void cum_sum(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  Shape axis_value = ctx.int_values(1);
  if (axis_value.size() != 1)
    ctx.fail("axis must hold one value, not " + std::to_string(axis_value.size()));
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  if (rank == 0) ctx.fail("the input must have rank 1 or more");
  const int64_t axis = host_axis(ctx, axis_value[0], rank, "axis");
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= in.shape[d];
  const int64_t n = in.shape[axis];
  dispatch_dtype(ctx, in.dtype, [&](auto t) {
    using T = decltype(t);
    using A = AccOf<T>;
    if (in.dtype.code == DTypeCode::Bool) ctx.fail("a bool input is not supported");
    const T* x = in.as<T>();
    T* y = ctx.allocate_as<T>(0, in.shape);
    std::vector<A> acc(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t s = 0; s < n; ++s) {
        const int64_t k = reverse ? n - 1 - s : s;
        const T* xs = x + (o * n + k) * inner;
        T* ys = y + (o * n + k) * inner;
        if (exclusive) {
          for (int64_t i = 0; i < inner; ++i) {
            ys[i] = static_cast<T>(acc[i]);
            acc[i] = wrap_add(acc[i], static_cast<A>(xs[i]));
          }
        } else {
          for (int64_t i = 0; i < inner; ++i) {
            acc[i] = wrap_add(acc[i], static_cast<A>(xs[i]));
            ys[i] = static_cast<T>(acc[i]);
          }
        }
      }
    }
  });
}

}  // namespace

void register_reduce_host_ops(std::map<std::string, HostOpFn>& t) {
  t["ReduceSum"] = reduce<Kind::kSum>;
  t["ReduceMean"] = reduce<Kind::kMean>;
  t["ReduceMax"] = reduce<Kind::kMax>;
  t["ReduceMin"] = reduce<Kind::kMin>;
  t["ReduceProd"] = reduce<Kind::kProd>;
  t["ReduceL1"] = reduce<Kind::kL1>;
  t["ReduceL2"] = reduce<Kind::kL2>;
  t["ReduceLogSum"] = reduce<Kind::kLogSum>;
  t["ReduceLogSumExp"] = reduce<Kind::kLogSumExp>;
  t["ReduceSumSquare"] = reduce<Kind::kSumSquare>;
  t["CumSum"] = cum_sum;
}

}  // namespace kiln::runtime
