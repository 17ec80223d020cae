// Internal to codegen: one-time LLVM setup shared by the codegen sources.
// No LLVM headers here (the include dirs exist only for codegen's .cc files).
#pragma once

namespace kiln::codegen::detail {

// Registers the native target, asm printer and parser; thread-safe, idempotent.
void initialize_llvm();

}  // namespace kiln::codegen::detail
