// Internal to codegen: loop IR -> LLVM module, and the LLVM plumbing around it.
// Only forward declarations of LLVM types: no LLVM headers in codegen headers.
#pragma once

#include <memory>
#include <vector>

#include "codegen/target.h"
#include "ir/function.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen::detail {

// A TargetMachine for target (PIC, O3). Throws std::runtime_error.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target);

// Translates funcs into a verified, unoptimized module laid out for tm.
std::unique_ptr<llvm::Module> lower_to_llvm(const std::vector<ir::LoweredFunc>& funcs,
                                            const Target& target, llvm::TargetMachine& tm,
                                            llvm::LLVMContext& ctx);

// Runs the new pass manager's O3 pipeline.
void optimize_module(llvm::Module& m, llvm::TargetMachine& tm);

}  // namespace kiln::codegen::detail
