// `kiln demo`'s kernels: a dense and a conv kernel scheduled by hand,
// lowered, JIT-compiled, checked against the reference and timed, the dense
// one also loaded as a shared library through the runtime.
#pragma once

#include "codegen/target.h"

namespace kiln::driver {

// Prints one line per kernel (error, ms, GFLOP/s) and, if asked, the dense
// kernel's loop IR and assembly. True when every kernel matches the reference.
bool run_kernel_demo(const codegen::Target& target, bool print_ir, bool print_asm);

}  // namespace kiln::driver
