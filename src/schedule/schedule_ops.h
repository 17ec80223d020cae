// Builds the loop nest of a whole schedule: one nest per root stage, attached
// stages inside their host's loops, intermediates wrapped in Realize.
// The result still uses TensorStore / TensorRead; storage_flatten follows.
#pragma once

#include "ir/stmt.h"
#include "schedule/schedule.h"

namespace kiln::schedule {

ir::Stmt schedule_ops(const Schedule& sch);

}  // namespace kiln::schedule
