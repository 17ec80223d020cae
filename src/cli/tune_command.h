#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln tune MODEL.onnx [...] --tuning-log DB [--trials N] [--tuner T] ...`;
// returns the exit status (0: the run finished within its budget).
int run_tune(const std::vector<std::string>& args);

}  // namespace kiln::cli
