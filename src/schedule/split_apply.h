// Applies a multi-level split (as a define_split knob describes it) to a loop.
#pragma once

#include <vector>

#include "schedule/schedule.h"

namespace kiln::schedule {

// factors = {f0, f1, ..., fn-1}, outermost first; f0 is implied by the extent
// and ignored. Returns the n loops, outermost first.
std::vector<IterVar> apply_split(const Stage& s, const IterVar& iv,
                                 const std::vector<int64_t>& factors);

}  // namespace kiln::schedule
