// Internal to codegen: the lowering of ir::Intrinsic::AmxGemm (ir/expr.h,
// amx_gemm()) to Intel AMX tile instructions (tdpbusd, tdpbf16ps), and the
// same loops with the tiles emulated in memory for targets without AMX.
// The tile plan and the 64-byte tile configuration are plain data, LLVM-free,
// so that tests check them against an independent computation.
//
// The kernel for `rows` rows, all N columns:
//   ldtilecfg (once per call for its full panels of 16 rows, once more for a
//              partial last panel: the configuration is per thread, and each
//              parallel task's thread must load its own)
//   for each panel of 16 rows, for each pair of 16-column blocks (one block
//   for an odd last one):
//     tilezero C0, C1
//     for each 64-byte step of K: tileloadd A; tileloadd B0; tdp C0 += A B0;
//                                  tileloadd B1; tdp C1 += A B1
//     the K tail (K * elem bytes not a multiple of 64) the same, on tail tiles
//     tilestored C0, C1 to C (a partial last block through a stack buffer)
//   tilerelease (once)
// Tiles (palette 1): tmm0, tmm1 C (rows x 64 B); tmm2 A (rows x 64 B); tmm3,
// tmm4 B (16 x 64 B); tmm5 A's K tail (rows x t B); tmm6, tmm7 B's K tail
// (t/4 x 64 B); t = (K * elem bytes) % 64. Configured once, for all 8.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "codegen/target.h"
#include "ir/expr.h"

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::codegen::detail {

struct AmxTileShape {
  int rows = 0;   // 0: unused
  int colsb = 0;  // bytes per row
};

enum AmxTileReg : int {
  kAmxC0 = 0,
  kAmxC1 = 1,
  kAmxA = 2,
  kAmxB0 = 3,
  kAmxB1 = 4,
  kAmxATail = 5,
  kAmxBTail0 = 6,
  kAmxBTail1 = 7,
};

// One panel's shape (rows <= 16) and the tiles it uses.
struct AmxPlan {
  ir::AmxOp op = ir::AmxOp::DpbusdU8I8;
  int rows = 0;
  int64_t n = 0, k = 0, lda = 0, ldc = 0;  // in elements
  int elem_bytes = 1;                      // of A and B: 1 (u8/s8) or 2 (bf16)
  int group = 4;                           // k per 4-byte group: 4 (u8/s8) or 2 (bf16)
  int64_t k_steps = 0;                     // full 64-byte steps of a row of A
  int tail_bytes = 0;                      // bytes of A's row after them (multiple of 4)
  int64_t n_blocks = 0;                    // ceil(N / 16)
  int64_t k_groups = 0;                    // K / group: rows of one packed B block
  std::array<AmxTileShape, 8> tiles{};
};

// Throws std::invalid_argument as ir::amx_gemm does for shapes that do not fit.
AmxPlan amx_plan(ir::AmxOp op, int rows, int64_t n, int64_t k, int64_t lda, int64_t ldc);

// The 64-byte operand of ldtilecfg: byte 0 palette (1), byte 1 start_row (0),
// bytes 16 + 2i (uint16, little endian) colsb of tile i, byte 48 + i rows of
// tile i; every other byte 0.
std::array<uint8_t, 64> amx_tile_config(const AmxPlan& plan);

// "amx" when the target has the tile instructions for op (amx-tile plus
// amx-int8 or amx-bf16), else "emulated"; always "emulated" under
// KILN_DEBUG_AMX_EMULATE=1 (running an AMX target's build where there is no AMX).
std::string amx_gemm_lowering(const Target& target, ir::AmxOp op);

// Emits amx_gemm at b's insertion point: C[rows, N] for any rows, the full
// panels of 16 rows under one configuration (one ldtilecfg), a partial last
// panel under its own, one tilerelease at the end. c, a, bp: pointers to the
// first element of C, A and packed B.
void emit_amx_gemm(llvm::IRBuilderBase& b, const Target& target, ir::AmxOp op, int64_t rows,
                   int64_t n, int64_t k, int64_t lda, int64_t ldc, llvm::Value* c, llvm::Value* a,
                   llvm::Value* bp);

}  // namespace kiln::codegen::detail
