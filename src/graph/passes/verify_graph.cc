#include "graph/passes/verify_graph.h"

#include <set>
#include <stdexcept>

namespace kiln::graph::passes {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("invalid graph: " + what);
}

void define(std::set<std::string>& defined, const std::string& value, const std::string& by) {
  if (!defined.insert(value).second) fail("value '" + value + "' is defined twice (" + by + ")");
}

void check_type(const Graph& g, const std::string& value, const TensorType* expected,
                const std::string& by) {
  const TensorType* t = g.type_of(value);
  if (!t) fail("value '" + value + "' (" + by + ") has no value_info");
  if (expected && !(*t == *expected))
    fail("value '" + value + "' (" + by + ") has value_info " + t->dtype + shape_str(t->shape) +
         " but is " + expected->dtype + shape_str(expected->shape));
}

}  // namespace

void verify_graph(const Graph& g) {
  std::set<std::string> defined;
  for (const ValueInfo& in : g.inputs) {
    define(defined, in.name, "graph input");
    check_type(g, in.name, &in.type, "graph input");
  }
  for (const auto& [name, init] : g.initializers) {
    define(defined, name, "initializer");
    check_type(g, name, &init.type, "initializer");
    if (init.data.size() !=
        static_cast<size_t>(init.type.num_elements()) * dtype_size(init.type.dtype))
      fail("initializer '" + name + "' holds " + std::to_string(init.data.size()) + " bytes for " +
           init.type.dtype + shape_str(init.type.shape));
  }
  std::set<std::string> node_names;
  for (const Node& n : g.nodes) {
    std::string who = "node '" + n.name + "' (" + n.op_type + ")";
    if (!node_names.insert(n.name).second) fail("two nodes are named '" + n.name + "'");
    for (const std::string& in : n.inputs)
      if (!in.empty() && !defined.count(in))
        fail(who + " reads '" + in + "' before any node produces it");
    for (const std::string& out : n.outputs) {
      if (out.empty()) continue;
      define(defined, out, who);
      check_type(g, out, nullptr, who);
    }
  }
  for (const std::string& out : g.outputs)
    if (!defined.count(out)) fail("graph output '" + out + "' is never produced");
}

}  // namespace kiln::graph::passes
