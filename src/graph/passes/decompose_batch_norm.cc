#include "graph/passes/decompose_batch_norm.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

struct ScaleShift {
  std::vector<float> scale, shift;
};

// The BN's per-channel scale and shift, or nullopt when it is not a
// rewritable inference BN (see the header).
std::optional<ScaleShift> scale_shift(const Graph& g, const Node& n) {
  if (n.op_type != "BatchNormalization" || !(n.domain.empty() || n.domain == "ai.onnx") ||
      n.inputs.size() != 5 || n.outputs.size() != 1 ||
      n.attr<int64_t>("training_mode").value_or(0) != 0)
    return std::nullopt;
  const TensorType* x = g.type_of(n.inputs[0]);
  if (!x || x->dtype != "float32" || x->shape.size() < 2 || x->shape[1] <= 0) return std::nullopt;
  const int64_t c = x->shape[1];
  std::vector<std::vector<float>> p;
  for (size_t i = 1; i < 5; ++i) {
    const Initializer* t = constant_of(g, n.inputs[i]);
    if (!t || t->type.dtype != "float32" || t->type.shape != std::vector<int64_t>{c})
      return std::nullopt;
    p.push_back(t->as<float>());
  }
  const double eps = n.attr<float>("epsilon").value_or(1e-5f);
  ScaleShift s{std::vector<float>(c), std::vector<float>(c)};
  for (int64_t k = 0; k < c; ++k) {
    // In double, as fold_batch_norm does: the same numbers whichever way a BN went.
    double scale = p[0][k] / std::sqrt(static_cast<double>(p[3][k]) + eps);
    s.scale[k] = static_cast<float>(scale);
    s.shift[k] = static_cast<float>(p[1][k] - p[2][k] * scale);
  }
  return s;
}

}  // namespace

int decompose_batch_norm(Graph& g) {
  int count = 0;
  std::vector<Node> out;
  out.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    std::optional<ScaleShift> s = scale_shift(g, n);
    if (!s) {
      out.push_back(std::move(n));
      continue;
    }
    const TensorType* x = g.type_of(n.inputs[0]);
    // [C, 1, ..., 1]: broadcasts along the channel axis (1) of x.
    std::vector<int64_t> shape(x->shape.size() - 1, 1);
    shape[0] = x->shape[1];
    const std::string scale = unique_value_name(g, n.name + "/scale");
    set_initializer(g, scale, float_tensor(shape, s->scale));
    const std::string shift = unique_value_name(g, n.name + "/shift");
    set_initializer(g, shift, float_tensor(shape, s->shift));
    const std::string scaled = unique_value_name(g, n.name + "/scaled");
    g.value_info[scaled] = *g.type_of(n.outputs[0]);

    Node mul;
    mul.op_type = "Mul";
    mul.name = n.name + "/mul";
    mul.inputs = {n.inputs[0], scale};
    mul.outputs = {scaled};
    Node add;
    add.op_type = "Add";
    add.name = n.name + "/add";
    add.inputs = {scaled, shift};
    add.outputs = {n.outputs[0]};
    out.push_back(std::move(mul));
    out.push_back(std::move(add));
    ++count;
  }
  g.nodes = std::move(out);
  return count;
}

}  // namespace kiln::graph::passes
