// Writes a QuantPlan into an ONNX model in ONNX Runtime's QDQ format:
//  - each quantized activation X: QuantizeLinear(X, X_scale, X_zero_point)
//    -> DequantizeLinear -> the quantized node (uint8, per tensor);
//  - a quantized node's output Y: the node now writes Y_prequant, and
//    Q -> DQ gives Y back under its own name, so every consumer and a graph
//    output of that name read the dequantized value (an integer engine folds
//    DQ(x), DQ(w), DQ(b) -> Conv -> Q(y) into one QLinearConv);
//  - a MatMul with a bias Add (NodeQuant::bias_add): the Add's output is the
//    one quantized, as above, and the bias stays float: DQ(x), DQ(w) ->
//    MatMul -> Add(bias) -> Q -> DQ, ONNX Runtime's Linear layer (kiln
//    folds it into a QLinearMatMul with the bias in int32);
//  - weights: an int8 initializer W_quantized with per-channel W_scale and a
//    zero W_zero_point, read through DequantizeLinear(axis); bias: int32
//    B_quantized, B_scale = x_scale * w_scale[c], read the same way.
// Float initializers no longer used are dropped. The result passes
// onnx::checker (run before anything is written).
#pragma once

#include <string>

#include "frontend/quant_plan.h"

namespace kiln::frontend {

// The QDQ model's serialized bytes. Throws ImportError naming the file, node
// or tensor (e.g. a model below opset 13, whose DequantizeLinear has no axis).
// `source` names the model in messages (model_path when empty).
std::string qdq_model_bytes(const std::string& model_path, const QuantPlan& plan,
                            const std::string& source = "");

// The same written to `out_path` atomically (OUT.tmpPID, then renamed): on any
// error no file appears and an existing one is left as it was.
void write_qdq_model(const std::string& model_path, const QuantPlan& plan,
                     const std::string& out_path, const std::string& source = "");

}  // namespace kiln::frontend
