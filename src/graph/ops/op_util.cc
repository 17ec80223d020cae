#include "graph/ops/op_util.h"

#include <algorithm>

namespace kiln::graph::op_util {

std::string node_error(const Node& node, const std::string& problem) {
  return "node '" + node.name + "' (" + node.op_type + "): " + problem;
}

std::string node_error_once(const Node& node, const std::string& what) {
  std::string prefix = node_error(node, "");
  return what.rfind(prefix, 0) == 0 ? what : prefix + what;
}

void fail(const Node& node, const std::string& problem) {
  throw OpError(node_error(node, problem));
}

// ---- attributes -------------------------------------------------------------

int64_t attr_int(const Node& node, const std::string& key, int64_t dflt) {
  return node.attr<int64_t>(key).value_or(dflt);
}

float attr_float(const Node& node, const std::string& key, float dflt) {
  return node.attr<float>(key).value_or(dflt);
}

std::string attr_string(const Node& node, const std::string& key, const std::string& dflt) {
  return node.attr<std::string>(key).value_or(dflt);
}

std::vector<int64_t> attr_ints(const Node& node, const std::string& key,
                               std::vector<int64_t> dflt) {
  return node.attr<std::vector<int64_t>>(key).value_or(std::move(dflt));
}

std::optional<std::vector<int64_t>> attr_ints(const Node& node, const std::string& key) {
  return node.attr<std::vector<int64_t>>(key);
}

// ---- inputs -----------------------------------------------------------------

const Initializer* optional_input(const std::vector<const Initializer*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

const Initializer& required_input(const Node& node, const std::vector<const Initializer*>& inputs,
                                  size_t i) {
  const Initializer* t = optional_input(inputs, i);
  if (!t) fail(node, "input " + std::to_string(i) + " is missing");
  return *t;
}

const Initializer* const_input(const ComputeInputs& in, size_t i) {
  return i < in.constants.size() ? in.constants[i] : nullptr;
}

const ir::Tensor& required_tensor(const Node& node, const ComputeInputs& in, size_t i) {
  if (i >= in.tensors.size() || !in.tensors[i])
    fail(node, "input " + std::to_string(i) + " is missing");
  return in.tensors[i];
}

void require_f32(const Node& node, const Initializer& t, const std::string& what) {
  if (t.type.dtype != "float32")
    fail(node, what + " has dtype " + t.type.dtype + "; only float32 is supported");
}

std::vector<int64_t> to_ints(const Node& node, const Initializer& t) {
  if (t.type.dtype == "int64") return t.as<int64_t>();
  if (t.type.dtype == "int32") {
    auto v = t.as<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  fail(node, "expected an int64 or int32 tensor, got " + t.type.dtype);
}

std::vector<double> to_doubles(const Node& node, const Initializer& t) {
  return visit_dtype(node, t.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> out(static_cast<size_t>(t.type.num_elements()));
    const T* p = data_of<T>(t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
    return out;
  });
}

int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(node,
         "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// ---- host tensors -------------------------------------------------------------

Initializer make_tensor(const std::string& dtype, Shape shape) {
  Initializer t;
  t.type = {dtype, std::move(shape)};
  t.data.assign(static_cast<size_t>(t.type.num_elements()) * dtype_size(dtype), 0);
  return t;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::string onnx_dtype_name(const Node& node, int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return "float32";
    case 2: return "uint8";
    case 3: return "int8";
    case 6: return "int32";
    case 7: return "int64";
    case 9: return "bool";
    case 10: return "float16";
    case 11: return "float64";
    case 16: return "bfloat16";
    default: fail(node, "unsupported ONNX data type " + std::to_string(onnx_type));
  }
}

// ---- broadcasting -----------------------------------------------------------------

Shape broadcast_shapes(const Node& node, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (auto& s : shapes) {
    size_t lead = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& o = out[lead + d];
      if (s[d] == o || s[d] == 1) continue;
      if (o != 1) {
        std::string all;
        for (auto& x : shapes) all += (all.empty() ? "" : " and ") + shape_str(x);
        fail(node, "shapes " + all + " do not broadcast");
      }
      o = s[d];
    }
  }
  return out;
}

Shape broadcast_strides(const Node& node, const Shape& from, const Shape& to,
                        const std::string& what) {
  auto mismatch = [&] {
    fail(node, what + " of shape " + shape_str(from) + " does not broadcast to " + shape_str(to));
  };
  if (from.size() > to.size()) mismatch();
  Shape fs = strides_of(from);
  Shape out(to.size(), 0);
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[lead + i])
      out[lead + i] = from[i] == 1 ? 0 : fs[i];
    else if (from[i] != 1)
      mismatch();
  }
  return out;
}

// ---- tensor expressions -------------------------------------------------------------

Shape static_shape(const ir::Tensor& t) {
  Shape s;
  for (const ir::Expr& e : t->shape) {
    const int64_t* v = ir::as_const_int(e);
    if (!v) throw OpError("tensor '" + t->name + "' has a non-constant shape");
    s.push_back(*v);
  }
  return s;
}

std::vector<ir::Expr> shape_exprs(const Shape& s) {
  std::vector<ir::Expr> e;
  for (int64_t d : s) e.push_back(ir::Expr(d));
  return e;
}

std::vector<ir::Expr> vars_to_exprs(const std::vector<ir::Var>& v) {
  return std::vector<ir::Expr>(v.begin(), v.end());
}

ir::DataType ir_dtype(const std::string& dtype) {
  if (dtype == "bool") return ir::DataType::boolean();
  return ir::DataType::parse(dtype);
}

ir::Expr broadcast_read(const ir::Tensor& t, const std::vector<ir::Var>& out_idx) {
  Shape s = static_shape(t);
  size_t lead = out_idx.size() - s.size();
  std::vector<ir::Expr> idx;
  for (size_t d = 0; d < s.size(); ++d)
    idx.push_back(s[d] == 1 ? ir::Expr(int64_t{0}) : ir::Expr(out_idx[lead + d]));
  return ir::read(t, idx);
}

ir::Expr guarded_read(const ir::Tensor& t, std::vector<ir::Expr> idx, const Shape& bound,
                      ir::Expr fill, bool test_per_dim) {
  std::vector<ir::Expr> tests;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (bound[d] <= 0) continue;
    tests.push_back(ir::logical_and(idx[d] >= ir::Expr(int64_t{0}), idx[d] < ir::Expr(bound[d])));
    idx[d] = ir::max(ir::min(idx[d], ir::Expr(bound[d] - 1)), ir::Expr(int64_t{0}));
  }
  ir::Expr value = ir::read(t, idx);
  if (tests.empty()) return value;
  if (test_per_dim) {
    for (auto it = tests.rbegin(); it != tests.rend(); ++it) value = ir::select(*it, value, fill);
    return value;
  }
  ir::Expr inside = tests[0];
  for (size_t i = 1; i < tests.size(); ++i) inside = ir::logical_and(inside, tests[i]);
  return ir::select(inside, value, fill);
}

ir::Expr flatten_index(const std::vector<ir::Expr>& idx, const Shape& shape) {
  ir::Expr flat = ir::Expr(int64_t{0});
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * ir::Expr(shape[d]) + idx[d];
  return flat;
}

std::vector<ir::Expr> unflatten_index(const ir::Expr& flat, const Shape& shape) {
  std::vector<ir::Expr> idx(shape.size());
  Shape st = strides_of(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    ir::Expr e = flat;
    if (d > 0) e = ir::floormod(e, ir::Expr(st[d - 1]));
    idx[d] = shape[d] == 1 ? ir::Expr(int64_t{0}) : ir::floordiv(e, ir::Expr(st[d]));
  }
  return idx;
}

ir::Expr read_flat(const ir::Tensor& t, const ir::Expr& flat) {
  return ir::read(t, unflatten_index(flat, static_shape(t)));
}

ir::Expr clamp_index(const ir::Expr& e, int64_t lo, int64_t hi) {
  return ir::min(ir::max(e, ir::Expr(lo)), ir::Expr(hi));
}

namespace {
// x^e for x > 0 through the vector exp and log (ir::pow is one libm call per lane).
ir::Expr pow_positive(const ir::Expr& x, double e) {
  return ir::exp(ir::make_const(x.dtype(), e) * ir::log(x));
}
}  // namespace

ir::Expr abs_pow(const ir::Expr& v, int64_t p) {
  ir::Expr a = ir::fabs(v), r = a;
  if (p > 3) {
    ir::Expr zero = ir::make_const(a.dtype(), 0);
    return ir::select(ir::eq(a, zero), zero, pow_positive(a, static_cast<double>(p)));
  }
  for (int64_t e = 1; e < p; ++e) r = r * a;
  return r;
}

ir::Expr root_of(const ir::Expr& s, int64_t p) {
  if (p == 1) return s;
  if (p == 2) return ir::sqrt(s);
  ir::Expr zero = ir::make_const(s.dtype(), 0);
  return ir::select(ir::eq(s, zero), zero, pow_positive(s, 1.0 / static_cast<double>(p)));
}

int64_t checked_index(const Node& node, int64_t index, int64_t axis, int64_t dim) {
  if (index < -dim || index >= dim)
    fail(node,
         "index " + std::to_string(index) + " is out of range for axis " + std::to_string(axis) +
             " of size " + std::to_string(dim) +
             (dim > 0 ? " (valid: " + std::to_string(-dim) + " to " + std::to_string(dim - 1) + ")"
                      : std::string(" (no index is valid)")));
  return index < 0 ? index + dim : index;
}

void check_constant_indices(const Node& node, const Initializer* indices, int64_t axis,
                            int64_t dim) {
  if (!indices) return;
  for (int64_t i : to_ints(node, *indices)) checked_index(node, i, axis, dim);
}

ir::Expr checked_run_time_index(const ir::Expr& raw, int64_t dim) {
  ir::Expr k = ir::cast(ir::DataType::i64(), raw);
  k = ir::select(k < ir::Expr(int64_t{0}), k + ir::Expr(dim), k);
  ir::Expr in_range = ir::logical_and(k >= ir::Expr(int64_t{0}), k < ir::Expr(dim));
  // An axis of one: the simplifier folds a clamp into [0, 0] to the constant,
  // and the check inside it would go with it.
  if (dim == 1) return ir::check_index(in_range, ir::Expr(int64_t{0}));
  return clamp_index(ir::check_index(in_range, k), 0, dim - 1);
}

void check_out_type(const Node& node, const std::vector<TensorType>& out_types, size_t i,
                    const Shape& shape, const std::string& dtype) {
  if (i >= out_types.size()) fail(node, "no inferred type for output " + std::to_string(i));
  TensorType want{dtype, shape};
  if (!(out_types[i] == want))
    fail(node, "output " + std::to_string(i) + " was inferred as " + out_types[i].dtype + " " +
                   shape_str(out_types[i].shape) + " but the operator computes " + dtype + " " +
                   shape_str(shape));
}

}  // namespace kiln::graph::op_util
