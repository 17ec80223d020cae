// dense_int8_amx.x86: C[M, N] (int32) = A[M, K] (uint8) x B[K, N] (int8) on
// Intel AMX (tdpbusd), exact, for targets with amx-int8 (Sapphire Rapids).
//
// The template dense_int8_amx.x86 (ops/dense_int8_amx_template.h) builds
// its kernel from dense_int8_amx_loops(): the schedule language has no
// tensorize primitive that could turn dense_int8.x86's loop nest into tile
// instructions, so the loops are written here directly as loop IR around the
// ir::amx_gemm statement (ir/expr.h), lowered by codegen/amx.cc: the outer
// loop over tasks of amx_panels_per_task(M) (or the template's knob) panels
// of 16 rows is parallel; each task's call
// configures the tiles once (ldtilecfg; once more for a partial last panel),
// walks every panel, 16-column block pair and 64-byte K step, and releases them.
// On a target without AMX the same loops run with the tiles emulated in
// memory (bit-exact: the dot products use dot4_u8i8's lowering), which is how
// this kernel's indexing is tested on machines without AMX.
//
// Inputs: A uint8 [M, K] row-major, K a multiple of 4 (tile rows hold whole
// 4-byte groups; the caller keeps dense_int8.x86 for other K), and B int8
// packed by pack_dense_int8_amx_weight: dense_int8.x86's packing with bn = 16,
// Bp[ceil(N / 16)][K / 4][16][4], which per 16-column block is the "VNNI"
// layout tdpbusd reads (K/4 rows of 64 bytes), zero past N. Output int32 [M, N].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/function.h"
#include "ops/op_template.h"

namespace kiln::ops {

// Columns per block of the packed weight (a tile row of int32: 64 bytes).
constexpr int64_t kAmxBlockCols = 16;

// Panels of 16 rows per parallel task (one tile configuration each) for M rows.
int64_t amx_panels_per_task(int64_t M);

// Whether dense_int8_amx can take C[M,N] = A[M,K] B[K,N] (K % 4 == 0,
// K within dense_int8.x86's exact range).
bool dense_int8_amx_supports(int64_t M, int64_t N, int64_t K);

// B[K, N] (int8, row-major) packed for the kernel.
std::vector<int8_t> pack_dense_int8_amx_weight(const int8_t* B_KN, int64_t K, int64_t N);

// The kernel `name(A, B_packed, C)`; throws std::invalid_argument for shapes
// dense_int8_amx_supports() refuses.
ir::LoweredFunc dense_int8_amx_kernel(const std::string& name, int64_t M, int64_t N, int64_t K);

// The kernel's loops on given buffers (A, B_packed, C as above, flat), tasks
// of `panels_per_task` panels of 16 rows: what the dense_int8_amx.x86
// template builds (its knob). Throws as dense_int8_amx_kernel.
// With an epilogue (OpTemplate::TaskEpilogue) C is not written: each task
// runs the epilogue on its rows (ops/amx_task_output.h).
ir::Stmt dense_int8_amx_loops(const ir::Buffer& A, const ir::Buffer& B_packed, const ir::Buffer& C,
                              int64_t M, int64_t N, int64_t K, int64_t panels_per_task,
                              const OpTemplate::TaskEpilogue& epilogue = nullptr);

// The AMX templates' knob panels_per_task for M rows: 1, 2, 4, ... up to the
// panels M has, at most 32 (beyond 512 rows per configuration nothing is
// left to save: one ldtilecfg already feeds thousands of tile instructions);
// and their fallback, the largest of those within amx_panels_per_task(M).
std::vector<int64_t> amx_panel_choices(int64_t M);
int64_t amx_fallback_panels(int64_t M);

// The bf16 loops on given buffers: A_bf16 [M, K] bf16, B_packed
// [ceil(N / 16)][K / 2][16][2] bf16, C float32 [M, N]; K even.
ir::Stmt dense_bf16_amx_loops(const ir::Buffer& A_bf16, const ir::Buffer& B_packed,
                              const ir::Buffer& C, int64_t M, int64_t N, int64_t K,
                              int64_t panels_per_task,
                              const OpTemplate::TaskEpilogue& epilogue = nullptr);

// The bf16 variant (tdpbf16ps, amx-bf16): C float32 [M, N] = A bfloat16 [M, K]
// x B bfloat16 [K, N], K even, B packed as Bp[ceil(N / 16)][K / 2][16][2]
// (pack_dense_bf16_amx_weight, bf16 bit patterns). Per pair of k the even
// product is added first, then the odd one, each rounded to float32 (the
// instruction's order; it also flushes denormals, the emulation does not).
std::vector<uint16_t> pack_dense_bf16_amx_weight(const uint16_t* B_KN, int64_t K, int64_t N);
ir::LoweredFunc dense_bf16_amx_kernel(const std::string& name, int64_t M, int64_t N, int64_t K);

}  // namespace kiln::ops
