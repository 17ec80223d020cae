// Replicates the body of each loop marked Unrolled (constant extent) once per
// iteration, with the loop variable replaced by its value.
#pragma once

#include "ir/stmt.h"

namespace kiln::schedule {

ir::Stmt unroll_loops(const ir::Stmt& s);

}  // namespace kiln::schedule
