// The shape and dtype rules of the quantized operators (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
// ConvInteger, QLinearConv; graph/ops/quantize.cc), for the importer, which
// checks them on every such node before anything runs, and for evaluate().
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

bool is_quantized_op(const std::string& op_type);

// The output types of a quantized node from its input types (nullptr for an
// omitted input). Throws OpError naming the node for a missing scale or zero
// point, a parameter of the wrong shape (neither per tensor nor one value per
// channel of the quantized axis), or an unsupported dtype.
std::vector<TensorType> quantized_output_types(const Node& node,
                                               const std::vector<const TensorType*>& inputs);

}  // namespace kiln::graph
