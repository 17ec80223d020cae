// mod.json's "host" section: the run-time shaped part of a model
// (graph::HostRegion), which the executor runs after the kernels
// (runtime/host_op.h, docs/package-format.md).
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/graph.h"

namespace kiln::driver {

// The name under which a host constant is a tensor of the package (apart from
// the graph's own initializers, which the passes may have repacked).
std::string host_constant_tensor(const std::string& value);

// Adds the host region's constants to `g` as initializers under
// host_constant_tensor() names, for the tensor table and mod.params.
void add_host_constants(graph::Graph& g);

// {"values": [...], "steps": [...]} and the package's outputs in model
// order; `tensor_index` gives the mod.json index of a static tensor.
// Throws std::runtime_error naming the node for an operator the runtime
// does not run or an attribute it cannot take.
struct HostDescription {
  nlohmann::json host;
  nlohmann::json outputs;
};
HostDescription describe_host(const graph::Graph& g,
                              const std::function<size_t(const std::string&)>& tensor_index);

}  // namespace kiln::driver
