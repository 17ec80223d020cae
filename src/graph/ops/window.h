// The sliding-window arithmetic of convolution and pooling (strides,
// dilations, pads, auto_pad, ceil_mode) with ONNX's output size rules, shared
// by Conv / ConvTranspose (nn.cc) and MaxPool / AveragePool (reduce.cc).
// Errors follow op_util.h's format.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace kiln::graph::op_util {

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

// 1-D windows (Conv1d, pools on [N, C, L]) as 2-D ones on [N, C, 1, L]: the
// new leading spatial dim takes kernel 1, stride 1, dilation 1 and no pads.
// Rewrites the node's kernel_shape, strides, dilations, pads,
// output_padding and output_shape (graph/passes/lift_1d_windows.h lifts
// whole regions with it).
void lift_1d_window_attrs(Node& node);

// The reference evaluation of a 1-D window op through its 2-D one: the data
// input (and, `weighted`, the weight input 1) gain the unit dim, the outputs
// lose it. Other ranks go to `eval_2d` as they are.
EvaluateFn evaluate_1d_as_2d(EvaluateFn eval_2d, bool weighted);

}  // namespace kiln::graph::op_util
