#include "graph/passes/instance_norm.h"

#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

// `value` ([C]) as [C, 1, ...] to broadcast over the channel axis of a
// rank-`rank` tensor: a reshaped copy of a constant, or a Reshape node.
std::string per_channel(Graph& g, const Node& n, const std::string& value, size_t rank,
                        std::vector<Node>& out) {
  const TensorType* t = g.type_of(value);
  std::vector<int64_t> shape(rank - 1, 1);
  shape[0] = t->shape.at(0);
  if (const Initializer* c = constant_of(g, value)) {
    Initializer r = *c;
    r.type.shape = shape;
    std::string name = unique_value_name(g, value + "/per_channel");
    set_initializer(g, name, std::move(r));
    return name;
  }
  std::string dims = unique_value_name(g, value + "/per_channel_shape");
  set_initializer(g, dims, int64_tensor(shape));
  Node reshape;
  reshape.op_type = "Reshape";
  reshape.name = n.name + "/" + value + "_per_channel";
  reshape.inputs = {value, dims};
  reshape.outputs = {unique_value_name(g, value + "/per_channel")};
  g.value_info[reshape.outputs[0]] = {t->dtype, shape};
  out.push_back(reshape);
  return reshape.outputs[0];
}

bool rewritable(const Graph& g, const Node& n) {
  if (n.op_type != "InstanceNormalization" || !(n.domain.empty() || n.domain == "ai.onnx") ||
      n.inputs.size() != 3 || n.outputs.size() != 1)
    return false;
  const TensorType* x = g.type_of(n.inputs[0]);
  const TensorType* s = g.type_of(n.inputs[1]);
  const TensorType* b = g.type_of(n.inputs[2]);
  return x && s && b && x->dtype == "float32" && x->shape.size() >= 3 && s->shape.size() == 1 &&
         b->shape == s->shape && s->shape[0] == x->shape[1];
}

}  // namespace

int instance_norm_as_layer_norm(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    if (!rewritable(g, n)) return false;
    const TensorType x = *g.type_of(n.inputs[0]);
    const std::string one = unique_value_name(g, n.name + "/one");
    set_initializer(g, one, float_tensor({1}, {1.0f}));
    Node ln;
    ln.op_type = "LayerNormalization";
    ln.name = n.name + "/normalize";
    ln.inputs = {n.inputs[0], one};
    ln.outputs = {unique_value_name(g, n.name + "/normalized")};
    ln.attrs["axis"] = int64_t{2};
    ln.attrs["epsilon"] = n.attr<float>("epsilon").value_or(1e-5f);
    g.value_info[ln.outputs[0]] = x;
    out.push_back(ln);
    const std::string scale = per_channel(g, n, n.inputs[1], x.shape.size(), out);
    const std::string bias = per_channel(g, n, n.inputs[2], x.shape.size(), out);
    Node mul;
    mul.op_type = "Mul";
    mul.name = n.name + "/scale";
    mul.inputs = {ln.outputs[0], scale};
    mul.outputs = {unique_value_name(g, n.name + "/scaled")};
    g.value_info[mul.outputs[0]] = x;
    out.push_back(mul);
    Node add;
    add.op_type = "Add";
    add.name = n.name + "/shift";
    add.inputs = {mul.outputs[0], bias};
    add.outputs = {n.outputs[0]};
    out.push_back(add);
    return true;
  });
}

}  // namespace kiln::graph::passes
