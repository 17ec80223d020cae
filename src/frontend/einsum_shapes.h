// ONNX 1.12's shape inference gives an Einsum's output its rank but not its
// extents; kiln's own parser of the equation (graph/ops/einsum.h) does.
#pragma once

#include <onnx/onnx_pb.h>

namespace kiln::frontend {

// Writes the full output type of every Einsum whose operands' shapes are
// known and whose output's are not into the graph's value_info. Returns the
// number of outputs typed (0 when there is nothing more to add).
int type_einsum_outputs(onnx::ModelProto* model);

}  // namespace kiln::frontend
