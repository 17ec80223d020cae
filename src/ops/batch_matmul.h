// batch_matmul.x86 (registered, see op_template.h): c[b] = a[b] * w[b or 0].
//
// Workload params, in order: a=[B,M,K], b=[Bb,K,N] with Bb = B or Bb = 1 (one
// weight broadcast over the batch); float32. Inputs a [B, M, K] and b [Bb, K, N]
// as given; output [B, M, N]. Used for attention (Q K^T, P V) and for MatMul of
// a 3-D by a 2-D tensor.
//
// Schedule (dense_nopack's per batch): the batch and the outer tiles
// (tile_y[0] x tile_x[0]) fused and parallel; then the tile loop over
// tile_y[1] x tile_x[1]; a register tile of tile_y[2] x tile_x[2] accumulates
// over k (rows and the inner k unrolled, columns vectorized); an epilogue
// output is applied per tile.
// Knobs: tile_y (3 levels over M, innermost <= 16; divisors, powers of two and
// every count up to 8, a partial last row tile is guarded), tile_x (3 levels,
// divisors and powers of two of N, innermost <= 64: a partial column tile
// runs predicated vectors), tile_k (2 levels, exact factors of K, inner <= 32).
// Fallback rule: dense's rule (dense.h) on M, N, K.
#pragma once

#include "ops/op_template.h"

namespace kiln::ops {

const OpTemplate& batch_matmul_template();

namespace detail {
// batch_matmul.x86's space, fallback and schedule over k_steps reduction
// steps (K, or K's 4-byte words for batch_matmul_int8.x86): the batched
// templates share them so that a config means the same loop nest in each.
// exact_columns: column tiles divide N (batch_matmul_int8, whose b is packed
// in K-quads); otherwise any column tile, a partial last one included.
schedule::ConfigSpace batch_matmul_space(int64_t M, int64_t N, int64_t k_steps, bool exact_columns);
schedule::Config batch_matmul_fallback(int64_t M, int64_t N, int64_t k_steps, const Isa& isa,
                                       bool exact_columns);
void schedule_batch_matmul_tiles(schedule::Schedule& sch, const TemplateInstance& inst,
                                 const ir::Tensor& output, const schedule::Config& cfg,
                                 const std::string& template_name);
}  // namespace detail

}  // namespace kiln::ops
