// Helpers shared by the reduction and neural-network operator families
// (reduce.cc, nn.cc): typed attribute access with ONNX defaults, host tensor
// access for the evaluate functions, the window arithmetic of convolution and
// pooling (strides, dilations, pads, auto_pad, ceil_mode), and the few tensor
// expression building blocks their computes share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "ir/tensor.h"

namespace kiln::graph::nn {

// ---- errors and attributes ---------------------------------------------------

// OpError "<op_type> node '<name>': <what>".
[[noreturn]] void fail(const Node& node, const std::string& what);

int64_t attr_int(const Node& node, const std::string& key, int64_t dflt);
float attr_float(const Node& node, const std::string& key, float dflt);
std::string attr_string(const Node& node, const std::string& key, const std::string& dflt);
std::vector<int64_t> attr_ints(const Node& node, const std::string& key,
                               std::vector<int64_t> dflt = {});

// axis in [-rank, rank) -> [0, rank); OpError otherwise.
int64_t normalize_axis(const Node& node, int64_t axis, int64_t rank);

// Node input i when it is present (not omitted), else nullptr.
const Initializer* optional_input(const std::vector<const Initializer*>& inputs, size_t i);
// Node input i; OpError when it is missing.
const Initializer& required_input(const Node& node, const std::vector<const Initializer*>& inputs,
                                  size_t i);
// OpError unless t has dtype float32.
void require_f32(const Node& node, const Initializer& t, const std::string& what);

// ---- host tensors ----------------------------------------------------------------

Initializer make_tensor(const std::string& dtype, std::vector<int64_t> shape);

template <typename T>
const T* data_of(const Initializer& t) {
  return reinterpret_cast<const T*>(t.data.data());
}
template <typename T>
T* data_of(Initializer& t) {
  return reinterpret_cast<T*>(t.data.data());
}

// Row-major strides of a shape (in elements).
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape);

// Numpy broadcasting of `from` against the right-aligned `to` (unidirectional:
// every dim of `from` is 1 or equal to the matching dim of `to`). Returns the
// strides to read `from` with an index of `to` (0 along broadcast dims), or
// throws OpError naming `what`.
std::vector<int64_t> broadcast_strides(const Node& node, const std::vector<int64_t>& from,
                                       const std::vector<int64_t>& to, const std::string& what);

// ---- window arithmetic ---------------------------------------------------------

// One sliding window per spatial dim: output o covers input positions
// o * stride - pad_begin + k * dilation for k in [0, kernel).
struct Window {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
  size_t rank() const { return in.size(); }
  int64_t extent(size_t d) const { return (kernel[d] - 1) * dilation[d] + 1; }
  // First input position of output o along dim d (may be negative: padding).
  int64_t start(size_t d, int64_t o) const { return o * stride[d] - pad_begin[d]; }
  // Whether some window reads along dim d leave [0, in) (then reads need a guard).
  bool leaves_input(size_t d) const {
    return pad_begin[d] > 0 || start(d, out[d] - 1) + extent(d) > in[d];
  }
};

// Conv's window: strides, dilations, pads and auto_pad (NOTSET / SAME_UPPER /
// SAME_LOWER / VALID) with ONNX's output size rules; `kernel` from the weight.
Window conv_window(const Node& node, const std::vector<int64_t>& in_spatial,
                   const std::vector<int64_t>& kernel);

// MaxPool's / AveragePool's window: kernel_shape, strides, pads, dilations,
// auto_pad and ceil_mode. With ceil_mode, a window that would start in the
// right padding is dropped (ONNX >= 1.16 wording, and PyTorch); the last kept
// window may still run past the padded input.
Window pool_window(const Node& node, const std::vector<int64_t>& in_spatial);

// ConvTranspose's geometry per spatial dim: output o receives input i through
// kernel tap k when o + pad_begin == i * stride + k * dilation.
struct TransposeWindow {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, out;
  size_t rank() const { return in.size(); }
};
TransposeWindow conv_transpose_window(const Node& node, const std::vector<int64_t>& in_spatial,
                                      const std::vector<int64_t>& kernel);

// ---- tensor expressions ------------------------------------------------------------

// The constant shape of a TE tensor.
std::vector<int64_t> static_shape(const ir::Tensor& t);
std::vector<ir::Expr> shape_exprs(const std::vector<int64_t>& shape);

// t[idx] where every idx[d] with bound[d] > 0 is checked against [0, bound[d]):
// out-of-range reads give `fill` (the load itself is clamped into range so
// that the unselected read stays in bounds).
ir::Expr guarded_read(const ir::Tensor& t, std::vector<ir::Expr> idx,
                      const std::vector<int64_t>& bound, ir::Expr fill);

// Reads `t` (shape `from`) at an index `idx` of the broadcast shape `to`:
// broadcast dims read index 0, missing leading dims are dropped.
ir::Expr broadcast_read(const ir::Tensor& t, const std::vector<int64_t>& from,
                        const std::vector<ir::Var>& idx);

// OpError unless out_types[i] has `shape` and `dtype` (the graph's inferred
// type must agree with the operator's own arithmetic).
void check_out_type(const Node& node, const std::vector<TensorType>& out_types, size_t i,
                    const std::vector<int64_t>& shape, const std::string& dtype);

// The input TE tensor at i; OpError when it is missing.
const ir::Tensor& required_tensor(const Node& node, const ComputeInputs& in, size_t i);

}  // namespace kiln::graph::nn
