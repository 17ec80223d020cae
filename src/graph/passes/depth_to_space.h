// DepthToSpace (PixelShuffle, DCR and CRD modes) and SpaceToDepth as the
// Reshape -> Transpose -> Reshape that defines them in the ONNX spec, which
// kiln runs as one transpose kernel between two aliases.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of nodes rewritten.
int depth_to_space_as_transpose(Graph& g);

}  // namespace kiln::graph::passes
