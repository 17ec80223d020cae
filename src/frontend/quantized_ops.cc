#include "frontend/quantized_ops.h"

#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/ops/quantize.h"

namespace kiln::frontend {

void check_quantized_nodes(const graph::Graph& g, int64_t opset) {
  for (const graph::Node& n : g.nodes) {
    if (!n.domain.empty() || !graph::is_quantized_op(n.op_type)) continue;
    std::vector<const graph::TensorType*> types;
    for (const std::string& in : n.inputs) types.push_back(in.empty() ? nullptr : g.type_of(in));
    const std::string prefix = "node '" + n.name + "' (" + n.op_type + "): ";
    try {
      graph::quantized_output_types(n, types);
    } catch (const graph::OpError& e) {
      throw ImportError(e.what());
    }
    bool q_or_dq = n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear";
    if (q_or_dq && opset < 13 && types.size() > 1 && types[1] && types[1]->num_elements() != 1)
      throw ImportError(prefix + "a per-axis scale " + graph::shape_str(types[1]->shape) +
                        " needs opset 13 (opset " + std::to_string(opset) +
                        "'s operator takes one scale per tensor)");
  }
}

}  // namespace kiln::frontend
