// `kiln demo`: the core compiler end to end on two hand-scheduled kernels
// (driver/kernel_demo.h).
#include "cli/demo.h"

#include <cstdio>
#include <iostream>

#include "codegen/target.h"
#include "driver/kernel_demo.h"
#include "runtime/c_runtime_api.h"

namespace kiln::cli {

int run_demo(const std::vector<std::string>& args) {
  bool print_ir = false, print_asm = false;
  for (auto& a : args) {
    if (a == "--print-ir")
      print_ir = true;
    else if (a == "--print-asm")
      print_asm = true;
    else {
      std::cerr << "kiln demo: unknown option '" << a << "'\n";
      return 2;
    }
  }
  codegen::Target target = codegen::Target::host();
  std::printf("kiln demo: target %s -mcpu=%s (%d-bit vectors), %d threads\n", target.triple.c_str(),
              target.cpu.c_str(), target.vector_bits(), kiln_get_num_threads());
  bool ok = driver::run_kernel_demo(target, print_ir, print_asm);
  std::printf(ok ? "kiln demo: all kernels match the reference\n" : "kiln demo: MISMATCH\n");
  return ok ? 0 : 1;
}

}  // namespace kiln::cli
