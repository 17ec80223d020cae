// Which ONNX operators kiln can compile. The importer checks a model against
// this list before anything else so that a user sees every operator kiln
// lacks in one message, not one per attempt.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::frontend {

// The supported op types of the default ONNX domain, sorted.
const std::vector<std::string>& supported_op_types();

bool is_supported_op(const std::string& domain, const std::string& op_type);

// One entry per node kiln cannot compile, in graph order, formatted as
// "'<node name>' (<op type>)" (op type prefixed by its domain when not ONNX's).
std::vector<std::string> unsupported_nodes(const graph::Graph& g);

}  // namespace kiln::frontend
