// Tuning tasks: the distinct template workloads of one or more models, each
// with how much of the models' estimated latency it accounts for. The tuner
// spends its trials by these numbers (task_scheduler.h). The tuner tunes
// workloads, not files: which workloads a model has comes from the build
// driver (driver::template_workloads, the same passes a build runs), and
// make_tasks turns those lists into tasks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/isa.h"

namespace kiln::tuner {

struct Task {
  std::string workload_key;   // ops::Workload::key(), e.g. "conv2d_NCHWc.x86(data=[...],...)"
  std::string template_name;  // "conv2d_NCHWc.x86"
  int count = 0;              // kernels using this workload, summed over the models
  double flops = 0;           // floating-point operations of one call
  // Share of the models' estimated template latency, in [0, 1]; the weights of
  // one extraction sum to 1. Before tuning every workload is assumed to run at
  // the same GFLOP/s, so this is count * flops over the sum of those products.
  double weight = 0;
  // The task's place in the model where it ranks highest by count x flops
  // (0: that model's heaviest task). The scheduler's warm-up goes by it, so
  // that the models take turns, each with its heaviest task first, and a
  // budget spent before the warm-up ends has tuned every model's largest
  // kernels, not one model's whole list.
  int model_rank = 0;
};

// One task per distinct workload key over all models, in first-use order
// (model by model, kernel order within a model); `models` holds, per model,
// the workload key of every template kernel. Identical keys from different
// models merge: their counts add. Weights are count * flops over the total,
// so they sum to 1 (all 0 when no model has a template workload). A model's
// ranks go by count x flops in that model, ties in first-use order. Throws
// what ops::Workload::parse and ops::get_template throw for a bad key.
std::vector<Task> make_tasks(const std::vector<std::vector<std::string>>& models);

// Per model, per template node, the workload keys of the node's
// implementations (driver::template_workload_sets: usually one; a 3x3
// stride-1 Conv has its direct and its Winograd workload).
using ModelNodes = std::vector<std::vector<std::string>>;
// The per-model workload lists make_tasks takes: every implementation of every node.
std::vector<std::vector<std::string>> node_workloads(const std::vector<ModelNodes>& models);
// The nodes with more than one implementation, each set of keys once: the
// task scheduler's alternatives (SchedulerOptions::implementation_sets).
std::vector<std::vector<std::string>> alternative_sets(const std::vector<ModelNodes>& models);

// The bytes one run of a model's template kernels reads besides their first
// inputs: the weights (and biases) that cold-weight measurement rotates
// (ColdWeightRing). Per node the largest of its implementations, each in its
// fallback config's layout for `isa`: a Winograd workload reads its
// transformed weights, 16/9 (F(2x2)) or 4x (F(4x4)) the ONNX ones, so a model
// whose ONNX weights fit in half the cache may not. Throws what
// ops::Workload::parse and ops::get_template throw for a bad key.
int64_t kernel_weight_bytes(const ModelNodes& nodes, const Isa& isa);

}  // namespace kiln::tuner
