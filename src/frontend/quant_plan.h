// The quantization decisions for one ONNX model: which nodes run quantized
// and with which scales and zero points. src/quantize computes them (from
// calibration statistics and the float weights) and this one struct is what
// both consumers read: the QDQ writer (frontend/qdq_writer.h) and, through
// the QDQ file it writes, `kiln build --precision int8`.
//
// Semantics are ONNX's: QuantizeLinear y = saturate(round_half_even(x / scale)
// + zp), DequantizeLinear x = (y - zp) * scale (README, "Quantization (int8)").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln::frontend {

// A float activation tensor quantized to uint8, asymmetric: its calibrated
// range [min, max] always contains 0, scale = (max - min) / 255, zero point =
// round(-min / scale) clamped to [0, 255].
struct ActivationQuant {
  float min = 0, max = 0;  // the range chosen by calibration (before widening to 0)
  float scale = 1;
  uint8_t zero_point = 0;
};

// A float weight initializer stored as int8, symmetric (zero point 0), one
// scale per output channel along `axis` (0 for Conv weights, 1 for MatMul's
// and Gemm's B [K, N], 0 for Gemm's B with transB=1).
struct WeightQuant {
  std::string tensor;  // the float initializer it replaces
  int64_t axis = 0;
  std::vector<int64_t> shape;
  std::vector<int8_t> data;   // round_half_even(w / scale[c]) clamped to [-127, 127]
  std::vector<float> scales;  // max|w[c]| / 127 (1/127 for an all-zero channel)
};

// A float bias initializer stored as int32 with scale x_scale * w_scale[c]
// and zero point 0, so that it adds straight onto the int32 accumulator.
struct BiasQuant {
  std::string tensor;
  std::vector<int32_t> data;  // saturated to int32
  std::vector<float> scales;
};

// One quantized node: a Conv, MatMul or Gemm (with a weight), or an Add or
// pooling node (activations only).
struct NodeQuant {
  size_t index = 0;   // position in the ONNX graph's node list
  std::string label;  // node name, or "OpType#INDEX" when it has none
  std::string op_type;
  // Inputs read through QuantizeLinear -> DequantizeLinear (input 0: X or A;
  // both inputs of an Add).
  std::vector<std::string> activations;
  std::string output;  // its output, also quantized (an int8 engine writes it as uint8)
  // A MatMul quantized together with the Add of its float bias vector that
  // reads its output (ONNX Runtime's unit for a Linear layer): that Add's
  // index. `output` is then the Add's output, the MatMul's stays float and
  // the bias stays a float input of the Add.
  std::optional<size_t> bias_add;
  std::optional<WeightQuant> weight;  // input 1 (W or B) of a Conv, MatMul or Gemm
  std::optional<BiasQuant> bias;      // input 2 of a Conv or Gemm, when present
};

struct QuantPlan {
  // Every quantized activation tensor (node inputs and outputs), by name.
  std::map<std::string, ActivationQuant> activations;
  std::vector<NodeQuant> nodes;  // graph order
  // Candidate nodes left in float32, label -> why (--keep-float, a
  // weight that is not a float initializer, an unsupported Gemm form, ...).
  std::map<std::string, std::string> kept_float;
};

}  // namespace kiln::frontend
