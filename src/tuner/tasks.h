// Tuning tasks: the distinct template workloads of one or more models, each
// with how much of the models' estimated latency it accounts for. The tuner
// spends its trials by these numbers (task_scheduler.h). Extracting tasks from
// a model needs the graph passes, so it lives in driver/tasks.h; this header
// is only the data the tuner works on.
#pragma once

#include <string>

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
};

}  // namespace kiln::tuner
