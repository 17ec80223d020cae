#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln target [--target T]`: the Target kiln derives kernels from (the
// host's, or T's) and its ISA class; returns the exit status.
int run_target(const std::vector<std::string>& args);

}  // namespace kiln::cli
