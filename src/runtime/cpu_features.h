// The CPU features a package may require of the machine that loads it, by
// LLVM's names, and whether this machine has them (CPUID on x86, the
// kernel's HWCAP bits on Arm). No LLVM here: the runtime ships without it.
//
// The compiler records in mod.json the checkable features its target's code
// may use ("requires"); the runtime refuses a package whose requirements the
// host lacks, naming them, before any kernel runs (never SIGILL).
#pragma once

#include <string>
#include <vector>

namespace kiln::runtime {

// The features kiln can check on a machine of `arch` ("x86_64", "aarch64",
// "arm"), in a fixed order; empty for other architectures.
const std::vector<std::string>& checkable_cpu_features(const std::string& arch);

// This process's architecture, in the same words.
std::string host_arch();

// Whether this machine has the feature (false for one it cannot check).
bool host_has_cpu_feature(const std::string& name);

// The features of `required` this machine lacks, in order.
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required);

}  // namespace kiln::runtime
