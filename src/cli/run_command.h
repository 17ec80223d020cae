#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln run model.tar --inputs input.npz [--output predictions.npz]
//  [--repeat N] [--print-time] [--profile]`; returns the exit status
// (2 for a usage error). Errors about the package or the inputs are thrown
// as std::exception with one message naming the file and tensor.
int run_run(const std::vector<std::string>& args);

extern const char* const kRunUsage;

}  // namespace kiln::cli
