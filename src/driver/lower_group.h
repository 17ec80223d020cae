// One fused group -> one kernel: the group's tensor expression (each node's
// compute from the operator registry, composed), its schedule, its lowered
// loop IR, and the value names bound to the kernel's arguments.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/fuse_ops.h"
#include "graph/passes/parallel_splits.h"
#include "ir/function.h"

namespace kiln::driver {

struct GroupKernel {
  ir::LoweredFunc func;
  std::vector<std::string> args;     // graph value per kernel argument: inputs, then outputs
  std::vector<std::string> outputs;  // the values the kernel writes (the last args)
  std::vector<std::string> op_types;
  std::string workload;  // template workload key; "" for generically scheduled groups
  bool tuned = false;    // the config came from a record or --config, not the fallback
  double flops = 0;
  // The compile-time budget (schedule/code_size.h): the kernel's estimated
  // operations as lowered, before any demotion, and the unrolled loops made
  // serial to fit it (empty: none).
  int64_t code_size = 0, code_size_before = 0;
  std::vector<std::string> demoted;
};

// Builds the kernel of `group` named `func_name`: through its template when
// the group's anchor is a kiln.Template node (the anchor computed inside the
// output's register tile, the epilogue applied there), else generically.
// vector_lanes: the target's float32 lanes, for the generic schedule.
// split: how its parallel loop is shared between the threads
// (graph::choose_parallel_splits); the default is by channel blocks.
GroupKernel lower_group(const graph::Graph& g, const graph::FusedGroup& group,
                        const std::string& func_name, int64_t vector_lanes,
                        const graph::ParallelSplit& split = {});

// Builds the kernel of `group` named `func_name`, scheduled generically
// (ops::schedule_generic). Throws std::runtime_error naming the node whose
// compute failed.
GroupKernel lower_group_generic(const graph::Graph& g, const graph::FusedGroup& group,
                                const std::string& func_name, int64_t vector_lanes,
                                const graph::ParallelSplit& split = {});

// Flops of a lowered group estimated from its tensor expression: one per
// output element of every injective stage, two per reduction step.
double estimate_flops(const std::vector<ir::Tensor>& outputs);

}  // namespace kiln::driver
