// Post-training quantization of an ONNX model (kiln quantize, kiln build
// --precision int8): calibration data -> activation statistics -> a
// QuantPlan (plan.h) -> a QDQ ONNX model (frontend/qdq_writer.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "driver/build.h"
#include "frontend/quant_plan.h"
#include "quantize/statistics.h"
#include "support/temp_files.h"

namespace kiln::quantize {

struct QuantizeOptions {
  std::string calibration;  // DATA.npz or a folder of .npz (calibration_data.h)
  CalibrationMethod method = CalibrationMethod::kMax;
  double percentile = 99.99;            // for kPercentile
  std::vector<std::string> keep_float;  // node names left in float32
  // Op types quantized besides Conv/MatMul/Gemm (plan.h optional_op_types()).
  std::vector<std::string> optional_ops;
  // Weights in 7 bits, [-64, 64] (ONNX Runtime's reduce_range): on x86 without a
  // dot instruction (AVX2, AVX-512BW without VNNI) kiln's int8 kernels then use
  // pmaddubsw, twice the multiply rate of the exact sequence (ops/int8_weight_range.h),
  // for half the weight resolution. Activations keep their 8 bits.
  bool reduce_range = false;
  // Fold Conv -> BatchNormalization pairs first (frontend/fold_batch_norm.h).
  bool fold_batch_norm = true;
  codegen::Target target = codegen::Target::host();  // of the calibration build
  // Configs for the calibration build (kiln's CLI passes the shipped logs and
  // --tuning-log's records: resnet18's build with extra outputs took 12 s on
  // fallback configs, 3.4 s with the shipped Zen 4 log). Empty: fallbacks.
  driver::ConfigChooser choose_configs;
};

struct QuantizeResult {
  frontend::QuantPlan plan;
  // The ONNX file the plan refers to: the model, or its BatchNorm-folded copy
  // in `temp` (kept alive with the result). The QDQ writer reads this one.
  std::string model_path;
  std::shared_ptr<support::TempDir> temp;
  int batch_norms_folded = 0;
  size_t samples = 0;
  size_t candidates = 0;  // Conv/MatMul/Gemm (and --quantize-also) nodes in the model
  std::string qdq_path;   // quantize_to_temp's QDQ model (in `temp`)
  // One line per tensor whose calibration fell back to max (a degenerate histogram:
  // statistics.h), naming it; the callers print them as warnings.
  std::vector<std::string> warnings;
};

// Checks --keep-float first (before any calibration run), then calibrates
// and decides. Throws std::runtime_error / std::invalid_argument naming the
// file, node or tensor at fault.
QuantizeResult plan_quantization(const std::string& model_path, const QuantizeOptions& options);

// plan_quantization, then the QDQ model at `out_path` (atomically).
QuantizeResult quantize_model(const std::string& model_path, const std::string& out_path,
                              const QuantizeOptions& options);

// plan_quantization, then the same QDQ model in a private temporary folder
// (qdq_path, removed with the last copy of `temp`): what `kiln build
// --precision int8` and kiln.build(precision="int8") build, so that both
// make exactly kiln quantize's decisions.
QuantizeResult quantize_to_temp(const std::string& model_path, const QuantizeOptions& options);

}  // namespace kiln::quantize
