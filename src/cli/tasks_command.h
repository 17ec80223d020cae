#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln tasks model.onnx [more.onnx ...] [--input-shapes S] [--tuning-log DB]`:
// prints the distinct template workloads (tuning tasks) of the models with
// their counts, GFLOP per call and share of the estimated latency. Returns
// the exit status (2 for a usage error).
int run_tasks(const std::vector<std::string>& args);

}  // namespace kiln::cli
