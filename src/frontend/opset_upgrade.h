// Brings a model written at an opset older than kiln's oldest (kMinOpset) up
// to it with ONNX's own version converter (onnx/version_converter), before
// anything else looks at the model. ONNX's model zoo and older exporters
// write opsets 7 to 10; each of the converter's adapters rewrites one
// operator between two neighbouring opsets with the same meaning (Upsample to
// Resize, BatchNormalization losing `spatial`, Dropout losing `is_test`, ...).
#pragma once

#include <onnx/onnx_pb.h>

namespace kiln::frontend {

// The model's default-domain opset version, or 0 when it imports none.
int64_t model_default_opset(const onnx::ModelProto& model);

// Converts `model` in place to opset `target` when its default-domain opset
// is older; returns the opset it had. Throws ImportError naming the operator
// the converter could not bring up (an adapter ONNX does not have, or an
// attribute the newer opset cannot express).
int64_t upgrade_opset(onnx::ModelProto* model, int64_t target);

}  // namespace kiln::frontend
