// Einsum: the equation parsed once for the reference evaluation (einsum.cc)
// and for the pass that rewrites every Einsum into Transpose, Reshape,
// Gather (diagonals), ReduceSum and MatMul nodes (graph/passes/lower_einsum.h).
// There is no kernel of its own: the MatMul it becomes is a template
// workload (dense / batch_matmul) like any other, tuned the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph::op_util {

// One letter per axis of each operand and of the output. The axes an
// ellipsis stands for get the letters '0', '1', ... aligned from the right
// (numpy broadcasting), so "...ij" on a rank-4 operand is "01ij".
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
  // Each letter's extent: the largest over the operands (an axis of extent 1
  // broadcasts, as numpy's einsum does).
  std::map<char, int64_t> extent;
};

// Parses node's `equation` for operands of the given shapes: explicit
// ("ij,jk->ik") or implicit (no "->": the letters seen once, sorted, after
// the ellipsis axes). Throws OpError naming the node for a malformed
// equation or one that does not fit the shapes.
EinsumSpec parse_einsum(const Node& node, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace kiln::graph::op_util
