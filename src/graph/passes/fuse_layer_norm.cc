#include "graph/passes/fuse_layer_norm.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"
#include "graph/passes/pattern_rewriter.h"

namespace kiln::graph::passes {
namespace {

class Matcher : public PatternRewriter {
 public:
  using PatternRewriter::PatternRewriter;

  int run() {
    return rewrite_all("Sub", [this](size_t i) { return match(i); });
  }

 private:
  // The first normalized dim when `n` is a ReduceMean over exactly the
  // innermost dims [a, rank) that keeps them (as 1s).
  std::optional<int64_t> reduced_suffix(const Node& n, int64_t rank) const {
    if (n.op_type != "ReduceMean" || n.attr<int64_t>("keepdims").value_or(1) != 1) return {};
    std::vector<int64_t> axes;
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
      const Initializer* a = constant_of(g_, n.inputs[1]);
      if (!a || a->type.dtype != "int64") return {};
      axes = a->as<int64_t>();
    } else {
      axes = n.attr<std::vector<int64_t>>("axes").value_or(std::vector<int64_t>{});
    }
    if (axes.empty()) {
      if (n.attr<int64_t>("noop_with_empty_axes").value_or(0) != 0) return {};
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    for (int64_t& a : axes) {
      if (a < -rank || a >= rank) return {};
      if (a < 0) a += rank;
    }
    std::sort(axes.begin(), axes.end());
    for (size_t k = 0; k < axes.size(); ++k)
      if (axes[k] != rank - static_cast<int64_t>(axes.size() - k)) return {};
    return axes.front();
  }

  // A float32 constant that broadcasts against x ([..., d_a, ..., d_last])
  // along the normalized dims only: LayerNormalization's Scale or B.
  bool per_normalized_constant(const std::string& v, const std::vector<int64_t>& x,
                               int64_t axis) const {
    const Initializer* c = constant_of(g_, v);
    if (!c || c->type.dtype != "float32" || c->type.shape.size() > x.size()) return false;
    const std::vector<int64_t>& s = c->type.shape;
    const size_t lead = x.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      const size_t xd = lead + d;
      if (static_cast<int64_t>(xd) < axis ? s[d] != 1 : s[d] != 1 && s[d] != x[xd]) return false;
    }
    return true;
  }

  // The other input of a binary node whose inputs are `v` and a constant of
  // the kind `ok` accepts, in either order.
  template <typename Ok>
  std::optional<std::string> other_constant(const Node& n, const std::string& v, Ok ok) const {
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return {};
    if (n.inputs[0] == v && n.inputs[1] != v && ok(n.inputs[1])) return n.inputs[1];
    if (n.inputs[1] == v && n.inputs[0] != v && ok(n.inputs[0])) return n.inputs[0];
    return {};
  }

  std::optional<PatternMatch> match(size_t sub_index) {
    const Node& sub = g_.nodes[sub_index];
    if (sub.inputs.size() != 2 || sub.outputs.size() != 1) return {};
    const std::string& x = sub.inputs[0];
    const std::string& mean = sub.inputs[1];
    const std::string& d = sub.outputs[0];
    const TensorType* xt = g_.type_of(x);
    const TensorType* dt = g_.type_of(d);
    if (!xt || !dt || xt->dtype != "float32" || *xt != *dt || xt->shape.empty()) return {};
    const int64_t rank = static_cast<int64_t>(xt->shape.size());

    const Node* m1 = producer(mean);
    if (!m1 || m1->inputs.empty() || m1->inputs[0] != x || only_reader(mean) != sub_index)
      return {};
    std::optional<int64_t> axis = reduced_suffix(*m1, rank);
    if (!axis) return {};

    // d feeds exactly the square and the division.
    std::vector<size_t> d_readers = readers(d);
    if (d_readers.size() != 2) return {};
    std::optional<size_t> sq_i, div_i;
    for (size_t r : d_readers) {
      const Node& n = g_.nodes[r];
      if (n.op_type == "Div" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] != d)
        div_i = r;
      else if (n.op_type == "Mul" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d)
        sq_i = r;
      else if (n.op_type == "Pow" && n.inputs.size() == 2 && n.inputs[0] == d &&
               scalar_constant(n.inputs[1]) == 2.0f)
        sq_i = r;
    }
    if (!sq_i || !div_i) return {};
    const std::string& sq = g_.nodes[*sq_i].outputs[0];

    std::optional<size_t> m2_i = only_reader(sq);
    if (!m2_i || reduced_suffix(g_.nodes[*m2_i], rank) != axis || g_.nodes[*m2_i].inputs[0] != sq)
      return {};
    const std::string& var = g_.nodes[*m2_i].outputs[0];

    std::optional<size_t> add_i = only_reader(var);
    if (!add_i || g_.nodes[*add_i].op_type != "Add") return {};
    std::optional<std::string> eps_v =
        other_constant(g_.nodes[*add_i], var,
                       [&](const std::string& c) { return scalar_constant(c).has_value(); });
    if (!eps_v) return {};
    const std::string& ve = g_.nodes[*add_i].outputs[0];

    std::optional<size_t> sqrt_i = only_reader(ve);
    if (!sqrt_i || g_.nodes[*sqrt_i].op_type != "Sqrt") return {};
    const std::string& sd = g_.nodes[*sqrt_i].outputs[0];
    if (only_reader(sd) != div_i || g_.nodes[*div_i].inputs[1] != sd) return {};

    PatternMatch m;
    m.nodes = {*producer_index(mean), sub_index, *sq_i, *m2_i, *add_i, *sqrt_i, *div_i};
    m.intermediates = {mean, d, sq, var, ve, sd};
    std::string output = g_.nodes[*div_i].outputs[0];

    // The affine tail: Mul by gamma, then Add of beta, each optional.
    auto per_row = [&](const std::string& c) {
      return per_normalized_constant(c, xt->shape, *axis);
    };
    std::string gamma, beta;
    auto affine = [&](const char* op, std::string& into) {
      std::optional<size_t> r = only_reader(output);
      if (!r || g_.nodes[*r].op_type != op) return;
      std::optional<std::string> c = other_constant(g_.nodes[*r], output, per_row);
      const TensorType* ot = g_.type_of(g_.nodes[*r].outputs[0]);
      if (!c || !ot || *ot != *xt) return;
      into = *c;
      m.intermediates.push_back(output);
      m.nodes.push_back(*r);
      output = g_.nodes[*r].outputs[0];
    };
    affine("Mul", gamma);
    affine("Add", beta);

    if (gamma.empty()) {  // LayerNormalization requires Scale: ones (dropped
                          // by the pipeline's DCE if an overlap skips this match)
      std::vector<int64_t> shape(xt->shape.begin() + *axis, xt->shape.end());
      gamma = unique_value_name(g_, output + "/ones");
      set_initializer(
          g_, gamma,
          float_tensor(shape, std::vector<float>(static_cast<size_t>(num_elements(shape)), 1.0f)));
    }
    Node& ln = m.replacement;
    ln.op_type = "LayerNormalization";
    ln.name = g_.nodes[*producer_index(mean)].name + "/LayerNormalization";
    ln.inputs = {x, gamma};
    if (!beta.empty()) ln.inputs.push_back(beta);
    ln.outputs = {output};
    ln.attrs["axis"] = *axis;
    ln.attrs["epsilon"] = *scalar_constant(*eps_v);
    return m;
  }
};

}  // namespace

int fuse_layer_norm(Graph& g) { return Matcher(g).run(); }

}  // namespace kiln::graph::passes
