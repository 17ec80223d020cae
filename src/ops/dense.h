// Dense (matrix multiply) templates: C[M, N] = A[M, K] * B[K, N].
//
// Registered templates (see op_template.h), workload params in order:
// data=[M,K], weight=[K,N]; float32.
//
// dense_pack.x86: inputs A [M, K] and B packed as Bp[ceil(N / bn), K, bn]
// (bn = the innermost tile_x factor; columns past N are zero) so that the bn
// output columns of a register tile load one contiguous vector per k. The
// pack is done at build time by the caller with pack_weight(). Output [M, N].
//
// dense_nopack.x86: inputs A [M, K] and B [K, N] as given; output [M, N].
//
// Schedule (both, the shape of TVM's dense_pack): C's outer tiles
// (tile_y[0] x tile_x[0]) fused and parallel; inside a task the register
// tiles walk rows then columns (tile_order 0) or columns then rows (1: one
// packed column panel stays hot in cache); a register tile of
// tile_y[2] x tile_x[2] accumulates over k in registers, rows and the inner k
// unrolled, columns vectorized; an epilogue output is applied per tile.
// Knobs: tile_y (3 levels over M, innermost <= 16; divisors, powers of two and
// every count up to 8, a partial last row tile is guarded and versioned),
// tile_x (3 levels over N, innermost <= 64; dense_pack: divisors and powers of
// two, since the zero-padded packed B keeps a partial column tile's reads in
// bounds; dense_nopack: exact factors of N), tile_k (2 levels, exact factors of
// K, inner <= 32), tile_order (0/1).
//
// Fallback rule, for the target's ISA row (L float32 lanes, R vector
// registers: AVX-512 16 and 32, AVX2 8 and 16), also used by batch_matmul.x86:
//   bn = tile_x[2] = the first of 2L, 3L, 5L/2, 3L/2, L that divides N
//        (AVX-512: 32, 48, 40, 24, 16), else (dense_pack) 2L if N >= 2L, L if
//        N >= L, else N; (exact column splits) the largest divisor of N <= 4L;
//   rows = tile_y[2] = M if M <= cap, else the largest divisor of M <= cap if it
//        is >= cap / 2, else cap, where cap = min(8, (3R/4) / ceil(bn / L)) keeps
//        the accumulators in registers (AVX-512 bn 32: 8 rows x 2 zmm; AVX2 bn 16:
//        6 rows x 2 ymm);
//   tile_x[1] = 1 if M = 1 (GEMV: many column tasks), else (bn | N) the largest
//        divisor p of N / bn with p * bn <= 256, or (bn does not divide N) the
//        largest power of two p with p * bn <= min(N, 256); tile_y[1] =
//        row_tiles_per_task(M, rows, min(M, 64) / rows) (below: equal parallel
//        tasks; a task covers <= 64 x 256 of C);
//   tile_k[1] = the largest divisor of K <= 16 if M = 1 (many loads in flight),
//        else <= 4;
//   tile_order = 1;
//   dense_pack.x86 with weights over 2 MiB and more than one row tile: the
//   blocked fallback instead (dense_blocked_fallback_knobs, below).
//
// k_block (0, 128, 256, 512; absent in older records: 0): the reduction in
// blocks of about that many k steps (dense_k_block). A task's accumulators
// then live in a buffer of tile_y[1] x tile_y[2] x tile_x[1] x tile_x[2]
// floats (on the stack: at most 256 KiB, else fits() is false), k's blocks
// run outside the register tiles, and the tasks are fused columns first
// (schedule_dense_blocked). ViT-B/16's 197 x 768 x 3072 layers as AVX2 code:
// 18-20 % faster than the unblocked fallback, which streamed each packed
// panel (K x 16 floats) from L2 or L3 for every row tile.
#pragma once

#include "ops/kernel.h"
#include "ops/op_template.h"
#include "schedule/config_space.h"

namespace kiln::ops {

const OpTemplate& dense_pack_template();
const OpTemplate& dense_nopack_template();

struct DenseWorkload {
  int64_t M, N, K;
};

// The workload of template "dense_pack.x86" / "dense_nopack.x86" for C[M,N] = A[M,K] B[K,N].
Workload dense_workload(const std::string& template_name, const DenseWorkload& d);

// B[K, N] (row-major, logical) packed for dense_pack.x86 under cfg.
std::vector<float> pack_weight(const Workload& w, const schedule::Config& cfg, const float* B_KN);

// Legacy entry points (kernels with output = C), kept for bench and demo:
// the same compute and schedule with spaces of a chosen split policy and no size limits.
schedule::ConfigSpace dense_nopack_space(const DenseWorkload& w, schedule::SplitPolicy policy);
Kernel dense_nopack(const DenseWorkload& w, const schedule::Config& cfg);
schedule::ConfigSpace dense_pack_space(const DenseWorkload& w, schedule::SplitPolicy policy);
// pack_in_kernel: B [K, N] is the argument and the pack a stage of the kernel;
// else Bp is the argument.
Kernel dense_pack(const DenseWorkload& w, const schedule::Config& cfg, bool pack_in_kernel);
int64_t dense_pack_block(const schedule::Config& cfg);

// Host-side packing of a row-major B[K, N] into Bp[ceil(N/bn), K, bn] (zero fill).
std::vector<float> pack_dense_weight(const float* B, int64_t K, int64_t N, int64_t bn);

namespace detail {
// Row tiles per parallel task for M rows in tiles of `rows`: the count in
// [cap / 4, cap] (a divisor of M or a power of two, as tile_y's split allows)
// whose tasks leave the fewest slots empty (the larger on a tie), so that a
// static split of the tasks over threads gives equal work.
int64_t row_tiles_per_task(int64_t M, int64_t rows, int64_t cap);
// Adds the fallback values of tile_y, tile_x, tile_k (rule above) to knobs.
// exact_columns: tile_x is an exact-factor split (dense_nopack, batch_matmul).
void dense_fallback_knobs(int64_t M, int64_t N, int64_t K, bool exact_columns, const Isa& isa,
                          KnobValues& knobs);
// The fallback register tile: rows (tile_y[2]) and columns (tile_x[2]) by
// the rule above.
struct DenseTile {
  int64_t rows, cols;
};
DenseTile dense_fallback_tile(int64_t M, int64_t N, bool exact_columns, const Isa& isa);
// The reduction block of dense_pack.x86's blocked fallback, in k steps, and
// the weight size from which it blocks (twice a 1 MiB L2).
inline constexpr int64_t kFallbackKBlock = 256;
inline constexpr int64_t kBlockedWeightBytes = 2 << 20;
// dense_pack.x86's blocked fallback (k_block, schedule_dense_blocked): the
// register tile above, tasks of min(8, row tiles) row tiles by up to 128
// columns, tile_k[1] the largest divisor of K <= 4, tile_order 0 (within a
// block a row tile walks the task's panels), k_block 256. Returns false
// (adding nothing) where it does not apply: one row tile (M <= rows), weights
// of at most kBlockedWeightBytes, or no multiple of tile_k[1] in [64, 256]
// dividing K with K above it.
bool dense_blocked_fallback_knobs(int64_t M, int64_t N, int64_t K, const Isa& isa,
                                  KnobValues& knobs);
// Whether a rows x cols register tile of accumulators (cols vectorized)
// fits the ISA's vector registers: the fits() of dense and batch_matmul.
inline bool dense_tile_fits(int64_t rows, int64_t cols, const Isa& isa) {
  return rows * ((cols + isa.lanes() - 1) / isa.lanes()) <= isa.vector_registers;
}
// The register-tile size limits of the dense and batch_matmul spaces.
inline constexpr int64_t kMaxTileRows = 16, kMaxTileCols = 64, kMaxTileK = 32;
// The k steps of one reduction block under knob k_block (a multiple of
// tile_k[1] dividing K, at most k_block), or 0: no blocking (no such knob,
// 0, or one block would be all of K).
int64_t dense_k_block(const schedule::Config& cfg, int64_t K);
// The dense schedule of tile_y, tile_x, tile_k and tile_order: out's outer
// tiles fused and parallel, the register tile computed at out's tile loop
// (dense_pack, dense_int8).
void schedule_dense_tiles(const TileStages& st, const schedule::Config& cfg);
// dense_pack.x86's space and fallback over k_steps reduction steps: K itself,
// or K's 4-byte words (dense_int8), or K's pairs (dense_bf16). The packed
// templates share them so that a config means the same register tile in each.
schedule::ConfigSpace packed_dense_space(int64_t M, int64_t N, int64_t k_steps);
schedule::Config packed_dense_fallback(int64_t M, int64_t N, int64_t k_steps, const Isa& isa);
}  // namespace detail

}  // namespace kiln::ops
