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

// vector_bits: the target's vector register width. A loop of a whole number
// of float vectors that is not a power of two of lanes (48 floats at 512
// bits) is vectorized one native vector at a time, in an unrolled loop over
// them; 0 vectorizes every loop whole.
ir::Stmt vectorize_loops(const ir::Stmt& s, int vector_bits = 0);

}  // namespace kiln::schedule
