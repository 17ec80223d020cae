// The importer's checks of quantized operators (QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
// ConvInteger, QLinearConv), after shape inference: ONNX's checker and shape
// inference leave a scale of the wrong length or a zero point of another
// shape alone, and the build would otherwise meet them far from the model.
// Private to src/frontend.
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace kiln::frontend {

// Checks every quantized node's input types with the graph's rules
// (graph/ops/quantize.h) and, before opset 13 (QuantizeLinear-10 and
// DequantizeLinear-10 have no `axis`), that its scales are per tensor.
// Throws ImportError naming the first offending node.
void check_quantized_nodes(const graph::Graph& g, int64_t opset);

}  // namespace kiln::frontend
