// Splitting off the run-time shaped part of a model. Private to src/frontend.
//
// After shape inference and constant folding, a value still without a static
// shape is one whose shape depends on data: NonZero's count, TopK with a k
// fed at run time, a Reshape whose target shape is a graph input. The nodes
// that produce such values, and every node that reads them, leave the ONNX
// graph for graph::HostRegion; the executor runs them after the kernels
// (runtime/host_op.h). The rest of the model is compiled as before: what is
// static stays static and fused.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln::frontend {

// The operators the executor runs on run-time shaped tensors (the same list
// as runtime::host_op_names(); a test keeps the two equal).
const std::set<std::string>& host_operators();

// Moves the nodes that produce or read run-time shaped values out of
// `model`'s graph into `*host`, in order; `names` stays parallel to the
// graph's nodes. The static values those nodes read become graph outputs
// (initializers are copied into host->constants), and host->outputs keeps the
// model's output order. A node that reads a run-time shaped value but is not
// a host operator is an ImportError naming it, its operator, the value and
// the node that made it. Does nothing when every used value is typed.
void split_host_region(onnx::ModelProto* model, std::vector<std::string>* names,
                       graph::HostRegion* host);

}  // namespace kiln::frontend
