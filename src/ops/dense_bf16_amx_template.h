// dense_bf16_amx.x86: the AMX bf16 dense kernel (ops/dense_int8_amx.h,
// tdpbf16ps) as a tunable template for `kiln build --precision bf16` on
// targets whose Isa row has amx_bf16 (amx-tile and amx-bf16). It computes
// what dense_bf16.x86 computes: C[M, N] (float32) = A[M, K] (float32,
// rounded to bf16 in the kernel) x B[K, N] (bf16, packed at build time),
// float32 accumulation.
//
// Workload: params data=[M, K], weight=[K, N], dtype "bfloat16"; any K (an
// odd K is padded with a zero pair element, as dense_bf16.x86 does).
// Layouts: A float32 [M, K] as given; B bf16 packed as
// Bp[ceil(N / 16)][ceil(K / 2)][16][2] (dense_bf16.x86's packing with
// bn = 16, zero past N and K); C float32 [M, N].
// Knob: panels_per_task, as dense_int8_amx.x86's (ops/dense_int8_amx_template.h).
//
// build_loops(): A rounded to bf16 (nearest even) into a workspace
// A_bf16[M][2 ceil(K / 2)] (zero past an odd K), rows in parallel, then the
// amx_gemm tasks on it. Per pair of k the instruction adds the even product,
// then the odd one, each rounded to float32 (the emulation does the same):
// dense_bf16.x86's tolerance against the double reference holds.
#pragma once

#include <cstdint>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& dense_bf16_amx_template();

// The workload of "dense_bf16_amx.x86" for C[M,N] = A[M,K] B[K,N].
Workload dense_bf16_amx_workload(int64_t M, int64_t N, int64_t K);

}  // namespace kiln::ops
