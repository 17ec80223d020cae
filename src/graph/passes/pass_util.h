// Small helpers the graph passes share: who reads a value, fresh value names,
// adding constants with their value_info, and typed access to float data.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph::passes {

// value name -> indices (into g.nodes) of the nodes that read it, one entry per
// reading input slot (a node reading a value twice appears twice).
std::map<std::string, std::vector<size_t>> consumers_of(const Graph& g);

// value name -> index of the node that produces it.
std::map<std::string, size_t> producers_of(const Graph& g);

bool is_graph_output(const Graph& g, const std::string& value);
bool is_graph_input(const Graph& g, const std::string& value);

// A value name not yet used in `g` (as input, initializer, node output or
// value_info entry): `base`, else `base_1`, `base_2`, ...
std::string unique_value_name(const Graph& g, const std::string& base);

// Adds (or replaces) an initializer and records its type in value_info.
void set_initializer(Graph& g, const std::string& name, Initializer value);

// The initializer named `value`, or nullptr when it is not a constant.
const Initializer* constant_of(const Graph& g, const std::string& value);

// Erases removed[i] nodes, keeping the order of the others.
void erase_nodes(Graph& g, const std::vector<bool>& removed);

// float32 tensor from values (shape must match the element count).
Initializer float_tensor(std::vector<int64_t> shape, const std::vector<float>& values);

// A 1-D int64 tensor of `values` (Reshape's shape, Slice's starts and ends).
Initializer int64_tensor(const std::vector<int64_t>& values);

// Rebuilds g.nodes in order for passes that turn one node into several:
// `expand(node, out)` either appends the nodes that replace `node` to `out`
// and returns true, or returns false and the node stays. g.nodes is empty
// while it runs (value types and initializers are all there). Returns the
// number of nodes replaced.
int expand_nodes(Graph& g, const std::function<bool(const Node&, std::vector<Node>&)>& expand);

// Product of the dims (1 for a scalar shape).
int64_t num_elements(const std::vector<int64_t>& shape);

}  // namespace kiln::graph::passes
