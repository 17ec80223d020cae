// batch_matmul_int8.x86: C[b, m, n] (int32) = sum_k A[b, m, k] (uint8) x
// B[b or 0, k, n] (int8), exact. The integer core of a QLinearMatMul of two
// activations (attention's Q K^T and P V in a quantized transformer); zero
// points and requantization are the graph's (graph/passes/apply_templates.cc,
// docs/quantization.md).
//
// Workload params, in order: a=[B,M,K], b=[Bb,K,N] with Bb = B or Bb = 1 (one
// right operand broadcast over the batch); dtype "uint8" (uint8 data, int8
// right operand, int32 output).
//
// Inputs: A uint8 [B, M, K] as given, and B int8 packed by K quads at run time
// (a graph transform, since B is an activation: Pad, Reshape, Transpose) as
// Bp[Bb][ceil(N / bn)][ceil(K / 4)][bn][4], bn = the innermost tile_x factor;
// columns past N and k past K are zero, so a word that straddles K adds
// nothing whatever A holds there (A's bytes past K are selected to 0 anyway,
// reading A[.., K - 1], a valid address: as dense_int8.x86). Output int32
// [B, M, N]. The kernel computes C[b, m, n] = sum_ko dot4_u8i8(0, A[b, m,
// 4ko..4ko+3], Bp[b or 0, n / bn, ko, n % bn, 0..3]); codegen lowers dot4_u8i8
// per the target's features (codegen/dot_product.h: vpdpbusd on AVX-512
// VNNI). The sum is exact in int32 for K <= 65792 (255 * 128 * K < 2^31);
// larger K is refused.
//
// Schedule and knobs: batch_matmul.x86's over the K words: the batch and the
// outer tiles (tile_y[0] x tile_x[0]) fused and parallel, the tile loop over
// tile_y[1] x tile_x[1], a register tile of tile_y[2] rows x tile_x[2] int32
// columns (rows and the inner k unrolled, columns vectorized) accumulating
// over the words (tile_k, 2 levels, exact factors of ceil(K / 4)); tile_x
// takes exact factors of N (no partial column tile), tile_y any (a partial
// last row tile is guarded); an injective epilogue (the zero-point
// corrections and the requantization) is applied per tile while it is hot.
// Fallback: dense's rule (dense.h) on M, N and the word count with exact
// column splits, int32 lanes = the ISA's float lanes; fits(): the register
// tile's accumulators within the ISA's registers.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& batch_matmul_int8_template();

// The workload of "batch_matmul_int8.x86" for C[B,M,N] = A[B,M,K] B[Bb,K,N].
Workload batch_matmul_int8_workload(int64_t B, int64_t Bb, int64_t M, int64_t N, int64_t K);

// B[Bb, K, N] (int8, row-major) packed for batch_matmul_int8.x86 with column
// block bn: the layout the graph's run-time transform writes (for tests and
// the tuner's inputs).
std::vector<int8_t> pack_batch_matmul_int8(const int8_t* B, int64_t Bb, int64_t K, int64_t N,
                                           int64_t bn);

}  // namespace kiln::ops
