// Recognises LayerNorm written out of elementary operators, as exporters emit
// it before opset 17 (PyTorch's F.layer_norm through opset 16, Keras, TF):
//
//   mean = ReduceMean(x, axes)          d  = Sub(x, mean)
//   var  = ReduceMean(Pow(d, 2), axes)  (or Mul(d, d))
//   y    = Div(d, Sqrt(Add(var, eps)))  [Mul(y, gamma)] [Add(y, beta)]
//
// with axes the innermost dims [a, rank) (keepdims), eps a scalar constant,
// gamma and beta constants that vary only over the normalized dims, and every
// intermediate read only inside the pattern. Each match becomes one
// LayerNormalization(x, gamma or ones, [beta], axis=a, epsilon=eps) writing the
// pattern's last output: one row kernel (ops/generic_schedule.h) instead of
// four full passes over x with their temporaries.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of patterns rewritten.
int fuse_layer_norm(Graph& g);

}  // namespace kiln::graph::passes
