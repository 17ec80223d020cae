#include "graph/passes/eliminate_dead_code.h"

#include <set>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

DeadCodeStats eliminate_dead_code(Graph& g) {
  DeadCodeStats stats;
  // Walk backwards from the outputs: a node is live when it produces a live value.
  std::set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> removed(g.nodes.size(), true);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    for (const std::string& out : n.outputs)
      if (!out.empty() && live.count(out)) removed[i] = false;
    if (removed[i]) continue;
    for (const std::string& in : n.inputs)
      if (!in.empty()) live.insert(in);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!removed[i]) continue;
    for (const std::string& out : g.nodes[i].outputs) g.value_info.erase(out);
    ++stats.nodes_removed;
  }
  erase_nodes(g, removed);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (live.count(it->first)) {
      ++it;
      continue;
    }
    g.value_info.erase(it->first);
    it = g.initializers.erase(it);
    ++stats.initializers_removed;
  }
  return stats;
}

}  // namespace kiln::graph::passes
