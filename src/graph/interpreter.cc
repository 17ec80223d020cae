#include "graph/interpreter.h"

#include <set>
#include <stdexcept>
#include <vector>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::graph {
namespace {

std::string type_str(const TensorType& t) { return t.dtype + shape_str(t.shape); }

std::string node_str(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

void check_inputs(const Graph& g, const std::map<std::string, Initializer>& inputs) {
  std::set<std::string> expected;
  for (const ValueInfo& in : g.inputs) {
    expected.insert(in.name);
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      throw std::runtime_error("run_graph: no value for input '" + in.name + "'");
    const Initializer& v = it->second;
    if (!(v.type == in.type))
      throw std::runtime_error("run_graph: input '" + in.name + "' is " + type_str(v.type) +
                               ", the graph expects " + type_str(in.type));
    if (v.data.size() != static_cast<size_t>(v.type.num_elements()) * dtype_size(v.type.dtype))
      throw std::runtime_error("run_graph: input '" + in.name + "' holds " +
                               std::to_string(v.data.size()) + " bytes for " + type_str(v.type));
  }
  for (const auto& [name, v] : inputs)
    if (!expected.count(name))
      throw std::runtime_error("run_graph: '" + name + "' is not an input of the graph");
}

// Index of the last node reading each value; graph outputs live to the end.
std::map<std::string, size_t> last_uses(const Graph& g) {
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) last[in] = i;
  for (const std::string& out : g.outputs) last[out] = g.nodes.size();
  return last;
}

}  // namespace

std::map<std::string, Initializer> run_graph(const Graph& g,
                                             const std::map<std::string, Initializer>& inputs) {
  check_inputs(g, inputs);
  // Graph inputs and initializers are read in place; node results are owned here.
  std::map<std::string, const Initializer*> values;
  for (const auto& [name, v] : inputs) values[name] = &v;
  for (const auto& [name, v] : g.initializers) values[name] = &v;
  std::map<std::string, Initializer> computed;
  const std::map<std::string, size_t> last = last_uses(g);

  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const OpDef* def = find_op(n.op_type);
    if (!def || !def->evaluate)
      throw std::runtime_error(node_str(n) + ": kiln cannot evaluate operator " + n.op_type);
    std::vector<const Initializer*> args;
    for (const std::string& in : n.inputs) {
      if (in.empty()) {
        args.push_back(nullptr);
        continue;
      }
      auto it = values.find(in);
      if (it == values.end())
        throw std::runtime_error(node_str(n) + ": input '" + in + "' has no value yet");
      args.push_back(it->second);
    }
    std::vector<Initializer> results;
    try {
      results = def->evaluate(n, args);
    } catch (const std::exception& e) {
      throw std::runtime_error(op_util::node_error_once(n, e.what()));
    }
    if (results.size() < n.outputs.size())
      throw std::runtime_error(node_str(n) + ": evaluate returned " +
                               std::to_string(results.size()) + " results for " +
                               std::to_string(n.outputs.size()) + " outputs");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& out = n.outputs[k];
      if (out.empty()) continue;
      if (const TensorType* t = g.type_of(out); t && !(*t == results[k].type))
        throw std::runtime_error(node_str(n) + ": output '" + out + "' evaluates to " +
                                 type_str(results[k].type) + " but value_info says " +
                                 type_str(*t));
      Initializer& slot = computed[out] = std::move(results[k]);
      values[out] = &slot;
    }
    // Free what no later node reads (std::map keeps the other pointers valid).
    for (const std::string& in : n.inputs) {
      auto l = last.find(in);
      if (in.empty() || l == last.end() || l->second != i || !computed.count(in)) continue;
      values.erase(in);
      computed.erase(in);
    }
    for (const std::string& out : n.outputs)
      if (!out.empty() && !last.count(out)) {
        values.erase(out);
        computed.erase(out);
      }
  }

  std::map<std::string, Initializer> outputs;
  for (const std::string& out : g.outputs) {
    auto it = values.find(out);
    if (it == values.end())
      throw std::runtime_error("run_graph: graph output '" + out + "' is never produced");
    outputs[out] = *it->second;
  }
  return outputs;
}

}  // namespace kiln::graph
