// Turns loops marked Vectorized into vector statements: the loop variable
// becomes ramp(min, 1, lanes) and every expression that depends on it becomes
// a vector expression. A lane-dependent guard (`if (j < N)` of a split that
// does not divide) gives `if (every lane inside) vector body else partial
// vector body`, the second with predicated loads and stores of Global
// buffers (LoadNode/StoreNode's predicate). A loop whose body cannot be
// expressed lane-parallel (a store to a location that does not depend on the
// loop, an allocation, a scatter) stays a serial loop: correct, not fast.
#pragma once

#include "ir/stmt.h"

namespace kiln::schedule {

ir::Stmt vectorize_loops(const ir::Stmt& s);

}  // namespace kiln::schedule
