// Folds per-channel affine ops into the weights of the anchor before them:
//   Conv(X, W[, B]) -> BatchNormalization   => Conv(X, W*s, B*s + t)
//   Conv -> Mul/Div by a per-output-channel constant   => scaled W and B
//   Conv -> Add/Sub of a per-output-channel constant   => B + c
//   Gemm(A, B[, C]) -> BN / Mul / Div / Add / Sub per output column => scaled
//     B columns, C' = beta*C*s + t, beta = 1
//   MatMul(A, B const 2-D) -> Mul / Div per output column => scaled B columns
// "Per-channel" means the constant broadcasts along the anchor's channel axis
// only (shapes [OC,1,1], [1,OC,1,1], [1], [] for a 2-D conv; [N], [1,N] for
// Gemm/MatMul) and leaves the output type unchanged. A fold happens only when
// the anchor's weights (and bias) are float32 constants and the anchor's
// output has the folded node as its only reader and is not a graph output;
// chains (Conv -> BN -> Mul -> Add) fold one node at a time.
// New weights get new initializer names (a weight may be shared); the old
// ones are left for eliminate_dead_code. A BatchNormalization that follows no
// such anchor is left alone: the elementwise BatchNormalization op runs it.
// ConvTranspose is not an anchor here (its weight is [IC, OC/group, ...]).
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of nodes folded away.
int fold_batch_norm(Graph& g);

}  // namespace kiln::graph::passes
