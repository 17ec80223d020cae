// Internal to codegen: kiln's own vector math (exp, log, tanh, erf, sigmoid,
// the trigonometric and hyperbolic functions and their inverses) built with
// IRBuilder, so that vector code stays vector instead of becoming one libm
// call per lane. Accurate to ~1e-6 relative on float32 (sin, cos and tan to a
// few ulp).
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

// sin, cos and tan reduce x by multiples of pi/2 in float32 with a three-part
// pi/2 and fused multiply-adds, exact enough only for |x| < kTrigReduceLimitF32;
// the caller computes lanes at or above it (finite) another way (libm per lane,
// codegen_llvm.cc). Infinities and NaN give NaN here.
constexpr float kTrigReduceLimitF32 = 71476.0625f;
llvm::Value* emit_sin_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_cos_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_tan_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_asin_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_acos_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_atan_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_sinh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_cosh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_asinh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_acosh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* emit_atanh_f32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::codegen::detail
