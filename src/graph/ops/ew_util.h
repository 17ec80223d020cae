// Shared helpers for the elementwise and shape operator families: node
// attributes with ONNX defaults, typed views of host tensors, a dtype
// dispatcher for evaluate(), numpy broadcasting on the host and in tensor
// expressions, and row-major index arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "ir/tensor.h"

namespace kiln::graph::ew {

using Shape = std::vector<int64_t>;

// Throws OpError "node 'name' (Op): msg".
[[noreturn]] void fail(const Node& node, const std::string& msg);

// ---- attributes -------------------------------------------------------------

int64_t attr_int(const Node& node, const std::string& key, int64_t def);
float attr_float(const Node& node, const std::string& key, float def);
std::string attr_str(const Node& node, const std::string& key, const std::string& def);
// nullopt when absent.
std::optional<std::vector<int64_t>> attr_ints(const Node& node, const std::string& key);

// ---- inputs -----------------------------------------------------------------

// inputs[i], or nullptr when i is past the end or the input is omitted.
const Initializer* opt_input(const std::vector<const Initializer*>& inputs, size_t i);
// inputs[i]; OpError naming the node when it is missing.
const Initializer& req_input(const Node& node, const std::vector<const Initializer*>& inputs,
                             size_t i);
// The elements of an int64 or int32 tensor as int64 (shapes, axes, pads, ...).
std::vector<int64_t> to_ints(const Node& node, const Initializer& t);
// The elements of a numeric tensor converted to double (Clip bounds, scales, ...).
std::vector<double> to_doubles(const Node& node, const Initializer& t);
// The constant value of compute input i (a graph constant), or nullptr.
const Initializer* const_input(const ComputeInputs& in, size_t i);
// Normalizes a possibly negative axis into [0, rank); OpError when out of range.
int64_t norm_axis(const Node& node, int64_t axis, int64_t rank);

// ---- host tensors -------------------------------------------------------------

Initializer make_host(const std::string& dtype, Shape shape);
int64_t numel(const Shape& s);
// Row-major strides (in elements).
Shape strides_of(const Shape& s);

template <typename T>
const T* ptr(const Initializer& t) {
  return reinterpret_cast<const T*>(t.data.data());
}
template <typename T>
T* ptr(Initializer& t) {
  return reinterpret_cast<T*>(t.data.data());
}

// The dtype name of T; bool is stored as one byte holding 0 or 1.
template <typename T>
const char* dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else
    return detail::dtype_name_of<T>();
}

// Calls f(T{}) with the C++ element type of `dtype` (bool for "bool").
template <typename F>
decltype(auto) visit_dtype(const Node& node, const std::string& dtype, F&& f) {
  if (dtype == "float32") return f(float{});
  if (dtype == "int64") return f(int64_t{});
  if (dtype == "int32") return f(int32_t{});
  if (dtype == "bool") return f(bool{});
  if (dtype == "float64") return f(double{});
  if (dtype == "int8") return f(int8_t{});
  if (dtype == "uint8") return f(uint8_t{});
  fail(node, "unsupported dtype " + dtype);
}

// ONNX TensorProto.DataType enum -> kiln dtype name; OpError for the others.
std::string onnx_dtype_name(const Node& node, int64_t onnx_type);

// ---- broadcasting -----------------------------------------------------------------

// numpy multidirectional broadcast of all shapes; OpError when incompatible.
Shape broadcast_shapes(const Node& node, const std::vector<Shape>& shapes);

// Calls f(o, offsets) for every flat output index o of `out` in order, where
// offsets[k] is the flat index of the element of input k (shape ins[k],
// broadcast to `out`) that output element o reads.
template <typename F>
void for_each_broadcast(const Shape& out, const std::vector<Shape>& ins, F&& f) {
  size_t rank = out.size(), n_in = ins.size();
  // bstride[k][d]: step of input k's offset when output axis d advances.
  std::vector<Shape> bstride(n_in, Shape(rank, 0));
  for (size_t k = 0; k < n_in; ++k) {
    Shape st = strides_of(ins[k]);
    size_t lead = rank - ins[k].size();
    for (size_t d = 0; d < ins[k].size(); ++d) bstride[k][lead + d] = ins[k][d] == 1 ? 0 : st[d];
  }
  int64_t total = numel(out);
  Shape idx(rank, 0);
  std::vector<int64_t> offs(n_in, 0);
  for (int64_t o = 0; o < total; ++o) {
    f(o, offs);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < n_in; ++k) offs[k] += bstride[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < n_in; ++k) offs[k] -= bstride[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

// ---- tensor expressions -------------------------------------------------------------

std::vector<ir::Expr> shape_exprs(const Shape& s);
// Reads t at the output index `out_idx` with numpy broadcasting (t's rank <= the output's).
ir::Expr read_broadcast(const ir::Tensor& t, const std::vector<ir::Var>& out_idx);
// The constant shape of a tensor (all kiln tensors have constant shapes).
Shape static_shape(const ir::Tensor& t);
// Row-major flat index of `idx` in `shape`, and its inverse.
ir::Expr flatten_index(const std::vector<ir::Expr>& idx, const Shape& shape);
std::vector<ir::Expr> unflatten_index(const ir::Expr& flat, const Shape& shape);
// Reads t (any shape) at the row-major flat position `flat`.
ir::Expr read_flat(const ir::Tensor& t, const ir::Expr& flat);
// ir::DataType of a kiln dtype name.
ir::DataType ir_dtype(const std::string& dtype);
// The one TE tensor input i; OpError when it is missing.
const ir::Tensor& req_tensor(const Node& node, const ComputeInputs& in, size_t i);
std::vector<ir::Expr> vars_to_exprs(const std::vector<ir::Var>& v);
// Clamps integer expression e into [lo, hi] (keeps data-dependent reads in bounds).
ir::Expr clamp_index(const ir::Expr& e, int64_t lo, int64_t hi);

}  // namespace kiln::graph::ew
