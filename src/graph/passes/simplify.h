// Removes nodes that compute nothing at inference: Identity, Dropout (not in
// training mode and with an unread mask), Cast to the input's own dtype,
// Reshape/Flatten/Squeeze/Unsqueeze/Expand whose output type equals the input
// type, Transpose with the identity permutation, Concat of one input, and Pad
// whose pads are all 0.
// Readers are rewired to the node's input. Graph output names survive: when
// the removed node's output is a graph output, its input's producer is renamed
// to produce it instead; when that is impossible (the input is a graph input,
// a constant or another graph output) an Identity stays.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of nodes removed.
int simplify(Graph& g);

}  // namespace kiln::graph::passes
