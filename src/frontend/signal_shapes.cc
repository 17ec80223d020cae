#include "frontend/signal_shapes.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

namespace kiln::frontend {
namespace {

// The one value of a constant int32/int64 scalar input, if the context has its data.
std::optional<int64_t> constant_scalar(onnx::InferenceContext& ctx, size_t i) {
  if (i >= ctx.getNumInputs() || !ctx.getInputType(i)) return std::nullopt;
  const onnx::TensorProto* t = ctx.getInputData(i);
  if (!t) return std::nullopt;
  const bool i64 = t->data_type() == onnx::TensorProto::INT64;
  if (!i64 && t->data_type() != onnx::TensorProto::INT32) return std::nullopt;
  if (t->has_raw_data()) {
    const std::string& raw = t->raw_data();
    if (raw.size() != (i64 ? 8u : 4u)) return std::nullopt;
    int64_t v64 = 0;
    int32_t v32 = 0;
    std::memcpy(i64 ? static_cast<void*>(&v64) : static_cast<void*>(&v32), raw.data(), raw.size());
    return i64 ? v64 : v32;
  }
  if (i64 && t->int64_data_size() == 1) return t->int64_data(0);
  if (!i64 && t->int32_data_size() == 1) return t->int32_data(0);
  return std::nullopt;
}

// STFT: [batch, frames, bins, 2], frames = (length - frame_length) / frame_step + 1 and
// bins = frame_length / 2 + 1 (onesided, the default) or frame_length. Axes that
// depend on values not known at build time stay unknown (the executor runs it then).
void infer_stft(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  auto* out = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  out->clear_dim();
  const bool has_signal = onnx::hasInputShape(ctx, 0);
  const auto* signal = has_signal ? &ctx.getInputType(0)->tensor_type().shape() : nullptr;
  if (signal && signal->dim_size() != 3) fail_shape_inference("signal must have rank 3");
  auto* batch = out->add_dim();
  auto* frames = out->add_dim();
  auto* bins = out->add_dim();
  out->add_dim()->set_dim_value(2);
  if (signal && signal->dim(0).has_dim_value()) batch->set_dim_value(signal->dim(0).dim_value());
  std::optional<int64_t> frame = constant_scalar(ctx, 3);
  if (!frame && ctx.getNumInputs() > 2 && onnx::hasInputShape(ctx, 2)) {
    const auto& w = ctx.getInputType(2)->tensor_type().shape();
    if (w.dim_size() == 1 && w.dim(0).has_dim_value()) frame = w.dim(0).dim_value();
  }
  if (!frame) return;
  const bool onesided = onnx::getAttribute(ctx, "onesided", 1) != 0;
  bins->set_dim_value(onesided ? *frame / 2 + 1 : *frame);
  std::optional<int64_t> step = constant_scalar(ctx, 1);
  if (step && *step > 0 && signal && signal->dim(1).has_dim_value() &&
      signal->dim(1).dim_value() >= *frame)
    frames->set_dim_value((signal->dim(1).dim_value() - *frame) / *step + 1);
}

}  // namespace

void install_signal_shape_inference() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The registry hands out const schemas; replacing one inference function
    // of ONNX's own STFT schema is the fix that keeps every caller consistent.
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema("STFT", 17, onnx::ONNX_DOMAIN);
    if (s && s->SinceVersion() == 17)
      const_cast<onnx::OpSchema*>(s)->TypeAndShapeInferenceFunction(infer_stft);
  });
}

}  // namespace kiln::frontend
