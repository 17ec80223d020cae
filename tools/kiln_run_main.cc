// kiln-run: `kiln run` without the compiler, for the machine a package is
// deployed to (a Raspberry Pi): it links only libkiln_runtime, takes the
// same options and prints the same messages.
//
//   kiln-run model.tar --inputs input.npz --output predictions.npz [--repeat N --print-time]
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/run_command.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return kiln::cli::run_run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-run: error: %s\n", e.what());
    return 1;
  }
}
