#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln demo [--print-ir] [--print-asm]`; returns the exit status.
int run_demo(const std::vector<std::string>& args);

}  // namespace kiln::cli
