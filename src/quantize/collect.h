// Running the float model over calibration data to gather per-tensor
// statistics (statistics.h), fast: the model is rewritten with every observed
// tensor as an extra graph output (frontend::write_model_with_outputs), built
// by kiln's own driver into a temporary package (with the caller's configs,
// e.g. the shipped logs, else fallbacks), and run
// by the runtime's GraphExecutor once per sample and pass. Observed tensors
// that are graph inputs are read from the samples directly.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "driver/build.h"
#include "frontend/model_outputs.h"
#include "quantize/calibration_data.h"
#include "quantize/statistics.h"

namespace kiln::quantize {

// Statistics for `tensors` over `samples`; histograms (a second pass) only
// when `histograms`. Errors name the model, the sample or the tensor.
std::map<std::string, TensorStats> collect_statistics(
    const frontend::OnnxModelSummary& model, const std::vector<std::string>& tensors,
    const std::vector<CalibrationSample>& samples, bool histograms,
    const codegen::Target& target = codegen::Target::host(),
    const driver::ConfigChooser& choose_configs = {});

}  // namespace kiln::quantize
