// Task extraction: the distinct template workloads of a set of models
// (kiln tune, kiln tasks). It runs the same graph passes and template
// selection as build_module, so a task is exactly a workload a build would
// compile, under the same key.
#pragma once

#include <vector>

#include "graph/graph.h"
#include "tuner/tasks.h"

namespace kiln::driver {

// One task per distinct workload key over all models, in first-use order
// (model by model, node order within a model). Identical keys from different
// models merge: their counts add. Weights are count * flops over the total,
// so they sum to 1 (all 0 when no model has a template workload). Throws what
// the passes throw (std::runtime_error naming the node).
std::vector<tuner::Task> extract_tasks(const std::vector<graph::Graph>& models);

}  // namespace kiln::driver
