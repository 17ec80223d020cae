// y = Relu(x), x float32 [1, n]: the one-kernel graph the runtime benchmarks
// build (overhead.cc: the smallest run(); placement.cc: its smoke check).
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace kiln::bench {

inline graph::Graph relu_graph(int64_t n) {
  graph::Graph g;
  graph::TensorType t{"float32", {1, n}};
  g.inputs.push_back({"x", t});
  g.outputs = {"y"};
  graph::Node node;
  node.op_type = "Relu";
  node.name = "relu";
  node.inputs = {"x"};
  node.outputs = {"y"};
  g.nodes.push_back(node);
  g.value_info["x"] = t;
  g.value_info["y"] = t;
  return g;
}

}  // namespace kiln::bench
