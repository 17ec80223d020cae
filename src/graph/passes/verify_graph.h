// The structural invariants every graph pass must keep, checked in one place
// (tests run it after each pass): nodes topologically sorted, each value
// defined once, graph outputs defined, and value_info holding the exact type
// of every input, initializer and node output.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Throws std::runtime_error naming the first node or value that breaks an
// invariant.
void verify_graph(const Graph& g);

}  // namespace kiln::graph::passes
