// Internal to codegen: kiln's own vector math (exp, log, tanh, erf, sigmoid)
// built with IRBuilder, so that vector code stays vector instead of becoming
// one libm call per lane. Accurate to ~1e-6 relative on float32.
// Only forward declarations of LLVM types: no LLVM headers in codegen headers.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::detail {

// x is float or <N x float>. Each returns the same type.
llvm::Value* emit_exp_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_log_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tanh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_sigmoid_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_erf_f32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::codegen::detail
