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
// vector_lanes: float32 lanes of the target's vector registers
// (codegen::Target::float_lanes(): 16 with AVX-512, 8 with AVX2, 4 with NEON).
schedule::Schedule schedule_generic(const std::vector<ir::Tensor>& outputs, int64_t vector_lanes);

// Injective stage: the innermost axis split by the vector width and
// vectorized, the loops outside it fused into one, parallel when the stage is
// large enough to pay for a launch. Reduction stage: its spatial loops fused
// and parallel when large enough; the reduction runs serially inside.
void schedule_loops(const schedule::Stage& stage, int64_t vector_lanes);

// Elements below which a stage runs on one thread.
inline constexpr int64_t kMinParallelElements = 16384;

}  // namespace kiln::ops
