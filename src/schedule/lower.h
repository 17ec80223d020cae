// Lowering: a schedule becomes one kernel of flat loop IR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/function.h"
#include "schedule/code_size.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

// args: the kernel's buffer arguments in order (placeholders and outputs).
// Set KILN_DEBUG_LOWER=1 to print the IR after every pass.
ir::LoweredFunc lower(const Schedule& sch, const std::vector<ir::Tensor>& args,
                      const std::string& name);

// What the compile-time budget did to one kernel (schedule/code_size.h).
struct LowerReport {
  int64_t code_size = 0;             // estimated operations of the kernel as lowered
  int64_t code_size_before = 0;      // the same before demotion (== code_size if none)
  std::vector<std::string> demoted;  // unrolled loops made serial, by loop variable
};

struct LowerOptions {
  // Expand loops marked unroll (and simplify the copies). Off, they stay
  // loops with their unroll annotation: what the tuner's feature extraction
  // reads, at a fraction of the cost for large register tiles.
  bool unroll = true;
  // The compile-time budget in estimated operations (estimate_code_size,
  // taken after vectorize_loops, before unroll_loops); <= 0: none.
  int64_t code_budget = kDefaultCodeBudget;
  // The target's vector register width, for the estimate.
  int vector_bits = 512;
  // Over the budget: demote the outermost unrolled loops to serial until the
  // kernel fits (a build), or throw CodeBudgetExceeded (a tuning candidate,
  // whose config asked for that unrolling).
  bool demote_over_budget = true;
  // When set, filled in (the estimate and any demotion).
  LowerReport* report = nullptr;
};
ir::LoweredFunc lower(const Schedule& sch, const std::vector<ir::Tensor>& args,
                      const std::string& name, const LowerOptions& options);

}  // namespace kiln::schedule
