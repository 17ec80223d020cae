// Rewrites every Einsum into operators kiln compiles: per operand, Gather for
// a repeated letter (a diagonal) and ReduceSum for letters no one else needs;
// then, operand pair by operand pair, Transposes and Reshapes that put the
// shared (batch) letters first and the contracted ones between, one MatMul
// (a dense / batch_matmul template workload), and a Reshape and Transpose
// into the output's order. Transposes and Reshapes that would not move
// anything are left out, so "bij,bjk->bik" is one MatMul.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of Einsum nodes rewritten. Throws OpError naming the
// node for an equation that does not fit its operands.
int lower_einsum(Graph& g);

}  // namespace kiln::graph::passes
