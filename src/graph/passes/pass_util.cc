#include "graph/passes/pass_util.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kiln::graph::passes {

std::map<std::string, std::vector<size_t>> consumers_of(const Graph& g) {
  std::map<std::string, std::vector<size_t>> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) out[in].push_back(i);
  return out;
}

std::map<std::string, size_t> producers_of(const Graph& g) {
  std::map<std::string, size_t> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs)
      if (!o.empty()) out[o] = i;
  return out;
}

bool is_graph_output(const Graph& g, const std::string& value) {
  return std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end();
}

bool is_graph_input(const Graph& g, const std::string& value) {
  for (const ValueInfo& in : g.inputs)
    if (in.name == value) return true;
  return false;
}

namespace {
bool name_taken(const Graph& g, const std::string& name) {
  if (g.value_info.count(name) || g.initializers.count(name)) return true;
  if (is_graph_input(g, name) || is_graph_output(g, name)) return true;
  for (const Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (o == name) return true;
  return false;
}
}  // namespace

std::string unique_value_name(const Graph& g, const std::string& base) {
  if (!name_taken(g, base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (!name_taken(g, candidate)) return candidate;
  }
}

void set_initializer(Graph& g, const std::string& name, Initializer value) {
  g.value_info[name] = value.type;
  g.initializers[name] = std::move(value);
}

const Initializer* constant_of(const Graph& g, const std::string& value) {
  auto it = g.initializers.find(value);
  return it == g.initializers.end() ? nullptr : &it->second;
}

void erase_nodes(Graph& g, const std::vector<bool>& removed) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

Initializer float_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  Initializer t;
  t.type = {"float32", std::move(shape)};
  if (t.type.num_elements() != static_cast<int64_t>(values.size()))
    throw std::logic_error("float_tensor: " + std::to_string(values.size()) + " values for shape " +
                           shape_str(t.type.shape));
  t.data.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

Initializer int64_tensor(const std::vector<int64_t>& values) {
  Initializer t;
  t.type = {"int64", {static_cast<int64_t>(values.size())}};
  t.data.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

int expand_nodes(Graph& g, const std::function<bool(const Node&, std::vector<Node>&)>& expand) {
  int count = 0;
  std::vector<Node> nodes = std::move(g.nodes);
  g.nodes.clear();
  std::vector<Node> out;
  out.reserve(nodes.size());
  for (Node& n : nodes) {
    if (expand(n, out))
      ++count;
    else
      out.push_back(std::move(n));
  }
  g.nodes = std::move(out);
  return count;
}

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace kiln::graph::passes
