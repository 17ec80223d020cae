// Pooling with ceil_mode whose last window would start in the right padding.
// Private to src/frontend.
//
// PyTorch drops such a window (a window must start inside the input or its
// left padding), and so do ONNX's operator definition since ONNX 1.16 and
// kiln's operators (graph/ops/window.cc pool_window). Debian 12's ONNX 1.12
// shape inference still counts it, so a PyTorch export of, say, MaxPool2d(2,
// stride 2, padding 1, ceil_mode=True) on an odd axis failed at build time:
// the operator's result had one row fewer than the graph's value_info.
#pragma once

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::frontend {

// For every MaxPool, and AveragePool with count_include_pad 0, with ceil_mode 1
// and explicit pads whose input has an inferred static shape: where the last
// window of an axis would start in the right padding, lowers that axis's end
// pad just enough that ONNX 1.12's output size is the newer one. The result is
// unchanged: padding and clipped taps are both ignored by these operators.
// Returns whether a node changed (shape inference must then run again).
// AveragePool with count_include_pad 1 (whose divisor counts the end padding)
// is left as it is; its build then fails naming the node.
bool drop_pool_windows_starting_in_padding(onnx::ModelProto* model);

}  // namespace kiln::frontend
