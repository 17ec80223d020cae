// Internal to codegen: the lowering of ir::Intrinsic::DotBF16 (the bf16 pair
// dot product accumulate) to the instructions the Target has.
// Only forward declarations of LLVM types: no LLVM headers in codegen headers.
#pragma once

#include <string>

#include "codegen/target.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::detail {

// r[i] = (acc[i] + a[2i+1] b[2i+1]) + a[2i] b[2i] in float32, a and b bfloat16
// bit patterns (<2N x i16>), acc float or <N x float>. Lanes are taken in chunks
// of the widest instruction the target has (its features, never the host's):
//   x86 avx512bf16           vdpbf16ps zmm, 16 lanes
//   x86 avx512bf16 + vl      vdpbf16ps ymm / xmm, 8 / 4 lanes
//   otherwise                widen each bf16 to float32 (shift left 16) and two
//                            fmas per lane, odd element first: the products are
//                            exact in float32, so this is the instruction's
//                            arithmetic bit for bit (except its flushing of
//                            denormals).
// AMX (tdpbf16ps) is not used: an amx-bf16 target without avx512bf16 gets the
// generic lowering.
llvm::Value* emit_dot2_bf16(llvm::IRBuilderBase& b, const Target& target, llvm::Value* acc,
                            llvm::Value* a, llvm::Value* bb);

// The lowering emit_dot2_bf16 uses for a full vector of `lanes` float lanes on
// target: "vdpbf16ps.512", "vdpbf16ps.256", "vdpbf16ps.128" or "generic".
std::string dot2_bf16_lowering(const Target& target, int lanes);

}  // namespace kiln::codegen::detail
