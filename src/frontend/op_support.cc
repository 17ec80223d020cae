#include "frontend/op_support.h"

#include <algorithm>

#include "frontend/host_region.h"
#include "graph/op_registry.h"

namespace kiln::frontend {

namespace {

// Operators that kiln's own passes insert (kiln.LayoutTransform,
// kiln.Template); a model never names them.
bool is_internal(const std::string& op_type) { return op_type.rfind("kiln.", 0) == 0; }

}  // namespace

// Every operator of the graph registry (graph/op_registry.h) that a model may
// use, so that this list cannot drift from what the passes and ops can run;
// plus Constant, which the importer turns into an initializer before the
// graph exists, and the operators that run only on run-time shaped tensors
// (NonZero, Unique, ...: host_region.h).
const std::vector<std::string>& supported_op_types() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"Constant"};
    for (std::string& op : graph::registered_op_types())
      if (!is_internal(op)) v.push_back(std::move(op));
    for (const std::string& op : host_operators())
      if (std::find(v.begin(), v.end(), op) == v.end()) v.push_back(op);
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
