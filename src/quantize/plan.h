// Quantization decisions (frontend::QuantPlan) from a model and the
// calibrated ranges of its activations.
//
// Quantized: Conv, MatMul and Gemm whose weight (input 1) is a float32
// initializer (Conv: rank >= 3, per channel on axis 0; MatMul: 2-D [K, N],
// axis 1; Gemm with alpha = beta = 1: B [K, N] on axis 1, or [N, K] on axis 0
// with transB = 1) and whose bias, if any, is a 1-D float32 initializer of
// one value per output channel; minus the nodes named by --keep-float. Their
// input 0 and output 0 are the activations calibration observes.
// A MatMul whose output only an Add of a constant bias vector reads (a Linear
// layer as exporters write it for activations of rank > 2) is quantized with
// that Add as one unit, as ONNX Runtime's quantizer does: the Add's output is
// the one quantized, the bias stays float, and an integer engine folds
// DQ -> MatMul -> Add(bias) -> Q into one integer product with the bias in
// its epilogue (kiln: graph/passes/fold_qdq.cc, a QLinearMatMul with an
// int32 bias at x_scale * w_scale).
// Optionally (--quantize-also) also Add (both inputs; neither a constant),
// MaxPool, AveragePool and GlobalAveragePool (input 0): their inputs and
// output quantized, so that an int8 engine can stay in int8 across residual
// adds and pooling; and MatMul of two activations (both inputs, per tensor:
// attention's Q K^T and P V, which kiln runs on batch_matmul_int8.x86).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/model_outputs.h"
#include "frontend/quant_plan.h"
#include "quantize/statistics.h"

namespace kiln::quantize {

// One Conv/MatMul/Gemm: quantizable, or why not.
struct Candidate {
  size_t index = 0;                      // node index
  std::string why_not;                   // empty: quantizable
  std::vector<std::string> activations;  // quantized inputs (input 0; both of an Add)
  std::string output, weight, bias;      // weight/bias: "" for Add and pooling
  // The tensor whose calibrated range quantizes `output`: the output itself,
  // or the output of a Relu that is its only consumer. Quantizing to that
  // range ([0, max]; the zero point 0) clips negatives exactly as the Relu
  // does, so no int8 code is spent on values the Relu drops (ONNX Runtime's
  // quantizer folds Conv -> Relu the same way).
  std::string output_range;
  int64_t weight_axis = 0;
  // A MatMul's bias Add (linear_bias_add): its node index, and `output` is
  // the Add's output. The bias itself stays a float input of the Add.
  std::optional<size_t> bias_add;
};

// The Add that makes MatMul `mm` a Linear layer with a bias: the one reader of
// mm's output (not a graph output), an Add of that output and a float32
// initializer of N values ([N] or [1, .., 1, N]; N = the weight's columns), in
// either order. Its index, or nullopt.
std::optional<size_t> linear_bias_add(const frontend::OnnxModelSummary& model, size_t mm,
                                      int64_t columns);

// The op types --quantize-also accepts: Add, AveragePool, GlobalAveragePool, MaxPool,
// MatMul (of two activations).
const std::vector<std::string>& optional_op_types();

// Every Conv/MatMul/Gemm of the model, and every node of `optional_ops`, in
// graph order, with `keep_float` applied (labels: node names, or
// OpType#INDEX). A name that is no node's is a std::invalid_argument listing
// the nearest node names; an op type not in optional_op_types() one listing
// them; a model that already holds quantized operators one naming the first.
std::vector<Candidate> find_candidates(const frontend::OnnxModelSummary& model,
                                       const std::vector<std::string>& keep_float,
                                       const std::vector<std::string>& optional_ops = {});

// The activations calibration must observe for `candidates` (inputs and
// outputs of the quantizable ones), each once, in graph order.
std::vector<std::string> observed_tensors(const std::vector<Candidate>& candidates);

// uint8 asymmetric parameters for a range (widened to contain 0; a range of
// width 0 gets scale 1).
frontend::ActivationQuant activation_quant(Range r);
// The largest |q| of an int8 weight: 127, or 64 with reduce_range (7 bits:
// [-64, 64], ONNX Runtime's symmetric reduced range).
constexpr int kWeightMax = 127;
constexpr int kReducedWeightMax = 64;

// int8 symmetric per-channel quantization of a float weight along `axis`:
// q = round_half_even(w / s) with s = max|w| / qmax per channel, q in [-qmax, qmax].
frontend::WeightQuant quantize_weight(const std::string& name, const frontend::FloatInitializer& w,
                                      int64_t axis, int qmax = kWeightMax);
// int32 bias at scale x_scale * w_scale[c].
frontend::BiasQuant quantize_bias(const std::string& name, const frontend::FloatInitializer& b,
                                  float x_scale, const std::vector<float>& w_scales);

// The plan: every quantizable candidate with its ranges from `ranges` (by
// tensor name; one missing is a std::logic_error).
// Weights quantized to [-weight_max, weight_max] (kWeightMax or kReducedWeightMax).
frontend::QuantPlan make_plan(const frontend::OnnxModelSummary& model,
                              const std::vector<Candidate>& candidates,
                              const std::map<std::string, Range>& ranges,
                              int weight_max = kWeightMax);

}  // namespace kiln::quantize
