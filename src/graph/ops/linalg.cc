// Linear algebra: Det, the determinant of each square matrix of [*, M, M].
//
// Both the reference and the kernel run Gaussian elimination with partial
// pivoting (LU, as LAPACK's getrf that numpy.linalg.det calls), in double
// whatever the input's float type: the determinant is the product of the
// pivots, negated once per row swap.
//
// The kernel is one small stage group per elimination step k, each over the
// whole batch at once: the largest |entry| of the column (a max reduction),
// the first row holding it (a min reduction over the row indices), the
// trailing (n-1) x (n-1) matrix after swapping that row to the top and
// eliminating below it, and the running product of the pivots. The trailing
// matrices shrink, so the work is M^3 / 3 multiply-adds a matrix, like LU's;
// the steps are M stage groups, which suits the small matrices (2x2, 3x3,
// 4x4 transforms) that models take determinants of.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace op_util {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;
using ir::Var;

struct DetShape {
  Shape batch;  // the output's shape
  int64_t m = 0;
};

DetShape det_shape(const Node& node, const Shape& x, const std::string& dtype) {
  if (dtype != "float32" && dtype != "float64")
    fail(node, "X is " + dtype + "; Det takes float32 or float64");
  if (x.size() < 2) fail(node, "X must have rank >= 2 (square matrices), got " + shape_str(x));
  if (x[x.size() - 1] != x[x.size() - 2])
    fail(node, "the last two dims of X must be equal (square matrices), got " + shape_str(x));
  if (x.back() < 1) fail(node, "X holds empty matrices " + shape_str(x));
  return {Shape(x.begin(), x.end() - 2), x.back()};
}

// The determinant of the m x m row-major matrix a (overwritten).
double lu_det(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t p = k;
    for (int64_t r = k + 1; r < m; ++r)
      if (std::fabs(a[r * m + k]) > std::fabs(a[p * m + k])) p = r;
    const double pivot = a[p * m + k];
    if (pivot == 0) return 0;
    if (p != k) {
      for (int64_t j = 0; j < m; ++j) std::swap(a[p * m + j], a[k * m + j]);
      det = -det;
    }
    det *= pivot;
    for (int64_t r = k + 1; r < m; ++r) {
      const double f = a[r * m + k] / pivot;
      for (int64_t j = k + 1; j < m; ++j) a[r * m + j] -= f * a[k * m + j];
    }
  }
  return det;
}

template <typename T>
Initializer det_eval_typed(const Initializer& x, const DetShape& s) {
  Initializer y = make_tensor(x.type.dtype, s.batch);
  const T* xp = data_of<T>(x);
  T* yp = data_of<T>(y);
  const int64_t mm = s.m * s.m;
  std::vector<double> a(static_cast<size_t>(mm));
  for (int64_t b = 0; b < numel(s.batch); ++b) {
    for (int64_t i = 0; i < mm; ++i) a[i] = static_cast<double>(xp[b * mm + i]);
    yp[b] = static_cast<T>(lu_det(a, s.m));
  }
  return y;
}

std::vector<Initializer> det_evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  const Initializer& x = required_input(node, in, 0);
  DetShape s = det_shape(node, x.type.shape, x.type.dtype);
  if (x.type.dtype == "float64") return {det_eval_typed<double>(x, s)};
  return {det_eval_typed<float>(x, s)};
}

// One elimination step on the batch of n x n matrices `a` [B, n, n] (n >= 2):
// returns the trailing [B, n-1, n-1] matrices, and multiplies `det` [B] by
// the pivot (negated where a row swap took place).
std::pair<Tensor, Tensor> eliminate(const Tensor& a, const Tensor& det, int64_t n,
                                    const std::string& name) {
  const int64_t batch = static_shape(a)[0];
  const Expr zero = ir::make_float(0, ir::DataType::f64());
  IterVar r = ir::reduce_axis(Expr(n), "r");
  Tensor amax = ir::compute(
      {Expr(batch)},
      [&](const std::vector<Var>& i) {
        return ir::reduce_max(ir::fabs(ir::at(a, i[0], r->var, int64_t{0})), {r});
      },
      name + ".colmax");
  IterVar r2 = ir::reduce_axis(Expr(n), "r");
  Tensor first = ir::compute(
      {Expr(batch)},
      [&](const std::vector<Var>& i) {
        Expr hit = ir::eq(ir::fabs(ir::at(a, i[0], r2->var, int64_t{0})), ir::at(amax, i[0]));
        return ir::reduce_min(ir::select(hit, Expr(r2->var), Expr(n)), {r2});
      },
      name + ".pivot_row");
  // Clamped: with a NaN in the column no row may equal the maximum.
  auto pivot_row = [&](const Var& b) { return clamp_index(ir::at(first, b), 0, n - 1); };
  auto pivot = [&](const Var& b) { return ir::read(a, {b, pivot_row(b), Expr(int64_t{0})}); };
  // A sum over one element: a reduction, which the generic schedule
  // materializes; an injective stage would be inlined into the next step,
  // which reads it three times, so the chain of steps would grow as 3^M.
  IterVar once = ir::reduce_axis(Expr(int64_t{1}), "once");
  Tensor next = ir::compute(
      {Expr(batch), Expr(n - 1), Expr(n - 1)},
      [&](const std::vector<Var>& i) {
        const Expr p = pivot_row(i[0]);
        // Row i + 1 after swapping the pivot row with row 0.
        const Expr row = Expr(i[1]) + Expr(int64_t{1});
        const Expr src = ir::select(ir::eq(row, p), Expr(int64_t{0}), row);
        const Expr piv = pivot(i[0]);
        // A zero pivot (a zero column): the determinant is 0 already; no NaN.
        const Expr f =
            ir::select(ir::eq(piv, zero), zero, ir::read(a, {i[0], src, Expr(int64_t{0})}) / piv);
        const Expr col = Expr(i[2]) + Expr(int64_t{1});
        return ir::sum(ir::read(a, {i[0], src, col}) - f * ir::read(a, {i[0], p, col}), {once});
      },
      name + ".trailing");
  Tensor det_next = ir::compute(
      {Expr(batch)},
      [&](const std::vector<Var>& i) {
        const Expr sign = ir::select(ir::eq(pivot_row(i[0]), Expr(int64_t{0})),
                                     ir::make_float(1, ir::DataType::f64()),
                                     ir::make_float(-1, ir::DataType::f64()));
        return ir::at(det, i[0]) * pivot(i[0]) * sign;
      },
      name + ".det");
  return {next, det_next};
}

std::vector<Tensor> det_compute(const Node& node, const ComputeInputs& in,
                                const std::vector<TensorType>& out_types) {
  const Tensor& x = required_tensor(node, in, 0);
  const std::string dtype = x->dtype.str();
  DetShape s = det_shape(node, static_shape(x), dtype);
  check_out_type(node, out_types, 0, s.batch, dtype);
  const int64_t batch = numel(s.batch);
  // The matrices as [B, M, M] in double.
  Tensor a = ir::compute(
      {Expr(batch), Expr(s.m), Expr(s.m)},
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx = unflatten_index(i[0], s.batch);
        idx.push_back(i[1]);
        idx.push_back(i[2]);
        return ir::cast(ir::DataType::f64(), ir::read(x, idx));
      },
      node.name + ".matrices");
  Tensor det = ir::compute(
      {Expr(batch)},
      [&](const std::vector<Var>&) { return ir::make_float(1, ir::DataType::f64()); },
      node.name + ".det_init");
  for (int64_t n = s.m; n > 1; --n) {
    auto [next, det_next] = eliminate(a, det, n, node.name + ".step" + std::to_string(s.m - n));
    a = next;
    det = det_next;
  }
  Tensor y = ir::compute(
      shape_exprs(s.batch),
      [&](const std::vector<Var>& i) {
        const Expr b =
            s.batch.empty() ? Expr(int64_t{0}) : flatten_index(vars_to_exprs(i), s.batch);
        return ir::cast(x->dtype,
                        ir::read(det, {b}) * ir::read(a, {b, Expr(int64_t{0}), Expr(int64_t{0})}));
      },
      node.name);
  return {y};
}

}  // namespace
}  // namespace op_util

void register_linalg_ops() {
  register_op({"Det", OpPattern::kOpaque, op_util::det_evaluate, op_util::det_compute, {}});
}

}  // namespace kiln::graph
