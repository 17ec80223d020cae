// The part the AMX dense templates (dense_int8_amx.x86, dense_bf16_amx.x86)
// share: C[M, N] = A[M, K] x B[K, N] on tiles, one knob (panels_per_task:
// the 16-row panels of one parallel task, ops/dense_int8_amx.h), a kernel
// written by build_loops() rather than scheduled from compute(). Only the
// operand types, the packing and the loops differ; each template says those.
#pragma once

#include <cstdint>

#include "ops/op_template.h"

namespace kiln::ops::detail {

struct AmxDenseShape {
  int64_t M, N, K;
};

class AmxDenseTemplate : public OpTemplate {
 public:
  // The checked sizes of a workload of this template (bad_workload otherwise).
  virtual AmxDenseShape dims(const Workload& w) const = 0;

  schedule::ConfigSpace space(const Workload& w) const override;
  schedule::Config fallback(const Workload& w, const Isa& isa) const override;
  // A row of C per step, rows (and any computed input stage) in parallel:
  // correct for any shape, and not the code that runs (build_loops() is).
  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const ir::Tensor& output,
                const schedule::Config& cfg) const override;
  bool builds_own_loops() const override { return true; }
  double flops(const Workload& w) const override;
  std::vector<int64_t> output_shape(const Workload& w, const schedule::Config& cfg) const override;
};

}  // namespace kiln::ops::detail
