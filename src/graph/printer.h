// A readable dump of a graph, one node per line:
//
//   %3  conv1  kiln.Template conv2d_NCHWc.x86  (x/nchwc, conv1/w_packed) -> y  [1,4,56,56,16] f32
//   NCHW16c  group 2
//
// with the node's output type and layout (NCHW[x]c for blocked 5-D values)
// and, when groups are given, the fused group the node belongs to. The build
// prints it after each step under KILN_DEBUG_GRAPH (driver/debug.h).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/fuse_ops.h"

namespace kiln::graph {

// groups: the fused groups of `g` (node indices), or empty before fusion.
std::string print_graph(const Graph& g, const std::vector<FusedGroup>& groups = {});

}  // namespace kiln::graph
