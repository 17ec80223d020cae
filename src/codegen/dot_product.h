// Internal to codegen: the lowering of ir::Intrinsic::DotU8I8 (the 4-way
// u8 x s8 dot product accumulate) to the instructions the Target has.
// Only forward declarations of LLVM types: no LLVM headers in codegen headers.
#pragma once

#include <string>

#include "codegen/target.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::detail {

// r[i] = acc[i] + sum_{j<4} zext(a[4i+j]) * sext(b[4i+j]), wrapping in int32.
// acc: i32 or <N x i32>; b: <4N x i8>; a: <4N x i8>, or <4 x i8> when a_splat
// (the same four bytes for every lane, the broadcast input of a GEMM or conv
// tile). Returns acc's type. Lanes are taken in chunks of the widest
// instruction the target has (features, never the host), the rest generic:
//   x86 avx512vnni (+avx512f)         vpdpbusd zmm, 16 lanes
//   x86 avxvnni or avx512vnni+vl      vpdpbusd ymm / xmm, 8 / 4 lanes
//   x86 avx512bw / avx2 / ssse3       vpmaddubsw + vpmaddwd, 16 / 8 / 4 lanes, exact
//       for every input: a = lo + 128 hi with lo = a & 0x7f and hi = a >> 7, so
//       that pmaddubsw's int16 pair sums cannot saturate (|lo0 b0 + lo1 b1| <=
//       2 * 127 * 128 = 32512, |hi0 b0 + hi1 b1| <= 256); pmaddwd with 1 and 128
//       widens and weights them: sum = pmaddwd(x, 1) + pmaddwd(y, 128).
//   aarch64 i8mm                      usdot (u8 x s8), 4 lanes
//   aarch64 dotprod                   sdot (s8 x s8) on a ^ 0x80 = a - 128, plus
//       the exact correction 128 * sum(b) = -sdot(0, splat(-128), b)
//   otherwise                         widen to int32, multiply, add the four
//       products of each lane (LLVM picks pmaddwd or whatever the target has).
llvm::Value* emit_dot4_u8i8(llvm::IRBuilderBase& b, const Target& target, llvm::Value* acc,
                            llvm::Value* a, bool a_splat, llvm::Value* bytes_b);

// The lowering emit_dot4_u8i8 uses for a full vector of `lanes` int32 lanes on
// target: "vpdpbusd.512", "vpdpbusd.256", "vpdpbusd.128", "pmaddubsw.512",
// "pmaddubsw.256", "pmaddubsw.128", "usdot", "sdot" or "generic" (tests and
// debugging).
std::string dot4_u8i8_lowering(const Target& target, int lanes);

}  // namespace kiln::codegen::detail
