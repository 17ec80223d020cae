#include "graph/printer.h"

#include <map>
#include <sstream>

namespace kiln::graph {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// NCHW[x]c for the 5-D blocked activations the layout pass makes; "" otherwise.
std::string layout_of(const TensorType& t) {
  if (t.shape.size() == 5) return "NCHW" + std::to_string(t.shape.back()) + "c";
  if (t.shape.size() == 4) return "NCHW";
  return "";
}

std::string value_text(const Graph& g, const std::string& v) {
  const TensorType* t = g.type_of(v);
  if (!t) return v + " [?]";
  std::string s = v + " " + shape_text(t->shape) + " " + t->dtype;
  std::string layout = layout_of(*t);
  return layout.empty() ? s : s + " " + layout;
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

}  // namespace

std::string print_graph(const Graph& g, const std::vector<FusedGroup>& groups) {
  std::map<size_t, size_t> group_of;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t n : groups[gi].nodes) group_of[n] = gi;
  std::ostringstream os;
  os << "graph: " << g.nodes.size() << " nodes, " << g.initializers.size() << " initializers";
  if (!groups.empty()) os << ", " << groups.size() << " fused groups";
  os << "\n";
  for (const ValueInfo& in : g.inputs) os << "  input  " << value_text(g, in.name) << "\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    os << "  %" << i << "  " << n.name << "  " << n.op_type;
    if (auto t = n.attr<std::string>("template")) os << " " << *t;
    os << "  (" << join(n.inputs) << ") -> ";
    for (size_t o = 0; o < n.outputs.size(); ++o)
      os << (o ? ", " : "") << value_text(g, n.outputs[o]);
    if (auto it = group_of.find(i); it != group_of.end()) os << "  group " << it->second;
    os << "\n";
  }
  for (const std::string& out : g.outputs) os << "  output " << value_text(g, out) << "\n";
  return os.str();
}

}  // namespace kiln::graph
