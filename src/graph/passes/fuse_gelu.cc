#include "graph/passes/fuse_gelu.h"

#include <cmath>
#include <optional>
#include <string>

#include "graph/passes/pattern_rewriter.h"

namespace kiln::graph::passes {
namespace {

class GeluMatcher : public PatternRewriter {
 public:
  using PatternRewriter::PatternRewriter;

  int run() {
    return rewrite_all("Erf", [this](size_t i) { return match(i); });
  }

 private:
  // Whether v is a one-element float32 constant within float rounding of `want`.
  bool scalar_near(const std::string& v, double want) const {
    std::optional<float> c = scalar_constant(v);
    return c && std::fabs(static_cast<double>(*c) - want) <= 1e-6 * std::fabs(want);
  }

  // The other input of node ni, a binary `op_type` reading `v` in one slot.
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
    const Node* n = producer(s);
    if (!n || n->inputs.size() != 2 || n->outputs.size() != 1) return {};
    if (n->op_type == "Div" && scalar_near(n->inputs[1], std::sqrt(2.0))) return n->inputs[0];
    if (n->op_type == "Mul") {
      if (scalar_near(n->inputs[1], std::sqrt(0.5))) return n->inputs[0];
      if (scalar_near(n->inputs[0], std::sqrt(0.5))) return n->inputs[1];
    }
    return {};
  }

  std::optional<PatternMatch> match(size_t erf_i) {
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

    PatternMatch m;
    m.nodes = {*producer_index(s), erf_i, *add_i, *m1_i};
    m.intermediates = {s, phi, e};
    std::string output;
    if (*f == *x) {  // (x * e) * 0.5
      std::optional<size_t> m2_i = only_reader(m1_out);
      if (!m2_i) return {};
      std::optional<std::string> half = other_input(*m2_i, "Mul", m1_out);
      if (!half || !scalar_near(*half, 0.5)) return {};
      m.nodes.push_back(*m2_i);
      m.intermediates.push_back(m1_out);
      output = g_.nodes[*m2_i].outputs[0];
    } else {  // (x * 0.5) * e
      std::optional<size_t> h_i = producer_index(*f);
      if (!h_i || only_reader(*f) != m1_i) return {};
      std::optional<std::string> half = other_input(*h_i, "Mul", *x);
      if (!half || !scalar_near(*half, 0.5)) return {};
      m.nodes.push_back(*h_i);
      m.intermediates.push_back(*f);
      output = m1_out;
    }
    const TensorType* yt = g_.type_of(output);
    if (!yt || *yt != *xt) return {};
    Node& gelu = m.replacement;
    gelu.op_type = "Gelu";
    gelu.name = g_.nodes[*producer_index(s)].name + "/Gelu";
    gelu.inputs = {*x};
    gelu.outputs = {output};
    gelu.attrs["approximate"] = std::string("none");
    return m;
  }
};

}  // namespace

int fuse_gelu(Graph& g) { return GeluMatcher(g).run(); }

}  // namespace kiln::graph::passes
