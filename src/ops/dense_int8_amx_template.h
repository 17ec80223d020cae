// dense_int8_amx.x86: the AMX dense kernel (ops/dense_int8_amx.h, tdpbusd)
// as a tunable template, for targets whose Isa row has amx_int8 (amx-tile
// and amx-int8: Sapphire Rapids and later). It computes what dense_int8.x86
// computes, C[M, N] (int32) = A[M, K] (uint8) x B[K, N] (int8), exactly.
//
// Workload: params data=[M, K], weight=[K, N], dtype "uint8"; K a multiple of
// 4 (a tile row holds whole 4-byte groups; the strategy row leaves other K on
// dense_int8.x86) and at most 65792 (the int32 sum's bound).
// Layouts: A [M, K] row-major; B packed as Bp[ceil(N / 16)][K / 4][16][4]
// (dense_int8.x86's packing with bn = 16, zero past N); C [M, N].
// Knob: panels_per_task, the 16-row panels of one parallel task (one tile
// configuration, ldtilecfg, per task): 1, 2, 4, ... up to the panels M has
// (at most 32). Fallback: the largest of them within amx_panels_per_task(M)
// (at least 16 tasks once M has 16 panels). Every config fits every ISA row:
// tiles are not vector registers.
//
// Its kernel is not a schedule of compute(): builds_own_loops() is true and
// build_loops() writes the ir::amx_gemm loops (tiles emulated in memory on a
// target without AMX, bit-exact). compute() is the same dot4_u8i8 reduction
// as dense_int8.x86's (what fused epilogues and the interpreter read), and
// schedule() a plain row-parallel schedule of it, used by nothing that
// generates this template's code.
#pragma once

#include <cstdint>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& dense_int8_amx_template();

// The workload of "dense_int8_amx.x86" for C[M,N] = A[M,K] B[K,N].
Workload dense_int8_amx_workload(int64_t M, int64_t N, int64_t K);

}  // namespace kiln::ops
