// batch_matmul_int8_amx.x86: batch_matmul_int8.x86's product (C[b, m, n]
// int32 = sum_k A[b, m, k] uint8 x B[b or 0, k, n] int8, exact) on Intel AMX
// tiles (tdpbusd), for targets whose Isa row has amx_int8 (amx-tile and
// amx-int8: Sapphire Rapids and later). The integer core of a QLinearMatMul
// of two activations (attention's Q K^T and P V); the zero-point corrections
// and the requantization are the graph's (apply_templates.cc), fused after
// the kernel on its int32 result exactly as for batch_matmul_int8.x86.
//
// Workload params (batch_matmul_int8.x86's): a=[B,M,K], b=[Bb,K,N], Bb = B
// or 1 (one right operand broadcast over the batch); dtype "uint8"; K a
// multiple of 4 (a tile row holds whole 4-byte groups: the strategy row
// leaves other K on batch_matmul_int8.x86) and at most 65792 (the int32
// sum's bound).
// Layouts: A uint8 [B, M, K] as given; B int8 [Bb, ceil(N / 16), K / 4, 16,
// 4], zero past N: batch_matmul_int8.x86's run-time packing with bn = 16,
// which per batch is exactly ir::amx_gemm's B layout (dense_int8.x86's
// packing with bn = 16). B is an activation, so that packing is the graph's
// run-time transform (Pad, Reshape, Transpose) that batch_matmul_int8.x86
// already gets; the kernel reads it in place, batch b at offset
// b * ceil(N / 16) * K * 16. Output int32 [B, M, N].
//
// Kernel (build_loops; no schedule produces tile instructions): one parallel
// loop over tasks, each (batch, 16 * panels_per_task rows of it) one
// amx_gemm (the last row task of a batch shorter when M is not a multiple).
// Tasks never straddle batches: each batch has its own B.
//
// Knob: panels_per_task (1, 2, 4, ... up to M's panels, at most 32; the AMX
// dense templates' choices). Fallback: the largest of them that leaves at
// least 16 tasks in all (B times the tasks per batch) when B * panels has
// 16, else 1 (attention has many batches of few panels: the batch already
// gives the threads work).
#pragma once

#include <cstdint>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& batch_matmul_int8_amx_template();

// The workload of "batch_matmul_int8_amx.x86" for C[B,M,N] = A[B,M,K] B[Bb,K,N].
Workload batch_matmul_int8_amx_workload(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K);

// Whether the template takes these sizes (positive, K % 4 == 0, K within the
// int32 bound, Bb 1 or B).
bool batch_matmul_int8_amx_supports(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K);

}  // namespace kiln::ops
