// Helpers shared by every operator family under src/graph/ops/ (elementwise,
// shape, reduction, neural-network, layout and template operators): node
// attributes with ONNX defaults, required and optional inputs, axis
// normalization, typed views of host tensors, a dtype dispatcher for
// evaluate(), numpy broadcasting on the host and in tensor expressions, and
// row-major index arithmetic. Every error they raise is an OpError in ONE
// format, "node '<name>' (<op type>): <problem>", so that a user always sees
// which node failed, what operator it is and why.
//
// The sliding-window arithmetic of convolution and pooling lives in window.h.
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

namespace kiln::graph::op_util {

using Shape = std::vector<int64_t>;

// ---- errors -------------------------------------------------------------------

// "node '<name>' (<op type>): <problem>": the one format of operator errors.
std::string node_error(const Node& node, const std::string& problem);
// An error raised inside the node's evaluate/compute, for callers that name
// the node: node_error(node, what), or `what` itself when it already starts
// with that node's prefix (so that the node is named once, not twice).
std::string node_error_once(const Node& node, const std::string& what);
// Throws OpError(node_error(node, problem)).
[[noreturn]] void fail(const Node& node, const std::string& problem);

// ---- attributes -------------------------------------------------------------

// The attribute's value, or `dflt` when the node does not carry it.
int64_t attr_int(const Node& node, const std::string& key, int64_t dflt);
float attr_float(const Node& node, const std::string& key, float dflt);
std::string attr_string(const Node& node, const std::string& key, const std::string& dflt);
std::vector<int64_t> attr_ints(const Node& node, const std::string& key, std::vector<int64_t> dflt);
// Without a default: nullopt when absent (for attributes whose absence means
// something other than any one value, e.g. Transpose's perm).
std::optional<std::vector<int64_t>> attr_ints(const Node& node, const std::string& key);

// ---- inputs -----------------------------------------------------------------

// inputs[i], or nullptr when i is past the end or the input is omitted.
const Initializer* optional_input(const std::vector<const Initializer*>& inputs, size_t i);
// inputs[i]; OpError naming the node when it is missing.
const Initializer& required_input(const Node& node, const std::vector<const Initializer*>& inputs,
                                  size_t i);
// The constant value of compute input i (a graph constant), or nullptr.
const Initializer* const_input(const ComputeInputs& in, size_t i);
// The TE tensor of compute input i; OpError when it is missing.
const ir::Tensor& required_tensor(const Node& node, const ComputeInputs& in, size_t i);
// OpError unless t has dtype float32; `what` names the input ("X", "W", ...).
void require_f32(const Node& node, const Initializer& t, const std::string& what);
// The elements of an int64 or int32 tensor as int64 (shapes, axes, pads, ...).
std::vector<int64_t> to_ints(const Node& node, const Initializer& t);
// The elements of a numeric tensor converted to double (Clip bounds, scales, ...).
std::vector<double> to_doubles(const Node& node, const Initializer& t);

// Normalizes an axis in [-rank, rank) into [0, rank); OpError otherwise.
int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank);

// ---- host tensors -------------------------------------------------------------

// A zero-filled host tensor.
Initializer make_tensor(const std::string& dtype, Shape shape);
int64_t numel(const Shape& s);
// Row-major strides (in elements).
Shape strides_of(const Shape& s);

template <typename T>
const T* data_of(const Initializer& t) {
  return reinterpret_cast<const T*>(t.data.data());
}
template <typename T>
T* data_of(Initializer& t) {
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

// Unidirectional broadcast of `from` against the right-aligned `to` (every
// dim of `from` is 1 or equal to the matching dim of `to`). Returns the
// strides that read `from` with an index of `to` (0 along broadcast dims), or
// throws OpError naming the input `what`.
Shape broadcast_strides(const Node& node, const Shape& from, const Shape& to,
                        const std::string& what);

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

// The constant shape of a TE tensor (all kiln tensors have constant shapes).
Shape static_shape(const ir::Tensor& t);
std::vector<ir::Expr> shape_exprs(const Shape& s);
std::vector<ir::Expr> vars_to_exprs(const std::vector<ir::Var>& v);
// ir::DataType of a kiln dtype name.
ir::DataType ir_dtype(const std::string& dtype);

// Reads t at the output index `out_idx` with numpy broadcasting (t's rank <=
// the output's): broadcast dims read index 0, missing leading dims are dropped.
ir::Expr broadcast_read(const ir::Tensor& t, const std::vector<ir::Var>& out_idx);
// t[idx] where every idx[d] with bound[d] > 0 is checked against [0, bound[d]):
// out-of-range reads give `fill` (the load itself is clamped into range so
// that the unselected read stays in bounds). One select on the conjunction of
// the tests, or with test_per_dim one select per dim, the outermost dim's
// outside: a row's test and a column's test then stand alone, and
// unswitching (schedule/unswitch_selects.h) resolves the row's in the row
// loop and the column's in the column loop (a pool over NCHW[b]c, whose
// lanes are vectorized under the column loop); a conjunction reads both.
ir::Expr guarded_read(const ir::Tensor& t, std::vector<ir::Expr> idx, const Shape& bound,
                      ir::Expr fill, bool test_per_dim = false);
// Row-major flat index of `idx` in `shape`, and its inverse.
ir::Expr flatten_index(const std::vector<ir::Expr>& idx, const Shape& shape);
std::vector<ir::Expr> unflatten_index(const ir::Expr& flat, const Shape& shape);
// Reads t (any shape) at the row-major flat position `flat`.
ir::Expr read_flat(const ir::Tensor& t, const ir::Expr& flat);
// Clamps integer expression e into [lo, hi] (keeps data-dependent reads in bounds).
ir::Expr clamp_index(const ir::Expr& e, int64_t lo, int64_t hi);

// The two halves of an Lp norm with a positive integer p (GlobalLpPool,
// LpPool): |v|^p, by multiplication for p <= 3 (exact, and 0 stays 0), else
// through the vector exp and log (0 gives 0); and s^(1/p) of a sum s >= 0
// (s itself for p = 1, sqrt for p = 2; 0 gives 0).
ir::Expr abs_pow(const ir::Expr& v, int64_t p);
ir::Expr root_of(const ir::Expr& s, int64_t p);

// Indices of the indexing operators (Gather, GatherElements, GatherND,
// ScatterElements, ScatterND): ONNX takes an index into an axis of size n
// in [-n, n), a negative one counting from the end, and makes any other an
// error.
//
// A host index (a constant, or the reference's): made non-negative, or an
// OpError naming the node, the index, the axis and its size.
int64_t checked_index(const Node& node, int64_t index, int64_t axis, int64_t dim);
// The same for every element of a constant index tensor (nothing where
// `indices` is null: the indices are read at run time).
void check_constant_indices(const Node& node, const Initializer* indices, int64_t axis,
                            int64_t dim);
// An index read at run time (`raw`, any integer dtype) into an axis of size
// dim: wrapped once if negative, then checked (ir::Intrinsic::CheckIndex:
// outside [0, dim) the kernel fails the run with KILN_STATUS_INDEX_OUT_OF_RANGE)
// and clamped into [0, dim), so that the read stays in bounds in any case.
// The result is int64.
ir::Expr checked_run_time_index(const ir::Expr& raw, int64_t dim);

// OpError unless out_types[i] has `shape` and `dtype` (the graph's inferred
// type must agree with the operator's own arithmetic).
void check_out_type(const Node& node, const std::vector<TensorType>& out_types, size_t i,
                    const Shape& shape, const std::string& dtype);

}  // namespace kiln::graph::op_util
