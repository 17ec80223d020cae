// Dense (matrix multiply) templates: C[M, N] = A[M, K] * B[K, N].
//
// dense_nopack.x86 reads B as given; dense_pack.x86 reads B re-laid out as
// Bp[ceil(N / bn), K, bn] so that the bn output columns of a register tile
// load one contiguous vector per k. The pack is either a stage of the kernel
// (pack_in_kernel) or done once at build time (then Bp is the argument).
#pragma once

#include "ops/kernel.h"
#include "schedule/config_space.h"

namespace kiln::ops {

struct DenseWorkload {
  int64_t M, N, K;
};

// Knobs: tile_y (3 levels over M), tile_x (3 levels over N), tile_k (2 levels over K),
// tile_order (0: row blocks outer, 1: column panels outer, inside a parallel task).
schedule::ConfigSpace dense_nopack_space(const DenseWorkload& w, schedule::SplitPolicy policy);
Kernel dense_nopack(const DenseWorkload& w, const schedule::Config& cfg);

// Same knobs; bn = innermost tile_x factor.
schedule::ConfigSpace dense_pack_space(const DenseWorkload& w, schedule::SplitPolicy policy);
Kernel dense_pack(const DenseWorkload& w, const schedule::Config& cfg, bool pack_in_kernel);
int64_t dense_pack_block(const schedule::Config& cfg);

// Host-side packing of a row-major B[K, N] into Bp[ceil(N/bn), K, bn] (zero fill).
std::vector<float> pack_dense_weight(const float* B, int64_t K, int64_t N, int64_t bn);

}  // namespace kiln::ops
