#include "frontend/op_support.h"

#include <algorithm>

namespace kiln::frontend {

// The operators torchvision classifiers, their segmentation heads and
// BERT-style encoders export at opsets 13-17 (issue 3, point 1). An operator
// joins this list when the graph passes and ops can run it.
const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"Abs",
                                  "Add",
                                  "AveragePool",
                                  "BatchNormalization",
                                  "Cast",
                                  "Clip",
                                  "Concat",
                                  "Constant",
                                  "ConstantOfShape",
                                  "Conv",
                                  "ConvTranspose",
                                  "Div",
                                  "Dropout",
                                  "Equal",
                                  "Erf",
                                  "Exp",
                                  "Expand",
                                  "Flatten",
                                  "Gather",
                                  "Gemm",
                                  "GlobalAveragePool",
                                  "HardSigmoid",
                                  "HardSwish",
                                  "Identity",
                                  "LayerNormalization",
                                  "LeakyRelu",
                                  "Log",
                                  "MatMul",
                                  "Max",
                                  "MaxPool",
                                  "Min",
                                  "Mul",
                                  "Neg",
                                  "Pad",
                                  "Pow",
                                  "Reciprocal",
                                  "ReduceMax",
                                  "ReduceMean",
                                  "ReduceSum",
                                  "Relu",
                                  "Reshape",
                                  "Resize",
                                  "Shape",
                                  "Sigmoid",
                                  "Slice",
                                  "Softmax",
                                  "Split",
                                  "Sqrt",
                                  "Squeeze",
                                  "Sub",
                                  "Tanh",
                                  "Transpose",
                                  "Unsqueeze",
                                  "Where"};
    std::sort(v.begin(), v.end());
    return v;
  }();
  return ops;
}

bool is_supported_op(const std::string& domain, const std::string& op_type) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  const auto& ops = supported_op_types();
  return std::binary_search(ops.begin(), ops.end(), op_type);
}

std::vector<std::string> unsupported_nodes(const graph::Graph& g) {
  std::vector<std::string> out;
  for (const graph::Node& n : g.nodes) {
    if (is_supported_op(n.domain, n.op_type)) continue;
    std::string type = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    out.push_back("'" + n.name + "' (" + type + ")");
  }
  return out;
}

}  // namespace kiln::frontend
