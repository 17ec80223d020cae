#include "graph/passes/fuse_layer_norm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

class Matcher {
 public:
  explicit Matcher(Graph& g) : g_(g), consumers_(consumers_of(g)), producers_(producers_of(g)) {}

  int run() {
    std::vector<bool> removed(g_.nodes.size(), false);
    int count = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (removed[i] || g_.nodes[i].op_type != "Sub") continue;
      std::optional<Match> m = match(i);
      if (!m) continue;
      bool overlaps = false;
      for (size_t k : m->nodes) overlaps = overlaps || removed[k];
      if (overlaps) continue;
      rewrite(*m, removed);
      ++count;
    }
    erase_nodes(g_, removed);
    return count;
  }

 private:
  struct Match {
    std::vector<size_t> nodes;  // every matched node; the last one is replaced
    std::vector<std::string> intermediates;
    std::string x, gamma, beta, output;
    int64_t axis = 0;
    float eps = 0;
  };

  // The one node reading `v` (a node reading it twice counts once), when no
  // other node and no graph output reads it.
  std::optional<size_t> only_reader(const std::string& v) const {
    auto it = consumers_.find(v);
    if (it == consumers_.end() || is_graph_output(g_, v)) return std::nullopt;
    std::set<size_t> readers(it->second.begin(), it->second.end());
    if (readers.size() != 1) return std::nullopt;
    return *readers.begin();
  }

  const Node* producer(const std::string& v) const {
    auto it = producers_.find(v);
    return it == producers_.end() ? nullptr : &g_.nodes[it->second];
  }

  // A float32 constant of one element.
  std::optional<float> scalar_constant(const std::string& v) const {
    const Initializer* c = constant_of(g_, v);
    if (!c || c->type.dtype != "float32" || num_elements(c->type.shape) != 1) return std::nullopt;
    return c->as<float>()[0];
  }

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

  std::optional<Match> match(size_t sub_index) const {
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
    auto it = consumers_.find(d);
    if (it == consumers_.end() || is_graph_output(g_, d)) return {};
    std::set<size_t> readers(it->second.begin(), it->second.end());
    if (readers.size() != 2) return {};
    std::optional<size_t> sq_i, div_i;
    for (size_t r : readers) {
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

    Match m;
    m.x = x;
    m.axis = *axis;
    m.eps = *scalar_constant(*eps_v);
    m.nodes = {producers_.at(mean), sub_index, *sq_i, *m2_i, *add_i, *sqrt_i, *div_i};
    m.intermediates = {mean, d, sq, var, ve, sd};
    m.output = g_.nodes[*div_i].outputs[0];

    // The affine tail: Mul by gamma, then Add of beta, each optional.
    auto per_row = [&](const std::string& c) {
      return per_normalized_constant(c, xt->shape, m.axis);
    };
    auto affine = [&](const char* op, std::string& into) {
      std::optional<size_t> r = only_reader(m.output);
      if (!r || g_.nodes[*r].op_type != op) return;
      std::optional<std::string> c = other_constant(g_.nodes[*r], m.output, per_row);
      const TensorType* ot = g_.type_of(g_.nodes[*r].outputs[0]);
      if (!c || !ot || *ot != *xt) return;
      into = *c;
      m.intermediates.push_back(m.output);
      m.nodes.push_back(*r);
      m.output = g_.nodes[*r].outputs[0];
    };
    affine("Mul", m.gamma);
    affine("Add", m.beta);
    // The replacement takes the place of the last node: every input (x and
    // constants) is defined before it, every reader of its output after.
    std::sort(m.nodes.begin(), m.nodes.end());
    return m;
  }

  void rewrite(const Match& m, std::vector<bool>& removed) {
    const TensorType xt = *g_.type_of(m.x);
    std::string scale = m.gamma;
    if (scale.empty()) {  // LayerNormalization requires Scale: ones
      std::vector<int64_t> shape(xt.shape.begin() + m.axis, xt.shape.end());
      scale = unique_value_name(g_, m.output + "/ones");
      set_initializer(
          g_, scale,
          float_tensor(shape, std::vector<float>(static_cast<size_t>(num_elements(shape)), 1.0f)));
    }
    Node ln;
    ln.op_type = "LayerNormalization";
    ln.name = g_.nodes[m.nodes.front()].name + "/LayerNormalization";
    ln.inputs = {m.x, scale};
    if (!m.beta.empty()) ln.inputs.push_back(m.beta);
    ln.outputs = {m.output};
    ln.attrs["axis"] = m.axis;
    ln.attrs["epsilon"] = m.eps;
    for (size_t k : m.nodes) removed[k] = true;
    removed[m.nodes.back()] = false;
    g_.nodes[m.nodes.back()] = ln;
    for (const std::string& v : m.intermediates) g_.value_info.erase(v);
  }

  Graph& g_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::map<std::string, size_t> producers_;
};

}  // namespace

int fuse_layer_norm(Graph& g) { return Matcher(g).run(); }

}  // namespace kiln::graph::passes
