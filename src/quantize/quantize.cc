// plan_quantization / quantize_model (quantize.h).
#include "quantize/quantize.h"

#include <cstdio>

#include "frontend/fold_batch_norm.h"
#include "frontend/model_outputs.h"
#include "frontend/onnx_import.h"
#include "frontend/qdq_writer.h"
#include "quantize/calibration_data.h"
#include "quantize/collect.h"
#include "quantize/plan.h"

namespace kiln::quantize {

QuantizeResult plan_quantization(const std::string& model_path, const QuantizeOptions& options) {
  QuantizeResult r;
  r.model_path = model_path;
  // The build's opset check first: an opset-99 model was quantized (its calibration build
  // failing, naming a temporary file) into a file no build accepts.
  frontend::check_model_opset(model_path);
  if (options.fold_batch_norm) {
    auto dir = std::make_shared<support::TempDir>("quantize");
    const std::string folded = (dir->path() / "bn_folded.onnx").string();
    r.batch_norms_folded = frontend::fold_batch_norms(model_path, folded);
    if (r.batch_norms_folded > 0) {
      r.model_path = folded;
      r.temp = dir;
    }
  }
  frontend::OnnxModelSummary model = frontend::model_summary(r.model_path);
  model.source = model_path;
  // Cheap checks first: a typo in --keep-float or a bad calibration file
  // fails before anything is built.
  const std::vector<Candidate> candidates =
      find_candidates(model, options.keep_float, options.optional_ops);
  const std::vector<CalibrationSample> samples = load_calibration(options.calibration, model);
  const std::vector<std::string> tensors = observed_tensors(candidates);
  const std::map<std::string, TensorStats> stats =
      collect_statistics(model, tensors, samples, options.method != CalibrationMethod::kMax,
                         options.target, options.choose_configs);
  std::map<std::string, Range> ranges;
  for (const auto& [name, s] : stats) {
    std::string fallback;
    ranges[name] = s.range(options.method, options.percentile, &fallback);
    if (!fallback.empty()) {
      char range[64];
      std::snprintf(range, sizeof(range), "[%g, %g]", ranges[name].min, ranges[name].max);
      r.warnings.push_back("tensor '" + name + "': " + fallback + " in the calibration data: " +
                           "--calibrate " + method_name(options.method) +
                           " has no distribution to search, so it falls back to max "
                           "calibration, " +
                           range);
    }
  }
  r.plan =
      make_plan(model, candidates, ranges, options.reduce_range ? kReducedWeightMax : kWeightMax);
  r.samples = samples.size();
  r.candidates = candidates.size();
  return r;
}

QuantizeResult quantize_model(const std::string& model_path, const std::string& out_path,
                              const QuantizeOptions& options) {
  QuantizeResult r = plan_quantization(model_path, options);
  frontend::write_qdq_model(r.model_path, r.plan, out_path, model_path);
  return r;
}

QuantizeResult quantize_to_temp(const std::string& model_path, const QuantizeOptions& options) {
  QuantizeResult r = plan_quantization(model_path, options);
  if (!r.temp) r.temp = std::make_shared<support::TempDir>("quantize");
  r.qdq_path = (r.temp->path() / "model.qdq.onnx").string();
  frontend::write_qdq_model(r.model_path, r.plan, r.qdq_path, model_path);
  return r;
}

}  // namespace kiln::quantize
