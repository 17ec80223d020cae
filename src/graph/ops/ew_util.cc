#include "graph/ops/ew_util.h"

#include <algorithm>

namespace kiln::graph::ew {

void fail(const Node& node, const std::string& msg) {
  throw OpError("node '" + node.name + "' (" + node.op_type + "): " + msg);
}

int64_t attr_int(const Node& node, const std::string& key, int64_t def) {
  return node.attr<int64_t>(key).value_or(def);
}

float attr_float(const Node& node, const std::string& key, float def) {
  return node.attr<float>(key).value_or(def);
}

std::string attr_str(const Node& node, const std::string& key, const std::string& def) {
  return node.attr<std::string>(key).value_or(def);
}

std::optional<std::vector<int64_t>> attr_ints(const Node& node, const std::string& key) {
  return node.attr<std::vector<int64_t>>(key);
}

const Initializer* opt_input(const std::vector<const Initializer*>& inputs, size_t i) {
  return i < inputs.size() ? inputs[i] : nullptr;
}

const Initializer& req_input(const Node& node, const std::vector<const Initializer*>& inputs,
                             size_t i) {
  const Initializer* t = opt_input(inputs, i);
  if (!t) fail(node, "input " + std::to_string(i) + " is missing");
  return *t;
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
    const T* p = ptr<T>(t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
    return out;
  });
}

const Initializer* const_input(const ComputeInputs& in, size_t i) {
  return i < in.constants.size() ? in.constants[i] : nullptr;
}

int64_t norm_axis(const Node& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(node, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Initializer make_host(const std::string& dtype, Shape shape) {
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
    case 11: return "float64";
    default: fail(node, "unsupported ONNX data type " + std::to_string(onnx_type));
  }
}

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

std::vector<ir::Expr> shape_exprs(const Shape& s) {
  std::vector<ir::Expr> e;
  for (int64_t d : s) e.push_back(ir::Expr(d));
  return e;
}

Shape static_shape(const ir::Tensor& t) {
  Shape s;
  for (auto& e : t->shape) {
    const int64_t* v = ir::as_const_int(e);
    if (!v) throw OpError("tensor '" + t->name + "' has a non-constant shape");
    s.push_back(*v);
  }
  return s;
}

ir::Expr read_broadcast(const ir::Tensor& t, const std::vector<ir::Var>& out_idx) {
  Shape s = static_shape(t);
  size_t lead = out_idx.size() - s.size();
  std::vector<ir::Expr> idx;
  for (size_t d = 0; d < s.size(); ++d)
    idx.push_back(s[d] == 1 ? ir::Expr(int64_t{0}) : ir::Expr(out_idx[lead + d]));
  return ir::read(t, idx);
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

ir::DataType ir_dtype(const std::string& dtype) {
  if (dtype == "bool") return ir::DataType::boolean();
  return ir::DataType::parse(dtype);
}

const ir::Tensor& req_tensor(const Node& node, const ComputeInputs& in, size_t i) {
  if (i >= in.tensors.size() || !in.tensors[i])
    fail(node, "input " + std::to_string(i) + " is missing");
  return in.tensors[i];
}

std::vector<ir::Expr> vars_to_exprs(const std::vector<ir::Var>& v) {
  return std::vector<ir::Expr>(v.begin(), v.end());
}

ir::Expr clamp_index(const ir::Expr& e, int64_t lo, int64_t hi) {
  return ir::min(ir::max(e, ir::Expr(lo)), ir::Expr(hi));
}

}  // namespace kiln::graph::ew
