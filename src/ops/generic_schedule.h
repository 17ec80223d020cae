// Schedules for computations that have no tunable template: injective
// operators (elementwise, broadcast, reshape, transpose, ...) and simple
// reductions (reduce ops, pooling, softmax, layer norm), alone or fused.
#pragma once

#include <vector>

#include "ir/tensor.h"
#include "schedule/schedule.h"

namespace kiln::ops {

// Every stage that is neither an output nor a reduction is inlined into its
// readers. Each remaining stage gets its loops shaped by schedule_loops().
// Except for a row kernel: when the one output is injective and every other
// computed stage is a per-row statistic of it (Softmax's maxima and sums,
// LayerNorm's sums, mean and 1/std, a ReduceMean's or global pool's sum), the
// output's row dims become one parallel loop and the statistics (and their
// vector partials) are computed inside it, row by row, while the row is in L1.
// Likewise a pixel kernel when the statistics are per pixel of a layout whose
// normalized dims are not the innermost ones (kiln.ChannelNorm in NCHW[b]c:
// channel blocks and lanes): the pixel dims fused into one parallel loop
// outside the normalized ones, the statistics computed inside it per pixel.
// vector_lanes: float32 lanes of the target's vector registers
// (codegen::Target::float_lanes(): 16 with AVX-512, 8 with AVX2, 4 with NEON).
// rows_first: NCHW[x]c stages share their rows between the threads, not their
// channel blocks (graph/passes/parallel_splits.h); row and pixel kernels keep
// their own parallel loops.
schedule::Schedule schedule_generic(const std::vector<ir::Tensor>& outputs, int64_t vector_lanes,
                                    bool rows_first = false);

// Injective stage: the innermost axis split by the vector width and
// vectorized, the loops outside it fused into one, parallel when the stage is
// large enough to pay for a launch. Reduction stage: its spatial loops fused
// and parallel when the whole nest (reduction included) is large enough; when
// its innermost spatial axis is a multiple of the lanes (at most 4 vectors)
// and contiguous in every input, that axis runs as vectors inside the
// reduction loops (vector accumulators: a row's partial sums, a channel
// block), else the reduction runs serially inside.
void schedule_loops(const schedule::Stage& stage, int64_t vector_lanes, bool rows_first = false);

// Elements below which a stage runs on one thread.
inline constexpr int64_t kMinParallelElements = 16384;

}  // namespace kiln::ops
