// Lowering: a schedule becomes one kernel of flat loop IR.
#pragma once

#include <string>
#include <vector>

#include "ir/function.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

// args: the kernel's buffer arguments in order (placeholders and outputs).
// Set KILN_DEBUG_LOWER=1 to print the IR after every pass.
ir::LoweredFunc lower(const Schedule& sch, const std::vector<ir::Tensor>& args,
                      const std::string& name);

struct LowerOptions {
  // Expand loops marked unroll (and simplify the copies). Off, they stay
  // loops with their unroll annotation: what the tuner's feature extraction
  // reads, at a fraction of the cost for large register tiles.
  bool unroll = true;
};
ir::LoweredFunc lower(const Schedule& sch, const std::vector<ir::Tensor>& args,
                      const std::string& name, const LowerOptions& options);

}  // namespace kiln::schedule
