#include "graph/passes/lift_1d_windows.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

using Ints = std::vector<int64_t>;

// [N, C, L] -> [N, C, 1, L].
Ints lifted_shape(const Ints& s) { return {s[0], s[1], 1, s[2]}; }

bool is_window_op(const Node& n) {
  static const std::vector<std::string> ops = {"Conv",         "ConvTranspose", "MaxPool",
                                               "AveragePool",  "LpPool",        "GlobalAveragePool",
                                               "GlobalMaxPool"};
  return (n.domain.empty() || n.domain == "ai.onnx") &&
         std::find(ops.begin(), ops.end(), n.op_type) != ops.end();
}

class Lifter {
 public:
  explicit Lifter(Graph& g) : g_(g) {}

  int run() {
    std::vector<Node> nodes = std::move(g_.nodes);
    g_.nodes.clear();
    for (Node& n : nodes) {
      if (lift(n)) {
        ++lifted_;
      } else {
        for (std::string& in : n.inputs) in = flat(in);
        g_.nodes.push_back(std::move(n));
      }
    }
    for (std::string& out : g_.outputs) flat(out);
    return lifted_;
  }

 private:
  const TensorType* type(const std::string& v) const { return v.empty() ? nullptr : g_.type_of(v); }

  bool is_3d_float(const std::string& v) const {
    const TensorType* t = type(v);
    return t && t->dtype == "float32" && t->shape.size() == 3;
  }

  std::string reshape(const std::string& from, const Ints& shape, const std::string& to) {
    Node r;
    r.op_type = "Reshape";
    r.name = unique_value_name(g_, to + "/reshape");
    std::string s = unique_value_name(g_, to + "/shape");
    set_initializer(g_, s, int64_tensor(shape));
    r.inputs = {from, s};
    r.outputs = {to};
    g_.value_info[to] = {"float32", shape};
    g_.nodes.push_back(std::move(r));
    return to;
  }

  // The 4-D twin of 3-D value v, made by a Reshape when v has none yet.
  std::string twin(const std::string& v) {
    if (auto it = twins_.find(v); it != twins_.end()) return it->second;
    return twins_[v] = reshape(v, lifted_shape(type(v)->shape), unique_value_name(g_, v + "/2d"));
  }

  // Value v as its original 3-D self: a lifted node wrote only its twin, so
  // the first reader that needs it gets a Reshape back.
  std::string flat(const std::string& v) {
    auto it = unflattened_.find(v);
    if (it == unflattened_.end()) return v;
    reshape(it->second, type(v)->shape, v);
    unflattened_.erase(it);
    return v;
  }

  // A constant input of an elementwise op over 3-D tensors, as the 4-D op
  // needs it: right-aligned to [N, C, L], then [., ., 1, .].
  std::optional<std::string> lifted_operand(const std::string& v) {
    if (twins_.count(v) || unflattened_.count(v)) return twin_of_lifted(v);
    const Initializer* c = constant_of(g_, v);
    if (!c || c->type.shape.size() > 3) return std::nullopt;
    if (c->type.shape.size() <= 1 && (c->type.shape.empty() || c->type.shape[0] == 1)) return v;
    Ints s = c->type.shape;
    s.insert(s.begin(), 3 - s.size(), 1);
    Initializer t = *c;
    t.type.shape = {s[0], s[1], 1, s[2]};
    std::string name = unique_value_name(g_, v + "/2d");
    set_initializer(g_, name, std::move(t));
    return name;
  }

  std::string twin_of_lifted(const std::string& v) { return twins_.at(v); }

  // Outputs of a lifted node: each gets a 4-D twin; the 3-D name waits for a reader.
  void lift_outputs(Node& n) {
    for (std::string& out : n.outputs) {
      const TensorType* t = type(out);
      std::string name = unique_value_name(g_, out + "/2d");
      Ints shape = t->shape.size() == 3 ? lifted_shape(t->shape) : t->shape;
      g_.value_info[name] = {t->dtype, shape};
      twins_[out] = name;
      unflattened_[out] = name;
      out = name;
    }
  }

  bool lift(Node& n) {
    if (n.outputs.size() != 1 || !is_3d_float(n.outputs[0])) return false;
    if (is_window_op(n)) return lift_window(n);
    if (n.op_type == "BatchNormalization") return lift_first_input(n);
    const OpDef* def = find_op(n.op_type);
    if (!def || def->pattern != OpPattern::kBroadcast || n.op_type == "BatchNormalization")
      return false;
    return lift_elementwise(n, *def);
  }

  bool lift_window(Node& n) {
    if (n.inputs.empty() || !is_3d_float(n.inputs[0])) return false;
    const bool weighted = n.op_type == "Conv" || n.op_type == "ConvTranspose";
    const Initializer* w = weighted && n.inputs.size() > 1 ? constant_of(g_, n.inputs[1]) : nullptr;
    // A weight computed in the graph (ONNX's node tests feed it as an
    // input) gets its 4-D twin from a Reshape, as a data input does.
    const bool computed_weight = weighted && !w && n.inputs.size() > 1 && is_3d_float(n.inputs[1]);
    if (weighted && !computed_weight && (!w || w->type.shape.size() != 3)) return false;
    n.inputs[0] = twin(n.inputs[0]);
    if (computed_weight) n.inputs[1] = twin(n.inputs[1]);
    if (w) {
      Initializer t = *w;
      t.type.shape = lifted_shape(w->type.shape);
      std::string name = unique_value_name(g_, n.inputs[1] + "/2d");
      set_initializer(g_, name, std::move(t));
      n.inputs[1] = name;
    }
    for (size_t i = 2; i < n.inputs.size(); ++i) n.inputs[i] = flat(n.inputs[i]);
    op_util::lift_1d_window_attrs(n);
    lift_outputs(n);
    g_.nodes.push_back(std::move(n));
    return true;
  }

  // BatchNormalization: per channel along axis 1 at any rank.
  bool lift_first_input(Node& n) {
    if (n.inputs.empty() || !twins_.count(n.inputs[0])) return false;
    n.inputs[0] = twin_of_lifted(n.inputs[0]);
    for (size_t i = 1; i < n.inputs.size(); ++i) n.inputs[i] = flat(n.inputs[i]);
    lift_outputs(n);
    g_.nodes.push_back(std::move(n));
    return true;
  }

  // An elementwise op that reads at least one lifted value, and otherwise
  // only constants (and the constant inputs its definition names).
  bool lift_elementwise(Node& n, const OpDef& def) {
    bool reads_lifted = false;
    std::vector<std::string> inputs = n.inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].empty()) continue;
      const bool fixed = std::find(def.constant_inputs.begin(), def.constant_inputs.end(),
                                   static_cast<int>(i)) != def.constant_inputs.end();
      if (fixed) continue;
      reads_lifted = reads_lifted || twins_.count(inputs[i]);
      std::optional<std::string> v = lifted_operand(inputs[i]);
      if (!v) return false;
      inputs[i] = *v;
    }
    if (!reads_lifted) return false;
    n.inputs = inputs;
    lift_outputs(n);
    g_.nodes.push_back(std::move(n));
    return true;
  }

  Graph& g_;
  int lifted_ = 0;
  std::map<std::string, std::string> twins_;        // 3-D value -> its 4-D twin
  std::map<std::string, std::string> unflattened_;  // lifted values not yet rebuilt in 3-D
};

}  // namespace

int lift_1d_windows(Graph& g) { return Lifter(g).run(); }

}  // namespace kiln::graph::passes
