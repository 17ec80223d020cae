#include "graph/passes/simplify.h"

#include <map>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

bool same_type(const Graph& g, const std::string& a, const std::string& b) {
  const TensorType* ta = g.type_of(a);
  const TensorType* tb = g.type_of(b);
  return ta && tb && *ta == *tb;
}

// An output other than the first that some node reads or the graph returns.
bool extra_output_used(const Graph& g, const Node& n,
                       const std::map<std::string, std::vector<size_t>>& consumers) {
  for (size_t k = 1; k < n.outputs.size(); ++k) {
    const std::string& o = n.outputs[k];
    if (!o.empty() && (consumers.count(o) || is_graph_output(g, o))) return true;
  }
  return false;
}

// Dropout is the identity unless training_mode (input 2) is set or unknown,
// and in training mode too with a constant ratio (input 1) of 0: torchvision's
// Swin calls F.dropout(attn, p=0.0) without training=, which exports as
// training_mode=true.
bool dropout_is_identity(const Graph& g, const Node& n) {
  if (n.inputs.size() < 3 || n.inputs[2].empty()) return true;
  const Initializer* mode = constant_of(g, n.inputs[2]);
  if (!mode || mode->type.dtype != "bool" || mode->data.size() != 1) return false;
  if (mode->data[0] == 0) return true;
  const Initializer* ratio = n.inputs[1].empty() ? nullptr : constant_of(g, n.inputs[1]);
  if (!ratio || ratio->type.num_elements() != 1) return false;
  if (ratio->type.dtype == "float32") return ratio->as<float>()[0] == 0.0f;
  if (ratio->type.dtype == "float64") return ratio->as<double>()[0] == 0.0;
  return false;
}

bool is_identity_perm(const Node& n, const Graph& g) {
  const TensorType* t = g.type_of(n.inputs[0]);
  if (!t) return false;
  auto perm = n.attr<std::vector<int64_t>>("perm");
  if (!perm) return t->shape.size() <= 1;  // the default perm reverses the axes
  for (size_t i = 0; i < perm->size(); ++i)
    if ((*perm)[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Pad by nothing: every pad a constant 0 (input 1 from opset 11, the `pads`
// attribute before), whatever the mode and axes. PyTorch exports DenseNet's
// transition AvgPool2d as such a Pad before the AveragePool; left in, the Pad
// kept the pool off the blocked layout and every Concat of the next dense block
// ran in NCHW with a transform per reader (1 GB/s kernels, 45 % of the model).
bool pad_is_identity(const Graph& g, const Node& n) {
  std::vector<int64_t> pads;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const Initializer* c = constant_of(g, n.inputs[1]);
    if (!c || c->type.dtype != "int64") return false;
    pads = c->as<int64_t>();
  } else if (auto attr = n.attr<std::vector<int64_t>>("pads")) {
    pads = *attr;
  }
  for (int64_t p : pads)
    if (p != 0) return false;
  return true;
}

// True when `n` passes its first input through unchanged as its first output.
bool is_noop(const Graph& g, const Node& n,
             const std::map<std::string, std::vector<size_t>>& consumers) {
  if (!(n.domain.empty() || n.domain == "ai.onnx")) return false;
  if (n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty() || n.outputs[0].empty())
    return false;
  if (extra_output_used(g, n, consumers)) return false;
  const std::string& op = n.op_type;
  const bool types_equal = same_type(g, n.inputs[0], n.outputs[0]);
  if (op == "Identity") return true;
  if (op == "Dropout") return dropout_is_identity(g, n) && types_equal;
  if (op == "Cast" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Expand")
    return types_equal;
  if (op == "Transpose") return types_equal && is_identity_perm(n, g);
  if (op == "Concat") return n.inputs.size() == 1 && types_equal;
  if (op == "Pad") return types_equal && pad_is_identity(g, n);
  return false;
}

void rename_everywhere(Graph& g, const std::string& from, const std::string& to) {
  for (Node& n : g.nodes) {
    for (std::string& in : n.inputs)
      if (in == from) in = to;
    for (std::string& out : n.outputs)
      if (out == from) out = to;
  }
}

}  // namespace

int simplify(Graph& g) {
  const auto consumers = consumers_of(g);
  const auto producers = producers_of(g);
  std::vector<bool> removed(g.nodes.size(), false);
  std::map<std::string, std::string> replaced;  // removed output -> the value readers now read
  int count = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (std::string& in : n.inputs)
      if (auto it = replaced.find(in); it != replaced.end()) in = it->second;
    if (!is_noop(g, n, consumers)) continue;
    const std::string x = n.inputs[0];
    const std::string y = n.outputs[0];
    if (!is_graph_output(g, y)) {
      replaced[y] = x;
      g.value_info.erase(y);
    } else if (producers.count(x) && !is_graph_output(g, x)) {
      // y must keep its name: x's producer now writes y directly.
      rename_everywhere(g, x, y);
      for (auto& [from, to] : replaced)
        if (to == x) to = y;
      g.value_info.erase(x);
    } else {
      if (n.op_type != "Identity") {  // keep a plain copy under the output's name
        n.op_type = "Identity";
        n.inputs = {x};
        n.outputs = {y};
        n.attrs.clear();
        ++count;
      }
      continue;
    }
    for (size_t k = 1; k < n.outputs.size(); ++k) g.value_info.erase(n.outputs[k]);
    removed[i] = true;
    ++count;
  }
  erase_nodes(g, removed);
  return count;
}

}  // namespace kiln::graph::passes
