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
//   x86 avx512bw / avx2 / ssse3       vpmaddwd on the bytes widened to int16 pairs,
//       16 / 8 / 4 lanes, exact for every input: with the 4 bytes of a lane as
//       the int16 words (x0 | x1 << 8), (x2 | x3 << 8), the even bytes are
//       (a & 0xff, (b << 8) >>s 8) and the odd ones (a >>u 8, b >>s 8), and
//       sum = pmaddwd(a_even, b_even) + pmaddwd(a_odd, b_odd). Two multiplies per
//       vector (pmaddubsw + pmaddwd needs four: its int16 pair sums saturate at
//       2 * 255 * 128, so the u8 operand must be split in two 7-bit halves).
//       The widening of a splat `a` is shared by all vectors that use it, that
//       of `b` by all rows of a register tile; together with the two products
//       that is 2 * (vectors of b) + 4 registers beside the accumulators
//       (ops/int8_registers.h budgets them).
//   x86 avx512bw / avx2 / ssse3 with b_narrow (ir::Intrinsic::DotU8I8NarrowB: every
//       byte of b in [-64, 64]) and no dot instruction: pmaddwd(pmaddubsw(a, b), 1),
//       16 / 8 / 4 lanes, ONNX Runtime's MLAS sequence on AVX2: the bytes as they
//       are, no widening of either operand, 32 products per two multiplies (twice
//       the rate of the exact sequence above). pmaddubsw's int16 pair sums
//       a0 b0 + a1 b1 saturate at +-32767; with |b| <= 64 they are within
//       2 * 255 * 64 = 32640, so the sequence is exact under that promise (a b
//       outside it gives a saturated, wrong sum). Beside the accumulators it holds
//       the broadcast input, the ones, a product and the weight vectors (reused by
//       every row of the tile): weight vectors + 3 registers.
//   aarch64 i8mm                      usdot (u8 x s8), 4 lanes
//   aarch64 dotprod                   sdot (s8 x s8) on a ^ 0x80 = a - 128, plus
//       the exact correction 128 * sum(b) = -sdot(0, splat(-128), b)
//   otherwise                         widen to int32, multiply, add the four
//       products of each lane (LLVM picks pmaddwd or whatever the target has).
// b_narrow: the caller promises every byte of b in [-64, 64] (DotU8I8NarrowB); it
// changes the lowering only on x86 without a dot instruction (see above).
llvm::Value* emit_dot4_u8i8(llvm::IRBuilderBase& b, const Target& target, llvm::Value* acc,
                            llvm::Value* a, bool a_splat, llvm::Value* bytes_b,
                            bool b_narrow = false);

// The lowering emit_dot4_u8i8 uses for a full vector of `lanes` int32 lanes on
// target: "vpdpbusd.512", "vpdpbusd.256", "vpdpbusd.128", "pmaddwd.512",
// "pmaddwd.256", "pmaddwd.128", "pmaddubsw.512", "pmaddubsw.256",
// "pmaddubsw.128" (b_narrow only), "usdot", "sdot" or "generic" (tests and
// debugging).
std::string dot4_u8i8_lowering(const Target& target, int lanes, bool b_narrow = false);

// r[i] = acc[i] + a[2i] b[2i] + a[2i+1] b[2i+1], wrapping in int32 (ir::Intrinsic::DotI16):
// a and b <2N x i16>, acc i32 or <N x i32>. Chunks of the widest instruction the
// target has (features, never the host):
//   x86 avx512vnni (+avx512f)            vpdpwssd zmm, 16 lanes
//   x86 avxvnni or avx512vnni+vl         vpdpwssd ymm / xmm, 8 / 4 lanes
//   x86 avx512bw / avx2 / sse2           pmaddwd + vpaddd, 16 / 8 / 4 lanes
//   otherwise                            widen to int32, multiply, add the pairs
//       (aarch64: LLVM's smull, uzp and adds).
llvm::Value* emit_dot2_i16(llvm::IRBuilderBase& b, const Target& target, llvm::Value* acc,
                           llvm::Value* a, llvm::Value* bb);

// The lowering emit_dot2_i16 uses for a full vector of `lanes` int32 lanes on
// target: "vpdpwssd.512", "vpdpwssd.256", "vpdpwssd.128", "pmaddwd.512",
// "pmaddwd.256", "pmaddwd.128" or "generic".
std::string dot2_i16_lowering(const Target& target, int lanes);

}  // namespace kiln::codegen::detail
