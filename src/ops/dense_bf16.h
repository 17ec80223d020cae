// dense_bf16.x86: C[M, N] (float32) = A[M, K] (float32, rounded to bfloat16 in
// the kernel) x B[K, N] (bfloat16, packed at build time), float32 accumulation.
//
// Workload params, in order: data=[M,K], weight=[K,N]; dtype "bfloat16" (the
// operands' precision: data and output stay float32 in memory, so that every
// float epilogue a graph fuses into dense_pack.x86 fuses here unchanged).
//
// Inputs: A float32 [M, K] as given, and B bfloat16 packed at build time
// (pack_dense_bf16_weight) as Bp[ceil(N / bn)][ceil(K / 2)][bn][2]: bn = the
// innermost tile_x factor, k in pairs; the two bf16 of one output column's
// pair lie together, so that one register of bn x 2 bf16 feeds bn float32
// lanes of dot2_bf16 (vdpbf16ps: 16 lanes per zmm). Columns past N and the
// k past K are zero. Output float32 [M, N].
//
// The kernel first rounds A to bf16 (nearest even, codegen's cast: the
// rounding of f32_to_bf16_value) in a stage of its own, A_bf16[M, 2 ceil(K/2)]
// (zero past an odd K), computed at root with rows in parallel: each element
// is rounded once, not once per column tile, and the register tile reads a
// pair as one 32-bit broadcast, which vdpbf16ps takes. Then
// C[m, n] = sum_{ko} dot2_bf16(0, A_bf16[m, 2ko], A_bf16[m, 2ko+1],
// Bp[n / bn, ko, n % bn, 0], Bp[.., 1]). The graph keeps float32 activations
// (no bf16 tensor in it but the packed weights).
//
// Schedule and knobs: those of dense_pack.x86 (ops/dense.h, the same
// schedule_dense_tiles) with tile_k over the ceil(K/2) pairs. Fallback:
// dense_pack's rule (the accumulators are float32: the same register tile),
// k counted in pairs; fits(): the tile's accumulators within the registers.
//
// Reference (reference_typed): A rounded to bf16 as the kernel does, products
// of the bf16 values summed in double. The kernel's products are exact in
// float32 (8-bit significands), so it differs from the reference only by its
// float32 accumulation, as dense_pack does from its own: the same rtol holds.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& dense_bf16_template();

// The workload of "dense_bf16.x86" for C[M,N] = A[M,K] B[K,N].
Workload dense_bf16_workload(int64_t M, int64_t N, int64_t K);

// B[K, N] (float32, row-major, logical) rounded to bf16 (nearest even) and
// packed for dense_bf16.x86 with column block bn; bf16 bit patterns.
std::vector<uint16_t> pack_dense_bf16_weight(const float* B_KN, int64_t K, int64_t N, int64_t bn);
// The same for a workload and config (bn = the innermost tile_x factor).
std::vector<uint16_t> pack_dense_bf16_weight(const Workload& w, const schedule::Config& cfg,
                                             const float* B_KN);

namespace detail {

// The computation of dense_bf16.x86 and dense_bf16_amx.x86 (which differ in
// their schedules): inputs A float32 [M, K] and B_packed bfloat16
// [ceil(N / bn)][ceil(K / 2)][bn][2]; A rounded to bf16 in the stage A_bf16
// (zero past an odd K), then C[M, N] by dot2_bf16 over the k pairs, the anchor.
TemplateInstance dense_bf16_compute(int64_t M, int64_t N, int64_t K, int64_t bn);

}  // namespace detail
}  // namespace kiln::ops
