#include "graph/passes/fold_constants.h"

#include <optional>
#include <stdexcept>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {
namespace {

std::string node_str(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

// The evaluate arguments of a foldable node, or nullopt when some input is not
// constant. An input the operator reads only the type of (OpDef's
// type_only_inputs: Shape's, Size's) gets an Initializer with that type and
// no data.
std::optional<std::vector<const Initializer*>> constant_args(const Graph& g, const Node& n,
                                                             const OpDef& def,
                                                             std::vector<Initializer>& shape_only) {
  std::vector<const Initializer*> args;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const std::string& in = n.inputs[i];
    if (in.empty()) {
      args.push_back(nullptr);
      continue;
    }
    if (is_type_only_input(def, i)) {
      const TensorType* t = g.type_of(in);
      if (!t) return std::nullopt;
      shape_only.push_back(Initializer{*t, {}});
      args.push_back(&shape_only.back());
      continue;
    }
    const Initializer* c = constant_of(g, in);
    if (!c) return std::nullopt;
    args.push_back(c);
  }
  return args;
}

// True when folding `n` would turn a small constant into a large one that a
// kernel could as well broadcast at run time.
bool too_large_to_fold(const Graph& g, const Node& n, const OpDef& def,
                       const std::vector<const Initializer*>& args, int64_t limit) {
  if (!def.compute) return false;
  int64_t in_elements = 0;
  for (const Initializer* a : args)
    if (a && !a->data.empty()) in_elements += a->type.num_elements();  // not type-only ones
  for (const std::string& out : n.outputs) {
    const TensorType* t = out.empty() ? nullptr : g.type_of(out);
    if (t && t->num_elements() > limit && t->num_elements() > in_elements) return true;
  }
  return false;
}

}  // namespace

FoldConstantsStats fold_constants(Graph& g, const FoldConstantsOptions& options) {
  FoldConstantsStats stats;
  std::vector<bool> removed(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const OpDef* def = n.domain.empty() || n.domain == "ai.onnx" ? find_op(n.op_type) : nullptr;
    if (!def || !def->evaluate) continue;
    std::vector<Initializer> shape_only;
    shape_only.reserve(n.inputs.size());  // args point into it
    auto args = constant_args(g, n, *def, shape_only);
    if (!args) continue;
    if (too_large_to_fold(g, n, *def, *args, options.max_broadcast_elements)) {
      ++stats.skipped_too_large;
      continue;
    }
    std::vector<Initializer> results;
    try {
      results = def->evaluate(n, *args);
    } catch (const std::exception& e) {
      throw std::runtime_error("fold_constants: " + op_util::node_error_once(n, e.what()));
    }
    if (results.size() < n.outputs.size())
      throw std::runtime_error("fold_constants: " + node_str(n) + ": evaluate returned " +
                               std::to_string(results.size()) + " results for " +
                               std::to_string(n.outputs.size()) + " outputs");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& out = n.outputs[k];
      if (out.empty()) continue;
      const TensorType* t = g.type_of(out);
      if (t && !(*t == results[k].type))
        throw std::runtime_error("fold_constants: " + node_str(n) + ": output '" + out +
                                 "' evaluates to " + results[k].type.dtype +
                                 shape_str(results[k].type.shape) + " but value_info says " +
                                 t->dtype + shape_str(t->shape));
      set_initializer(g, out, std::move(results[k]));
    }
    removed[i] = true;
    ++stats.folded;
  }
  erase_nodes(g, removed);
  return stats;
}

}  // namespace kiln::graph::passes
