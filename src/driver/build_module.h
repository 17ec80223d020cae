// The build driver: a model's graph -> kernels + the executor's graph
// description + weights. One function reads as the whole pipeline
// (build_module in build_module.cc); kiln build and the tests call it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "codegen/target.h"
#include "graph/graph.h"
#include "ir/function.h"
#include "schedule/config_space.h"

namespace kiln::driver {

struct BuildOptions {
  codegen::Target target = codegen::Target::host();
  // Explicit configs by workload key (kiln build --config FILE), as
  // Config::to_json text; checked against the template's space when used.
  std::map<std::string, std::string> configs;
};

// What kiln build reports about one template workload of the model.
struct WorkloadUse {
  std::string key;
  int count = 0;          // kernels using it
  bool configured = false;  // a config was given (else the template's fallback)
};

struct BuiltModule {
  std::vector<ir::LoweredFunc> funcs;
  std::string graph_json;  // mod.json (docs/package-format.md)
  std::vector<std::pair<std::string, graph::Initializer>> params;  // mod.params, by name
  std::vector<WorkloadUse> workloads;
  size_t generic_kernels = 0;  // kernels without a template (injective, reductions)
};

// Runs the graph passes, fuses operators, builds one kernel per group, plans
// memory and describes the result. Throws std::runtime_error naming the node
// or value at fault.
BuiltModule build_module(graph::Graph g, const BuildOptions& options);

}  // namespace kiln::driver
