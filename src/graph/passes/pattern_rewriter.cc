#include "graph/passes/pattern_rewriter.h"

#include <algorithm>
#include <set>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

PatternRewriter::PatternRewriter(Graph& g)
    : g_(g), consumers_(consumers_of(g)), producers_(producers_of(g)) {}

int PatternRewriter::rewrite_all(const std::string& anchor_op,
                                 const std::function<std::optional<PatternMatch>(size_t)>& match) {
  std::vector<bool> removed(g_.nodes.size(), false);
  int count = 0;
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (removed[i] || g_.nodes[i].op_type != anchor_op) continue;
    std::optional<PatternMatch> m = match(i);
    if (!m || std::any_of(m->nodes.begin(), m->nodes.end(), [&](size_t k) { return removed[k]; }))
      continue;
    // The replacement takes the place of the last node: the pattern's inputs
    // are defined before its first node, every reader of its output comes
    // after its last.
    std::sort(m->nodes.begin(), m->nodes.end());
    for (size_t k : m->nodes) removed[k] = true;
    removed[m->nodes.back()] = false;
    g_.nodes[m->nodes.back()] = std::move(m->replacement);
    for (const std::string& v : m->intermediates) g_.value_info.erase(v);
    ++count;
  }
  erase_nodes(g_, removed);
  return count;
}

std::vector<size_t> PatternRewriter::readers(const std::string& v) const {
  auto it = consumers_.find(v);
  if (it == consumers_.end() || is_graph_output(g_, v)) return {};
  std::set<size_t> unique(it->second.begin(), it->second.end());
  return {unique.begin(), unique.end()};
}

std::optional<size_t> PatternRewriter::only_reader(const std::string& v) const {
  std::vector<size_t> r = readers(v);
  if (r.size() != 1) return std::nullopt;
  return r[0];
}

std::optional<size_t> PatternRewriter::producer_index(const std::string& v) const {
  auto it = producers_.find(v);
  if (it == producers_.end()) return std::nullopt;
  return it->second;
}

const Node* PatternRewriter::producer(const std::string& v) const {
  std::optional<size_t> i = producer_index(v);
  return i ? &g_.nodes[*i] : nullptr;
}

std::optional<float> PatternRewriter::scalar_constant(const std::string& v) const {
  const Initializer* c = constant_of(g_, v);
  if (!c || c->type.dtype != "float32" || num_elements(c->type.shape) != 1) return std::nullopt;
  return c->as<float>()[0];
}

}  // namespace kiln::graph::passes
