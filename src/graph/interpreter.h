// A host interpreter for a whole Graph: every node evaluated in order with the
// operator registry's evaluate function (the ONNX-semantics reference). It is
// the reference the graph passes are tested against (a pass must not change
// what run_graph returns) and the expected result of the end-to-end tests.
// Slow by design: plain loops, no kernels.
#pragma once

#include <map>
#include <string>

#include "graph/graph.h"

namespace kiln::graph {

// Runs `g` on `inputs` (one tensor per graph input, by name, with exactly the
// input's dtype and shape) and returns every graph output by name.
// Each node's results are checked against the value_info types of its outputs,
// so a pass that leaves a stale type is caught here. Intermediate values are
// freed after their last reader runs.
// Throws std::runtime_error naming the missing/unknown input, or the node
// (name and op type) whose evaluation failed and why.
std::map<std::string, Initializer> run_graph(const Graph& g,
                                             const std::map<std::string, Initializer>& inputs);

}  // namespace kiln::graph
