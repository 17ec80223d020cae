// Recognises GELU written out of elementary operators, as PyTorch exports
// nn.GELU() before opset 20 (and Hugging Face models write it):
//
//   e = Add(Erf(Div(x, sqrt 2) or Mul(x, 1/sqrt 2)), 1)
//   y = Mul(Mul(x, e), 0.5)   or   y = Mul(Mul(x, 0.5), e)
//
// operands of Mul and Add in either order, the constants scalars (within
// float rounding of sqrt 2, 1/sqrt 2, 1 and 0.5), and every intermediate read
// only inside the pattern. Each match becomes one Gelu(x) (opset 20,
// approximate "none") writing the pattern's output.
//
// Why: x is read twice (by the scaling and by the final product), and
// operator fusion ends a group at a value with two readers, so the pattern
// was a kernel of its own after a Linear's (dense_pack) output was written
// and read back: ConvNeXt-T spent 4 % of its time there. As one elementwise
// op it joins the Linear's epilogue.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of patterns rewritten.
int fuse_gelu(Graph& g);

}  // namespace kiln::graph::passes
