// Indexing operators: Size, EyeLike, Trilu, OneHot, GatherElements, GatherND,
// ScatterElements, ScatterND, ReverseSequence.
//
// evaluate is the reference with ONNX semantics; an index out of range there
// is an OpError naming the node (a constant index fails the build). compute
// is one tensor expression per operator. ONNX makes an index out of range an
// error in GatherElements, GatherND, ScatterElements and ScatterND: where the
// indices are graph constants, compute checks them as evaluate does, so the
// build fails; indices read at run time go through checked_run_time_index
// (op_util.h), which fails the run (the kernel returns
// KILN_STATUS_INDEX_OUT_OF_RANGE, the executor throws) and keeps every read
// in bounds meanwhile. OneHot's out-of-range index is no error (ONNX: a row
// of off-values), and ReverseSequence's run-time lengths are clamped into
// [0, T].
#include <algorithm>
#include <cstring>
#include <limits>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

using namespace op_util;  // NOLINT(google-build-using-namespace): the operator helpers
using ir::Expr;
using ir::Var;
using Inputs = std::vector<const Initializer*>;
using Outputs = std::vector<TensorType>;

void reg(const std::string& op, OpPattern pattern, EvaluateFn ev, ComputeFn cp,
         std::vector<int> consts = {}, std::vector<int> type_only = {}) {
  OpDef def{op, pattern, std::move(ev), std::move(cp), std::move(consts)};
  def.type_only_inputs = std::move(type_only);  // by name: robust to OpDef's member order
  register_op(std::move(def));
}

// Advances a row-major multi-index; false after the last one.
bool next_index(Shape& idx, const Shape& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

int64_t flat_of(const Shape& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// A run-time OneHot index (any integer dtype) as int64, negative ones
// wrapped once; no check (out of range is a row of off-values).
Expr wrapped_index(const Expr& raw, int64_t dim) {
  Expr k = ir::cast(ir::DataType::i64(), raw);
  return ir::select(k < Expr(int64_t{0}), k + Expr(dim), k);
}

void copy_element(Initializer& to, int64_t at, const Initializer& from, int64_t src) {
  size_t es = dtype_size(from.type.dtype);
  std::memcpy(to.data.data() + at * es, from.data.data() + src * es, es);
}

// ---- Size ------------------------------------------------------------------------
// The element count as an int64 scalar. Shapes are static at build time, so
// the folder evaluates it from the input's type (type_only_inputs) and the
// kernel, where one is ever asked for, is a constant.

std::vector<Initializer> eval_size(const Node& node, const Inputs& ins) {
  Initializer out = make_tensor("int64", {});
  data_of<int64_t>(out)[0] = numel(required_input(node, ins, 0).type.shape);
  return {out};
}

std::vector<ir::Tensor> compute_size(const Node& node, const ComputeInputs& in,
                                     const Outputs& out_types) {
  int64_t n = numel(static_shape(required_tensor(node, in, 0)));
  check_out_type(node, out_types, 0, {}, "int64");
  return {ir::compute(
      {}, [&](const std::vector<Var>&) { return Expr(n); }, "Size")};
}

// ---- EyeLike ---------------------------------------------------------------------
// A 2-D tensor of the input's shape with ones on the k-th diagonal; only the
// input's type is read.

std::string eye_like_dtype(const Node& node, const std::string& input_dtype) {
  auto t = node.attr<int64_t>("dtype");
  return t ? onnx_dtype_name(node, *t) : input_dtype;
}

std::vector<Initializer> eval_eye_like(const Node& node, const Inputs& ins) {
  const TensorType& in = required_input(node, ins, 0).type;
  if (in.shape.size() != 2) fail(node, "input must have rank 2, got " + shape_str(in.shape));
  const int64_t k = attr_int(node, "k", 0), rows = in.shape[0], cols = in.shape[1];
  Initializer out = make_tensor(eye_like_dtype(node, in.dtype), in.shape);
  visit_dtype(node, out.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = data_of<T>(out);
    for (int64_t i = 0; i < rows; ++i)
      if (i + k >= 0 && i + k < cols) o[i * cols + i + k] = T(1);
  });
  return {out};
}

std::vector<ir::Tensor> compute_eye_like(const Node& node, const ComputeInputs& in,
                                         const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  Shape shape = static_shape(x);
  if (shape.size() != 2) fail(node, "input must have rank 2, got " + shape_str(shape));
  std::string dtype = eye_like_dtype(node, x->dtype.str());
  check_out_type(node, out_types, 0, shape, dtype);
  ir::DataType t = ir_dtype(dtype);
  int64_t k = attr_int(node, "k", 0);
  return {ir::compute(
      shape_exprs(shape),
      [&](const std::vector<Var>& i) {
        return ir::select(ir::eq(Expr(i[1]) - Expr(i[0]), Expr(k)), ir::make_const(t, 1),
                          ir::make_const(t, 0));
      },
      "EyeLike")};
}

// ---- Trilu ------------------------------------------------------------------------
// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of every matrix
// of the last two dims; k is an optional constant input.

int64_t trilu_k(const Node& node, const Initializer* k) {
  if (!k) return 0;
  Shape v = to_ints(node, *k);
  if (v.size() != 1) fail(node, "k must have one element");
  return v[0];
}

bool trilu_keeps(bool upper, int64_t k, int64_t i, int64_t j) {
  return upper ? j - i >= k : j - i <= k;
}

std::vector<Initializer> eval_trilu(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Shape& s = x.type.shape;
  if (s.size() < 2) fail(node, "input must have rank >= 2, got " + shape_str(s));
  const int64_t k = trilu_k(node, optional_input(ins, 1));
  const bool upper = attr_int(node, "upper", 1) != 0;
  const int64_t rows = s[s.size() - 2], cols = s.back();
  Initializer out = make_tensor(x.type.dtype, s);  // zeros
  for (int64_t o = 0; o < numel(s); ++o)
    if (trilu_keeps(upper, k, (o / cols) % rows, o % cols)) copy_element(out, o, x, o);
  return {out};
}

std::vector<ir::Tensor> compute_trilu(const Node& node, const ComputeInputs& in,
                                      const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  if (x->ndim() < 2) fail(node, "input must have rank >= 2");
  // k: a build-time constant, or a scalar fed at run time (read once per
  // element: a broadcast load that the kernel hoists).
  const ir::Tensor* k_tensor = in.tensors.size() > 1 && in.tensors[1] ? &in.tensors[1] : nullptr;
  if (k_tensor)
    for (const Expr& d : (*k_tensor)->shape)
      if (const int64_t* n = ir::as_const_int(d); !n || *n != 1)
        fail(node, "k must have one element");
  const int64_t k = trilu_k(node, const_input(in, 1));
  const bool upper = attr_int(node, "upper", 1) != 0;
  return {ir::compute(
      x->shape,
      [&](const std::vector<Var>& i) {
        Expr diag = Expr(i.back()) - Expr(i[i.size() - 2]);
        Expr kv = Expr(k);
        if (k_tensor) {
          std::vector<Expr> zero((*k_tensor)->ndim(), Expr(int64_t{0}));
          kv = ir::read(*k_tensor, zero);
          if (kv.dtype() != diag.dtype()) kv = ir::cast(diag.dtype(), kv);
        }
        Expr keep = upper ? diag >= kv : diag <= kv;
        return ir::select(keep, ir::read(x, vars_to_exprs(i)), ir::make_const(x->dtype, 0));
      },
      "Trilu")};
}

// ---- OneHot -----------------------------------------------------------------------
// out[..., d, ...] (d at `axis`) = values[1] where the index (wrapped once if
// negative) equals d, else values[0]. depth is a build-time constant; the
// indices may be of any numeric type (truncated to integers). An index
// outside [-depth, depth) gives a row of off-values, as ONNX specifies.

int64_t one_hot_depth(const Node& node, const Initializer* depth) {
  if (!depth) fail(node, "depth must be a graph constant");
  std::vector<double> v = to_doubles(node, *depth);
  if (v.size() != 1) fail(node, "depth must have one element");
  if (!(v[0] >= 1) || v[0] != static_cast<double>(static_cast<int64_t>(v[0])))
    fail(node, "depth must be a positive integer");
  return static_cast<int64_t>(v[0]);
}

int64_t one_hot_axis(const Node& node, size_t indices_rank) {
  return normalize_axis(node, attr_int(node, "axis", -1), static_cast<int64_t>(indices_rank) + 1);
}

Shape one_hot_shape(const Shape& indices, int64_t axis, int64_t depth) {
  Shape out = indices;
  out.insert(out.begin() + axis, depth);
  return out;
}

std::vector<Initializer> eval_one_hot(const Node& node, const Inputs& ins) {
  const Initializer& indices = required_input(node, ins, 0);
  const int64_t depth = one_hot_depth(node, optional_input(ins, 1));
  const Initializer& values = required_input(node, ins, 2);
  if (values.type.num_elements() != 2) fail(node, "values must have two elements");
  const int64_t axis = one_hot_axis(node, indices.type.shape.size());
  Shape out_shape = one_hot_shape(indices.type.shape, axis, depth);
  Initializer out = make_tensor(values.type.dtype, out_shape);
  std::vector<double> idx = to_doubles(node, indices);
  const int64_t inner = numel(Shape(indices.type.shape.begin() + axis, indices.type.shape.end()));
  for (int64_t o = 0; o < numel(out_shape); ++o) {
    int64_t d = (o / inner) % depth;
    int64_t src = (o / (inner * depth)) * inner + o % inner;
    int64_t k = static_cast<int64_t>(idx[src]);  // truncation, as a cast to int64
    if (k < 0) k += depth;
    copy_element(out, o, values, k == d ? 1 : 0);
  }
  return {out};
}

std::vector<ir::Tensor> compute_one_hot(const Node& node, const ComputeInputs& in,
                                        const Outputs& out_types) {
  const ir::Tensor& indices = required_tensor(node, in, 0);
  const int64_t depth = one_hot_depth(node, const_input(in, 1));
  const ir::Tensor& values = required_tensor(node, in, 2);
  if (numel(static_shape(values)) != 2) fail(node, "values must have two elements");
  const int64_t axis = one_hot_axis(node, indices->ndim());
  Shape out_shape = one_hot_shape(static_shape(indices), axis, depth);
  check_out_type(node, out_types, 0, out_shape, values->dtype.str());
  return {ir::compute(
      shape_exprs(out_shape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> at = vars_to_exprs(i);
        Expr d = at[axis];
        at.erase(at.begin() + axis);
        Expr k = wrapped_index(ir::read(indices, at), depth);
        return ir::select(ir::eq(k, d), read_flat(values, Expr(int64_t{1})),
                          read_flat(values, Expr(int64_t{0})));
      },
      "OneHot")};
}

// ---- GatherElements ---------------------------------------------------------------
// out[p] = data[p with p[axis] replaced by indices[p]]; out has the indices'
// shape, whose dims other than axis must not exceed the data's.

int64_t gather_elements_axis(const Node& node, const Shape& data, const Shape& indices) {
  if (data.empty()) fail(node, "data must have rank >= 1");
  if (indices.size() != data.size()) fail(node, "indices must have the data's rank");
  int64_t axis = normalize_axis(node, attr_int(node, "axis", 0), static_cast<int64_t>(data.size()));
  for (size_t d = 0; d < data.size(); ++d)
    if (static_cast<int64_t>(d) != axis && indices[d] > data[d])
      fail(node, "indices " + shape_str(indices) + " exceed data " + shape_str(data) + " at axis " +
                     std::to_string(d));
  return axis;
}

std::vector<Initializer> eval_gather_elements(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& ind = required_input(node, ins, 1);
  const Shape &ds = x.type.shape, &is = ind.type.shape;
  const int64_t axis = gather_elements_axis(node, ds, is);
  Shape idx = to_ints(node, ind);
  Initializer out = make_tensor(x.type.dtype, is);
  Shape p(is.size(), 0);
  for (int64_t o = 0; o < numel(is); ++o, next_index(p, is)) {
    Shape q = p;
    q[axis] = checked_index(node, idx[o], axis, ds[axis]);
    copy_element(out, o, x, flat_of(q, ds));
  }
  return {out};
}

std::vector<ir::Tensor> compute_gather_elements(const Node& node, const ComputeInputs& in,
                                                const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& ind = required_tensor(node, in, 1);
  const Shape ds = static_shape(x), is = static_shape(ind);
  const int64_t axis = gather_elements_axis(node, ds, is);
  check_constant_indices(node, const_input(in, 1), axis, ds[axis]);
  return {ir::compute(
      shape_exprs(is),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> at = vars_to_exprs(i);
        at[axis] = checked_run_time_index(ir::read(ind, at), ds[axis]);
        return ir::read(x, at);
      },
      "GatherElements")};
}

// ---- GatherND ---------------------------------------------------------------------
// indices [B..., Q..., K] (b = batch_dims leading dims shared with the data):
// out[B, Q, R] = data[B, indices[B, Q, 0..K), R].

struct GatherNdShape {
  int64_t b = 0, k = 0;
  Shape out;
};

GatherNdShape gather_nd_shape(const Node& node, const Shape& data, const Shape& indices) {
  GatherNdShape s;
  s.b = attr_int(node, "batch_dims", 0);
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(indices.size());
  if (q < 1 || r < 1) fail(node, "data and indices must have rank >= 1");
  if (s.b < 0 || s.b >= std::min(q, r))
    fail(node, "batch_dims " + std::to_string(s.b) + " must be below both ranks");
  s.k = indices.back();
  if (s.k < 1 || s.k > r - s.b)
    fail(node, "index tuples of " + std::to_string(s.k) + " for data " + shape_str(data) +
                   " and batch_dims " + std::to_string(s.b));
  for (int64_t d = 0; d < s.b; ++d)
    if (data[d] != indices[d]) fail(node, "batch dims of data and indices differ");
  s.out.assign(indices.begin(), indices.end() - 1);
  s.out.insert(s.out.end(), data.begin() + s.b + s.k, data.end());
  return s;
}

std::vector<Initializer> eval_gather_nd(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& ind = required_input(node, ins, 1);
  const Shape &ds = x.type.shape, &is = ind.type.shape;
  GatherNdShape s = gather_nd_shape(node, ds, is);
  Shape idx = to_ints(node, ind);
  Initializer out = make_tensor(x.type.dtype, s.out);
  const size_t q1 = is.size() - 1;  // output dims taken from the indices
  Shape p(s.out.size(), 0);
  for (int64_t o = 0; o < numel(s.out); ++o, next_index(p, s.out)) {
    Shape tuple_at(p.begin(), p.begin() + q1);
    const int64_t t = flat_of(tuple_at, Shape(is.begin(), is.end() - 1));
    Shape q(p.begin(), p.begin() + s.b);
    for (int64_t c = 0; c < s.k; ++c)
      q.push_back(checked_index(node, idx[t * s.k + c], s.b + c, ds[s.b + c]));
    q.insert(q.end(), p.begin() + q1, p.end());
    copy_element(out, o, x, flat_of(q, ds));
  }
  return {out};
}

std::vector<ir::Tensor> compute_gather_nd(const Node& node, const ComputeInputs& in,
                                          const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& ind = required_tensor(node, in, 1);
  const Shape ds = static_shape(x), is = static_shape(ind);
  GatherNdShape s = gather_nd_shape(node, ds, is);
  if (const Initializer* c = const_input(in, 1)) {
    Shape v = to_ints(node, *c);
    for (size_t e = 0; e < v.size(); ++e) {
      const int64_t axis = s.b + static_cast<int64_t>(e) % s.k;
      checked_index(node, v[e], axis, ds[axis]);
    }
  }
  check_out_type(node, out_types, 0, s.out, x->dtype.str());
  const size_t q1 = is.size() - 1;
  return {ir::compute(
      shape_exprs(s.out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> tuple_at(i.begin(), i.begin() + q1);
        std::vector<Expr> at(i.begin(), i.begin() + s.b);
        for (int64_t c = 0; c < s.k; ++c) {
          std::vector<Expr> ii = tuple_at;
          ii.push_back(Expr(c));
          at.push_back(checked_run_time_index(ir::read(ind, ii), ds[s.b + c]));
        }
        at.insert(at.end(), i.begin() + q1, i.end());
        return ir::read(x, at);
      },
      "GatherND")};
}

// ---- ScatterElements, ScatterND -----------------------------------------------------
// The kernels are gathers over the updates: each output element looks for
// the updates aimed at it, a reduction over the candidates (ScatterElements:
// the indices' extent along the axis; ScatterND: every index tuple), so the
// output stays data-parallel. Cost: numel(data) * candidates reads, the price
// of not writing in index order; fine for the few updates models scatter
// (masks, caches), quadratic for a full permutation of a long axis.
// reduction "none" takes the last matching update, as ONNX's reference does
// for duplicates; "mul" multiplies the candidates in an unrolled chain (the
// IR has no product reduction), so it takes at most kMaxMulCandidates.

enum class Scatter { kNone, kAdd, kMul, kMax, kMin };
constexpr int64_t kMaxMulCandidates = 64;

Scatter scatter_reduction(const Node& node) {
  std::string r = attr_string(node, "reduction", "none");
  if (r == "none") return Scatter::kNone;
  if (r == "add") return Scatter::kAdd;
  if (r == "mul") return Scatter::kMul;
  if (r == "max") return Scatter::kMax;
  if (r == "min") return Scatter::kMin;
  fail(node, "reduction '" + r + "' is not supported");
}

// data[at] combined with one update u under the reduction (the host reference).
template <typename T>
T combine(Scatter how, T data, T u) {
  switch (how) {
    case Scatter::kNone: return u;
    case Scatter::kAdd: return static_cast<T>(data + u);
    case Scatter::kMul: return static_cast<T>(data * u);
    case Scatter::kMax: return std::max(data, u);
    case Scatter::kMin: return std::min(data, u);
  }
  return u;
}

void scatter_element(const Node& node, Scatter how, Initializer& out, int64_t at,
                     const Initializer& updates, int64_t src) {
  if (how == Scatter::kNone) return copy_element(out, at, updates, src);
  visit_dtype(node, out.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail(node, "reductions are not supported on bool");
    } else {
      T* o = data_of<T>(out);
      o[at] = combine(how, o[at], data_of<T>(updates)[src]);
    }
  });
}

// The output of a scatter kernel at data index `p`: `match(k)` says whether
// candidate k aims at p, `update(k)` reads its value (k clamped into range).
using Candidate = std::function<Expr(const Expr& k)>;

// The mul chain: data * prod over the candidates of (match ? update : 1).
Expr scatter_product(const Expr& data, int64_t candidates, const Candidate& match,
                     const Candidate& update) {
  Expr prod = data;
  for (int64_t k = 0; k < candidates; ++k)
    prod = prod * ir::select(match(Expr(k)), update(Expr(k)), ir::make_const(data.dtype(), 1));
  return prod;
}

// The reduction over the candidates: the last matching one (kNone), or the
// sum, max or min of the matching updates (the reduction's identity where
// none matches).
Expr scatter_reduce(Scatter how, ir::DataType dtype, int64_t candidates, const Candidate& match,
                    const Candidate& update) {
  ir::IterVar r = ir::reduce_axis(Expr(candidates), "cand");
  const Expr k = r->var;
  auto masked = [&](ir::ReduceOp op) {
    return ir::select(match(k), update(k), ir::reduce_identity(op, dtype));
  };
  switch (how) {
    case Scatter::kAdd: return ir::sum(masked(ir::ReduceOp::Sum), {r});
    case Scatter::kMax: return ir::reduce_max(masked(ir::ReduceOp::Max), {r});
    case Scatter::kMin: return ir::reduce_min(masked(ir::ReduceOp::Min), {r});
    default: return ir::reduce_max(ir::select(match(k), k, Expr(int64_t{-1})), {r});
  }
}

// A scatter's output: a reduction stage over the candidates (a Reduce is a
// stage's whole body), then the output combining it with the data; "mul" as
// one injective chain.
ir::Tensor scatter_output(Scatter how, const ir::Tensor& data, int64_t candidates,
                          const std::function<Candidate(const std::vector<Var>&)>& match,
                          const std::function<Candidate(const std::vector<Var>&)>& update,
                          const std::string& name) {
  auto data_at = [&](const std::vector<Var>& i) { return ir::read(data, vars_to_exprs(i)); };
  if (candidates == 0) return ir::compute(data->shape, data_at, name);  // no updates
  if (how == Scatter::kMul)
    return ir::compute(
        data->shape,
        [&](const std::vector<Var>& i) {
          return scatter_product(data_at(i), candidates, match(i), update(i));
        },
        name);
  ir::Tensor acc = ir::compute(
      data->shape,
      [&](const std::vector<Var>& i) {
        return scatter_reduce(how, data->dtype, candidates, match(i), update(i));
      },
      name + ".candidates");
  return ir::compute(
      data->shape,
      [&](const std::vector<Var>& i) {
        Expr a = ir::read(acc, vars_to_exprs(i)), d = data_at(i);
        switch (how) {
          case Scatter::kAdd: return d + a;
          case Scatter::kMax: return ir::max(d, a);
          case Scatter::kMin: return ir::min(d, a);
          default:  // a: the last matching candidate, or -1
            return ir::select(a >= Expr(int64_t{0}), update(i)(ir::max(a, Expr(int64_t{0}))), d);
        }
      },
      name);
}

// ScatterElements: updates and indices of one shape, each update written to
// its own position with the axis' coordinate replaced by the index.
int64_t scatter_elements_axis(const Node& node, const Shape& data, const Shape& indices,
                              const Shape& updates) {
  if (indices != updates) fail(node, "indices and updates must have one shape");
  return gather_elements_axis(node, data, indices);
}

std::vector<Initializer> eval_scatter_elements(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& ind = required_input(node, ins, 1);
  const Initializer& upd = required_input(node, ins, 2);
  if (upd.type.dtype != x.type.dtype) fail(node, "updates must have the data's dtype");
  const Shape &ds = x.type.shape, &is = ind.type.shape;
  const int64_t axis = scatter_elements_axis(node, ds, is, upd.type.shape);
  const Scatter how = scatter_reduction(node);
  Shape idx = to_ints(node, ind);
  Initializer out = x;
  Shape p(is.size(), 0);
  for (int64_t o = 0; o < numel(is); ++o, next_index(p, is)) {
    Shape q = p;
    q[axis] = checked_index(node, idx[o], axis, ds[axis]);
    scatter_element(node, how, out, flat_of(q, ds), upd, o);
  }
  return {out};
}

std::vector<ir::Tensor> compute_scatter_elements(const Node& node, const ComputeInputs& in,
                                                 const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& ind = required_tensor(node, in, 1);
  const ir::Tensor& upd = required_tensor(node, in, 2);
  const Shape ds = static_shape(x), is = static_shape(ind);
  const int64_t axis = scatter_elements_axis(node, ds, is, static_shape(upd));
  const Scatter how = scatter_reduction(node);
  if (how == Scatter::kMul && is[axis] > kMaxMulCandidates)
    fail(node, "reduction 'mul' over more than " + std::to_string(kMaxMulCandidates) +
                   " updates per element is not supported");
  check_constant_indices(node, const_input(in, 1), axis, ds[axis]);
  // The indices' position of candidate k for output p (clamped into the
  // indices' shape; `inside` says whether p lies within it at all).
  auto at_of = [&](const std::vector<Var>& i, const Expr& k) {
    std::vector<Expr> at;
    for (size_t d = 0; d < is.size(); ++d)
      at.push_back(static_cast<int64_t>(d) == axis ? k
                   : is[d] == ds[d]                ? Expr(i[d])
                                                   : clamp_index(i[d], 0, is[d] - 1));
    return at;
  };
  auto match = [&](const std::vector<Var>& i) -> Candidate {
    return [&, i](const Expr& k) {
      Expr m = ir::eq(checked_run_time_index(ir::read(ind, at_of(i, k)), ds[axis]), Expr(i[axis]));
      for (size_t d = 0; d < is.size(); ++d)
        if (static_cast<int64_t>(d) != axis && is[d] < ds[d])
          m = ir::logical_and(m, Expr(i[d]) < Expr(is[d]));
      return m;
    };
  };
  auto update = [&](const std::vector<Var>& i) -> Candidate {
    return [&, i](const Expr& k) { return ir::read(upd, at_of(i, k)); };
  };
  return {scatter_output(how, x, is[axis], match, update, "ScatterElements")};
}

// ScatterND: indices [T..., K], updates [T..., data dims from K on]: update
// tuple t replaces (or combines into) the slice data[indices[t]].
void check_scatter_nd_shapes(const Node& node, const Shape& ds, const Shape& is, const Shape& us) {
  if (is.empty()) fail(node, "indices must have rank >= 1");
  const int64_t k = is.back();
  if (k < 0 || k > static_cast<int64_t>(ds.size()))
    fail(node, "index tuples of " + std::to_string(k) + " for rank " + std::to_string(ds.size()) +
                   " data");
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), ds.begin() + k, ds.end());
  if (us != want) fail(node, "updates " + shape_str(us) + " must have shape " + shape_str(want));
}

std::vector<Initializer> eval_scatter_nd(const Node& node, const Inputs& ins) {
  const Initializer& data = required_input(node, ins, 0);
  const Initializer& indices = required_input(node, ins, 1);
  const Initializer& updates = required_input(node, ins, 2);
  if (updates.type.dtype != data.type.dtype) fail(node, "updates must have the data's dtype");
  const Shape& ds = data.type.shape;
  const Shape& is = indices.type.shape;
  check_scatter_nd_shapes(node, ds, is, updates.type.shape);
  const Scatter how = scatter_reduction(node);
  const size_t k = static_cast<size_t>(is.back());
  const Shape idx = to_ints(node, indices);
  const int64_t slice = numel(Shape(ds.begin() + k, ds.end()));
  Initializer out = data;
  const int64_t tuples = numel(Shape(is.begin(), is.end() - 1));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (size_t d = 0; d < k; ++d)
      offset = offset * ds[d] + checked_index(node, idx[t * k + d], static_cast<int64_t>(d), ds[d]);
    for (int64_t e = 0; e < slice; ++e)
      scatter_element(node, how, out, offset * slice + e, updates, t * slice + e);
  }
  return {out};
}

std::vector<ir::Tensor> compute_scatter_nd(const Node& node, const ComputeInputs& in,
                                           const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& ind = required_tensor(node, in, 1);
  const ir::Tensor& upd = required_tensor(node, in, 2);
  const Shape ds = static_shape(x), is = static_shape(ind);
  check_scatter_nd_shapes(node, ds, is, static_shape(upd));
  const Scatter how = scatter_reduction(node);
  const int64_t k = is.back();
  const Shape tuple_shape(is.begin(), is.end() - 1);
  const int64_t tuples = numel(tuple_shape);
  if (how == Scatter::kMul && tuples > kMaxMulCandidates)
    fail(node, "reduction 'mul' over more than " + std::to_string(kMaxMulCandidates) +
                   " index tuples is not supported");
  if (const Initializer* c = const_input(in, 1)) {
    Shape v = to_ints(node, *c);
    for (size_t e = 0; e < v.size(); ++e) {
      const int64_t axis = static_cast<int64_t>(e) % k;
      checked_index(node, v[e], axis, ds[axis]);
    }
  }
  auto match = [&](const std::vector<Var>& i) -> Candidate {
    return [&, i](const Expr& t) {
      std::vector<Expr> at = unflatten_index(t, tuple_shape);
      Expr m = ir::make_bool(true);
      for (int64_t c = 0; c < k; ++c) {
        std::vector<Expr> ic = at;
        ic.push_back(Expr(c));
        Expr e = ir::eq(checked_run_time_index(ir::read(ind, ic), ds[c]), Expr(i[c]));
        m = c == 0 ? e : ir::logical_and(m, e);
      }
      return m;
    };
  };
  auto update = [&](const std::vector<Var>& i) -> Candidate {
    return [&, i](const Expr& t) {
      std::vector<Expr> at = unflatten_index(t, tuple_shape);
      at.insert(at.end(), i.begin() + k, i.end());
      return ir::read(upd, at);
    };
  };
  return {scatter_output(how, x, tuples, match, update, "ScatterND")};
}

// ---- ReverseSequence ----------------------------------------------------------------
// Along time_axis, the first sequence_lens[b] elements of batch b reversed,
// the rest kept. A constant length outside [0, T] fails the build; a run-time
// one is clamped into [0, T].

struct SequenceAxes {
  int64_t time, batch;
};

SequenceAxes sequence_axes(const Node& node, const Shape& x, const Shape& lens) {
  SequenceAxes a{attr_int(node, "time_axis", 0), attr_int(node, "batch_axis", 1)};
  if (x.size() < 2) fail(node, "input must have rank >= 2");
  if (!((a.time == 0 && a.batch == 1) || (a.time == 1 && a.batch == 0)))
    fail(node, "time_axis and batch_axis must be 0 and 1 in some order");
  if (lens != Shape{x[a.batch]}) fail(node, "sequence_lens must have shape [batch]");
  return a;
}

// Lengths known at build time must lie in [0, T].
void check_sequence_lengths(const Node& node, const Shape& lens, int64_t time) {
  for (int64_t l : lens)
    if (l < 0 || l > time)
      fail(node, "sequence length " + std::to_string(l) + " is out of range [0, " +
                     std::to_string(time) + "]");
}

std::vector<Initializer> eval_reverse_sequence(const Node& node, const Inputs& ins) {
  const Initializer& x = required_input(node, ins, 0);
  const Initializer& lens = required_input(node, ins, 1);
  const Shape& s = x.type.shape;
  SequenceAxes a = sequence_axes(node, s, lens.type.shape);
  Shape len = to_ints(node, lens);
  check_sequence_lengths(node, len, s[a.time]);
  Initializer out = make_tensor(x.type.dtype, s);
  Shape p(s.size(), 0);
  for (int64_t o = 0; o < numel(s); ++o, next_index(p, s)) {
    Shape q = p;
    const int64_t l = len[p[a.batch]];
    if (p[a.time] < l) q[a.time] = l - 1 - p[a.time];
    copy_element(out, o, x, flat_of(q, s));
  }
  return {out};
}

std::vector<ir::Tensor> compute_reverse_sequence(const Node& node, const ComputeInputs& in,
                                                 const Outputs& out_types) {
  const ir::Tensor& x = required_tensor(node, in, 0);
  const ir::Tensor& lens = required_tensor(node, in, 1);
  const Shape s = static_shape(x);
  SequenceAxes a = sequence_axes(node, s, static_shape(lens));
  if (const Initializer* c = const_input(in, 1))
    check_sequence_lengths(node, to_ints(node, *c), s[a.time]);
  return {ir::compute(
      x->shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> at = vars_to_exprs(i);
        Expr l = ir::cast(ir::DataType::i64(), ir::read(lens, {Expr(i[a.batch])}));
        l = clamp_index(l, 0, s[a.time]);
        Expr t = i[a.time];
        at[a.time] = ir::select(t < l, l - Expr(int64_t{1}) - t, t);
        return ir::read(x, at);
      },
      "ReverseSequence")};
}

}  // namespace

void register_indexing_ops() {
  reg("Size", OpPattern::kInjective, eval_size, compute_size, {}, {0});
  reg("EyeLike", OpPattern::kInjective, eval_eye_like, compute_eye_like, {}, {0});
  {
    OpDef trilu{"Trilu", OpPattern::kInjective, eval_trilu, compute_trilu, {1}};
    trilu.constant_inputs_may_vary = true;  // k may be fed at run time
    register_op(std::move(trilu));
  }
  reg("OneHot", OpPattern::kInjective, eval_one_hot, compute_one_hot, {1});
  reg("GatherElements", OpPattern::kInjective, eval_gather_elements, compute_gather_elements);
  reg("GatherND", OpPattern::kInjective, eval_gather_nd, compute_gather_nd);
  // The scatters reduce over their candidates: opaque, never fused.
  reg("ScatterElements", OpPattern::kOpaque, eval_scatter_elements, compute_scatter_elements);
  // Scatter: ScatterElements' name before opset 11.
  reg("Scatter", OpPattern::kOpaque, eval_scatter_elements, compute_scatter_elements);
  reg("ScatterND", OpPattern::kOpaque, eval_scatter_nd, compute_scatter_nd);
  reg("ReverseSequence", OpPattern::kInjective, eval_reverse_sequence, compute_reverse_sequence);
}

}  // namespace kiln::graph
