#include "graph/passes/div_by_constant.h"

#include <cmath>
#include <string>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

int div_by_constant(Graph& g) {
  int count = 0;
  for (Node& n : g.nodes) {
    if (n.op_type != "Div" || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const TensorType* xt = g.type_of(n.inputs[0]);
    const Initializer* c = constant_of(g, n.inputs[1]);
    if (!xt || xt->dtype != "float32" || !c || c->type.dtype != "float32" ||
        num_elements(c->type.shape) != 1)
      continue;
    // The divisor's shape may broadcast x to more dims: keep it.
    const float v = c->as<float>()[0];
    const float r = 1.0f / v;
    if (!std::isfinite(v) || v == 0 || !std::isnormal(r)) continue;
    const std::string name = unique_value_name(g, n.inputs[1] + "/reciprocal");
    set_initializer(g, name, float_tensor(c->type.shape, {r}));
    n.op_type = "Mul";
    n.inputs[1] = name;
    ++count;
  }
  return count;
}

}  // namespace kiln::graph::passes
