#include "driver/build_module.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "driver/lower_group.h"
#include "graph/passes/alter_layout.h"
#include "graph/passes/fuse_ops.h"
#include "graph/passes/memory_plan.h"
#include "graph/passes/pipeline.h"

namespace kiln::driver {
namespace {

using graph::Graph;
using nlohmann::json;

// The executor's view: every value that crosses a kernel boundary, the
// graph's inputs and outputs, and the weights.
struct TensorTable {
  std::vector<std::string> names;
  std::map<std::string, size_t> index;

  size_t add(const std::string& value) {
    auto it = index.find(value);
    if (it != index.end()) return it->second;
    index[value] = names.size();
    names.push_back(value);
    return names.size() - 1;
  }
};

const graph::TensorType& type_of(const Graph& g, const std::string& value) {
  const graph::TensorType* t = g.type_of(value);
  if (!t) throw std::runtime_error("value '" + value + "' has no inferred type");
  return *t;
}

size_t bytes_of(const Graph& g, const std::string& value) {
  const graph::TensorType& t = type_of(g, value);
  return static_cast<size_t>(t.num_elements()) * graph::dtype_size(t.dtype);
}

// Storage for every tensor: graph inputs, outputs and weights own theirs;
// intermediates share storage once their readers have run.
graph::passes::MemoryPlan plan_storage(const Graph& g, const std::vector<GroupKernel>& kernels,
                                       const TensorTable& table) {
  graph::passes::MemoryPlanRequest req;
  for (const GroupKernel& k : kernels) {
    graph::passes::PlanStep step;
    for (const std::string& a : k.args) {
      bool produced = std::find(k.outputs.begin(), k.outputs.end(), a) != k.outputs.end();
      (produced ? step.outputs : step.inputs).push_back(a);
    }
    req.steps.push_back(std::move(step));
  }
  for (const std::string& name : table.names) {
    req.sizes[name] = bytes_of(g, name);
    if (g.initializers.count(name)) req.external.insert(name);
  }
  for (const auto& in : g.inputs) req.external.insert(in.name);
  for (const auto& out : g.outputs) req.external.insert(out);
  return graph::passes::plan_memory(req);
}

json describe(const Graph& g, const std::vector<GroupKernel>& kernels,
              const std::vector<std::string>& labels, const TensorTable& table,
              const std::vector<std::pair<std::string, std::string>>& params,
              const codegen::Target& target) {
  json j;
  j["format_version"] = 1;
  j["kiln_version"] = "0.1.0";
  j["target"] = target.str();
  graph::passes::MemoryPlan plan = plan_storage(g, kernels, table);
  j["storages"] = json::array();
  for (const auto& s : plan.storages)
    j["storages"].push_back({{"bytes", std::max<size_t>(s.size, 1)}});
  j["tensors"] = json::array();
  for (const std::string& name : table.names) {
    const graph::TensorType& t = type_of(g, name);
    const graph::passes::StorageSlot& slot = plan.values.at(name);
    j["tensors"].push_back({{"name", name},
                            {"dtype", t.dtype},
                            {"shape", t.shape},
                            {"storage", slot.storage},
                            {"offset", slot.offset}});
  }
  j["inputs"] = json::array();
  for (const auto& in : g.inputs)
    j["inputs"].push_back({{"name", in.name}, {"tensor", table.index.at(in.name)}});
  j["outputs"] = json::array();
  for (const auto& out : g.outputs)
    j["outputs"].push_back({{"name", out}, {"tensor", table.index.at(out)}});
  j["params"] = json::array();
  for (const auto& [pname, value] : params)
    j["params"].push_back({{"name", pname}, {"tensor", table.index.at(value)}});
  j["kernels"] = json::array();
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<size_t> args;
    for (const std::string& a : kernels[i].args) args.push_back(table.index.at(a));
    j["kernels"].push_back({{"name", labels[i]},
                            {"func", kernels[i].func.name},
                            {"args", args},
                            {"op_types", kernels[i].op_types},
                            {"workload", kernels[i].workload},
                            {"flops", kernels[i].flops}});
  }
  return j;
}

// Counts template uses per workload key, in first-use order.
std::vector<WorkloadUse> count_workloads(const std::vector<graph::TemplateUse>& uses) {
  std::vector<WorkloadUse> out;
  for (const auto& u : uses) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const WorkloadUse& w) { return w.key == u.workload; });
    if (it == out.end()) {
      out.push_back({u.workload, 1, u.configured});
    } else {
      ++it->count;
    }
  }
  return out;
}

}  // namespace

// The whole pipeline after import, in order.
BuiltModule build_module(Graph g, const BuildOptions& options) {
  BuiltModule m;
  graph::passes::run_default_passes(g);
  m.workloads = count_workloads(graph::alter_layout(g, options.configs));
  std::vector<graph::FusedGroup> groups = graph::fuse_ops(g);

  std::vector<GroupKernel> kernels;
  std::vector<std::string> labels;
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string func = "kiln_k" + std::to_string(i);
    kernels.push_back(lower_group(g, groups[i], func));
    labels.push_back(graph::group_label(g, groups[i]) + "_" + std::to_string(i));
    if (kernels.back().workload.empty()) ++m.generic_kernels;
  }

  TensorTable table;
  for (const auto& in : g.inputs) table.add(in.name);
  for (const GroupKernel& k : kernels)
    for (const std::string& a : k.args) table.add(a);
  for (const std::string& out : g.outputs) table.add(out);

  // Weights: every tensor of the table that is an initializer.
  std::vector<std::pair<std::string, std::string>> params;  // param name -> value
  for (const std::string& name : table.names) {
    auto it = g.initializers.find(name);
    if (it == g.initializers.end()) continue;
    std::string pname = "p" + std::to_string(params.size());
    params.emplace_back(pname, name);
    m.params.emplace_back(pname, it->second);
  }
  for (const auto& out : g.outputs)
    if (!g.type_of(out)) throw std::runtime_error("graph output '" + out + "' has no type");

  m.graph_json = describe(g, kernels, labels, table, params, options.target).dump(1);
  for (GroupKernel& k : kernels) m.funcs.push_back(std::move(k.func));
  return m;
}

}  // namespace kiln::driver
