#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln build model.onnx -o model.tar [--target T] [--input-shapes S]
//  [--output-format tar|so] [--config FILE]`; returns the exit status.
int run_build(const std::vector<std::string>& args);

}  // namespace kiln::cli
