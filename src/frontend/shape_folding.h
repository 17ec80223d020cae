// Folding of small constant subgraphs inside the ONNX model, between rounds of
// ONNX shape inference. Private to src/frontend.
//
// ONNX 1.12's data propagation follows Shape -> Gather/Add/Mul/Concat/... but
// not every operator (Div, for one): torch.chunk exports its split points as
// Shape -> Gather -> Add -> Div -> Mul feeding Slice, and the Slice output is
// then left without a shape. Evaluating those small constant nodes with the
// registry's reference implementations turns the split points into
// initializers, from which the next inference round gets static shapes.
#pragma once

#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::frontend {

// Node outputs that have no static tensor type after inference.
std::vector<std::string> untyped_outputs(const onnx::ModelProto& model);

// Replaces every default-domain node whose inputs are all small constants
// (initializers of at most kMaxFoldElements elements, or, for Shape, a value
// with a static type) by initializers holding its outputs, evaluated with the
// operator registry. `names` stays parallel to the graph's nodes. Returns how
// many nodes were folded. Errors name the node.
int fold_small_constants(onnx::ModelProto* model, std::vector<std::string>* names);

// ONNX 1.12 leaves OneHot's depth axis symbolic even when depth is an
// initializer, and gives MaxUnpool with an initializer output_shape only a
// rank; kiln needs them static. Gives every such OneHot output whose indices
// have a static shape, and every such MaxUnpool output whose X has one, its
// full type (a value_info, or the graph output's type), for the next
// inference round to propagate. Returns how many outputs it typed. Errors
// name the node.
int complete_constant_shaped_types(onnx::ModelProto* model, const std::vector<std::string>& names);

inline constexpr int64_t kMaxFoldElements = 4096;

}  // namespace kiln::frontend
