#include "graph/passes/fuse_gelu.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

class GeluMatcher {
 public:
  explicit GeluMatcher(Graph& g)
      : g_(g), consumers_(consumers_of(g)), producers_(producers_of(g)) {}

  int run() {
    std::vector<bool> removed(g_.nodes.size(), false);
    int count = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (removed[i] || g_.nodes[i].op_type != "Erf") continue;
      std::optional<Match> m = match(i);
      if (!m) continue;
      if (std::any_of(m->nodes.begin(), m->nodes.end(), [&](size_t k) { return removed[k]; }))
        continue;
      rewrite(*m, removed);
      ++count;
    }
    erase_nodes(g_, removed);
    return count;
  }

 private:
  struct Match {
    std::vector<size_t> nodes;  // sorted; the last one is replaced
    std::vector<std::string> intermediates;
    std::string x, output;
  };

  // The one node reading `v` (reading it in one slot), when no other node and
  // no graph output reads it.
  std::optional<size_t> only_reader(const std::string& v) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1 || is_graph_output(g_, v)) return {};
    return it->second[0];
  }

  std::optional<size_t> producer(const std::string& v) const {
    auto it = producers_.find(v);
    if (it == producers_.end()) return {};
    return it->second;
  }

  // Whether v is a one-element float32 constant within float rounding of `want`.
  bool scalar_near(const std::string& v, double want) const {
    const Initializer* c = constant_of(g_, v);
    if (!c || c->type.dtype != "float32" || num_elements(c->type.shape) != 1) return false;
    return std::fabs(static_cast<double>(c->as<float>()[0]) - want) <= 1e-6 * std::fabs(want);
  }

  // The other input of a binary node `op_type` reading `v` once.
  std::optional<std::string> other_input(size_t ni, const char* op_type,
                                         const std::string& v) const {
    const Node& n = g_.nodes[ni];
    if (n.op_type != op_type || n.inputs.size() != 2 || n.outputs.size() != 1) return {};
    if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
    return {};
  }

  // x of the Erf's input `s` = Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (either order).
  std::optional<std::string> scaled_input(const std::string& s) const {
    std::optional<size_t> p = producer(s);
    if (!p) return {};
    const Node& n = g_.nodes[*p];
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return {};
    if (n.op_type == "Div" && scalar_near(n.inputs[1], std::sqrt(2.0))) return n.inputs[0];
    if (n.op_type == "Mul") {
      if (scalar_near(n.inputs[1], std::sqrt(0.5))) return n.inputs[0];
      if (scalar_near(n.inputs[0], std::sqrt(0.5))) return n.inputs[1];
    }
    return {};
  }

  std::optional<Match> match(size_t erf_i) const {
    const Node& erf = g_.nodes[erf_i];
    if (erf.inputs.size() != 1 || erf.outputs.size() != 1) return {};
    const std::string& s = erf.inputs[0];
    std::optional<std::string> x = scaled_input(s);
    if (!x || only_reader(s) != erf_i) return {};
    const TensorType* xt = g_.type_of(*x);
    if (!xt || xt->dtype != "float32") return {};

    const std::string& phi = erf.outputs[0];
    std::optional<size_t> add_i = only_reader(phi);
    if (!add_i) return {};
    std::optional<std::string> one = other_input(*add_i, "Add", phi);
    if (!one || !scalar_near(*one, 1.0)) return {};
    const std::string& e = g_.nodes[*add_i].outputs[0];

    std::optional<size_t> m1_i = only_reader(e);
    if (!m1_i) return {};
    std::optional<std::string> f = other_input(*m1_i, "Mul", e);
    if (!f) return {};
    const std::string& m1_out = g_.nodes[*m1_i].outputs[0];

    Match m;
    m.x = *x;
    m.nodes = {*producer(s), erf_i, *add_i, *m1_i};
    m.intermediates = {s, phi, e};
    if (*f == *x) {  // (x * e) * 0.5
      std::optional<size_t> m2_i = only_reader(m1_out);
      if (!m2_i) return {};
      std::optional<std::string> half = other_input(*m2_i, "Mul", m1_out);
      if (!half || !scalar_near(*half, 0.5)) return {};
      m.nodes.push_back(*m2_i);
      m.intermediates.push_back(m1_out);
      m.output = g_.nodes[*m2_i].outputs[0];
    } else {  // (x * 0.5) * e
      std::optional<size_t> h_i = producer(*f);
      if (!h_i || only_reader(*f) != m1_i) return {};
      std::optional<std::string> half = other_input(*h_i, "Mul", *x);
      if (!half || !scalar_near(*half, 0.5)) return {};
      m.nodes.push_back(*h_i);
      m.intermediates.push_back(*f);
      m.output = m1_out;
    }
    const TensorType* yt = g_.type_of(m.output);
    if (!yt || *yt != *xt) return {};
    // The replacement takes the place of the last node: x is defined before
    // every node of the pattern, every reader of the output comes after it.
    std::sort(m.nodes.begin(), m.nodes.end());
    return m;
  }

  void rewrite(const Match& m, std::vector<bool>& removed) {
    Node gelu;
    gelu.op_type = "Gelu";
    gelu.name = g_.nodes[m.nodes.front()].name + "/Gelu";
    gelu.inputs = {m.x};
    gelu.outputs = {m.output};
    gelu.attrs["approximate"] = std::string("none");
    for (size_t k : m.nodes) removed[k] = true;
    removed[m.nodes.back()] = false;
    g_.nodes[m.nodes.back()] = gelu;
    for (const std::string& v : m.intermediates) g_.value_info.erase(v);
  }

  Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producers_;
};

}  // namespace

int fuse_gelu(Graph& g) { return GeluMatcher(g).run(); }

}  // namespace kiln::graph::passes
