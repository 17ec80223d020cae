#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln quantize MODEL.onnx -o OUT.onnx --calibration DATA [--calibrate
//  max|percentile|kl] [--percentile P] [--keep-float NODE...]`: writes the
// quantized model in ONNX Runtime's QDQ format; returns the exit status.
int run_quantize(const std::vector<std::string>& args);

}  // namespace kiln::cli
