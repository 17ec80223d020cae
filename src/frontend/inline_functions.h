// Operators that ONNX itself defines as a function of other operators
// (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, MeanVarianceNormalization,
// the window functions, CastLike, Celu, ...) are expanded into that body where
// kiln has no definition of its own: the schema's body is the ONNX
// specification of the operator, so the expansion is exact by definition, and
// the expanded nodes then go through the graph passes and fuse like any other.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace kiln::frontend {

// Expands, in place and repeatedly (a body may use another function), every
// default-domain node of the main graph whose operator kiln does not support
// and whose ONNX schema (at the model's opset) has a function body or a
// context-dependent body builder. Values inside a body are renamed
// "<node>/<value>"; the expanded nodes are named "<node>/<body node>", so an
// error inside names the operator the user wrote. Returns the number of
// nodes expanded. Throws ImportError when a body cannot be built for a node.
int inline_onnx_functions(onnx::ModelProto* model);

}  // namespace kiln::frontend
