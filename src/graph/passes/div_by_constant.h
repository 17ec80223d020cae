// Div(x, c) by a float32 scalar constant c becomes Mul(x, 1 / c): a vector
// division costs several multiplies' throughput (AVX-512 vdivps against
// vmulps), and exporters divide by constants in hot elementwise chains: GELU's
// x / sqrt(2), attention's scores / sqrt(d). The result differs from the
// division by at most one ulp (1 / c rounded once, then the product; exact
// when c is a power of two). A c of 0, infinity or NaN, or whose reciprocal
// is not a normal float, is left to the division.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of divisions rewritten.
int div_by_constant(Graph& g);

}  // namespace kiln::graph::passes
