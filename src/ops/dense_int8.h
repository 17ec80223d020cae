// dense_int8.x86: C[M, N] (int32) = A[M, K] (uint8) x B[K, N] (int8), exact.
//
// Workload params, in order: data=[M,K], weight=[K,N], optionally
// weight_range=[7] (every weight within [-64, 64]: the dot is pmaddubsw +
// pmaddwd on x86 without VNNI, ops/int8_weight_range.h; the tuner draws its
// random weights from that range); dtype "uint8" (uint8
// data, int8 weights, int32 output: ONNX's MatMulInteger / the integer core of
// QLinearMatMul; zero points and requantization are the graph's epilogue).
//
// Inputs: A uint8 [M, K] as given, and B int8 packed at build time
// (pack_dense_int8_weight) as Bp[ceil(N / bn)][ceil(K / 4)][bn][4]:
// bn = the innermost tile_x factor, k in words of 4 bytes; the 4 bytes of one
// output column's word lie together, so that one register of bn x 4 bytes
// feeds bn int32 lanes of dot4_u8i8 (vpdpbusd: 16 lanes per zmm). Columns
// past N and k past K are zero: a partial column tile reads in bounds. For K
// not a multiple of 4 the last word's data bytes past K are 0 (selected; the
// load reads A[m, K - 1], a valid address), so they add nothing whatever the
// weight buffer holds there; such a word is assembled from byte loads (the
// generic path of the data operand), full words are one 4-byte load.
// Output int32 [M, N].
//
// The kernel computes C[m, n] = sum_{ko} dot4_u8i8(0, A[m, 4ko..4ko+3],
// Bp[n / bn, ko, n % bn, 0..3]); codegen lowers dot4_u8i8 per the target's
// features (codegen/dot_product.h). The sum is exact in int32 for K <= 65792
// (255 * 128 * K < 2^31); larger K is refused.
//
// Schedule and knobs: those of dense_pack.x86 (ops/dense.h), with tile_k over
// the ceil(K/4) words: C's outer tiles fused and parallel, a register tile of
// tile_y[2] rows x tile_x[2] int32 columns (rows and inner k unrolled,
// columns vectorized) accumulating over k words; an injective epilogue
// (bias, requantization to uint8/int8) is applied per tile while it is hot.
// Fallback: dense_pack's rule with the ISA's int32 lanes (= float lanes) and
// k counted in words, its rows within the int8 accumulator budget
// (ops/int8_registers.h: fewer on AVX2, where the dot is a sequence); fits():
// the tile's accumulators within the registers that lowering leaves.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& dense_int8_template();

// The workload of "dense_int8.x86" for C[M,N] = A[M,K] B[K,N].
// narrow_weights appends weight_range=[7] (the caller has checked every weight).
Workload dense_int8_workload(int64_t M, int64_t N, int64_t K, bool narrow_weights = false);

// B[K, N] (int8, row-major, logical) packed for dense_int8.x86 under cfg.
std::vector<int8_t> pack_dense_int8_weight(const Workload& w, const schedule::Config& cfg,
                                           const int8_t* B_KN);
// The same for an explicit column block bn.
std::vector<int8_t> pack_dense_int8_weight(const int8_t* B_KN, int64_t K, int64_t N, int64_t bn);

}  // namespace kiln::ops
