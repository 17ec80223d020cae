// If nodes whose condition is known at build time. Private to src/frontend.
//
// Exporters guard shape cases with If (torchvision's detection models test
// whether any box is left; scripted modules test a dimension that
// --input-shapes then fixes). Once folding has made the condition a
// constant, the If is replaced by the nodes of the branch it takes, which then
// compile, fuse and tune with the rest of the graph instead of running in the
// executor's host region.
#pragma once

#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::frontend {

// Whether the graph has a top-level If node.
bool has_if(const onnx::ModelProto& model);

// Replaces every top-level If whose condition is a one-element initializer by
// its taken branch (its initializers and Constant nodes become initializers,
// its outputs reach the If's outputs through Identity nodes). `names` stays
// parallel to the graph's nodes; the branch's nodes are named
// "<If's name>/<node's name>". Returns how many If nodes it replaced.
int inline_constant_branches(onnx::ModelProto* model, std::vector<std::string>* names);

}  // namespace kiln::frontend
