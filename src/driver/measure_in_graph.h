// Measuring tuned configs the way the model runs them.
//
// The tuner times each candidate alone: one kernel, its inputs hot in cache,
// no neighbours. In the compiled model the same kernel runs with its fused
// epilogue, after other kernels have evicted its weights, and ranks differ
// (a ResNet-50 1x1 conv took 0.41 ms alone and 0.73 ms in a package).
// measure_in_graph() builds the model a few times, each build with another
// candidate swapped in for every template workload at once (a "round"), runs
// the builds interleaved (so that the machine's drift hits every candidate
// alike) and reads each kernel's time from the executor's profile.
//
// Candidates of different workloads share a round: a kernel's time depends
// far more on its own config than on its neighbours'. The implementations of
// one node (a 3x3 stride-1 Conv: direct and Winograd) take turns, since a
// node runs one of them per build. Only configs that keep the build's
// channel blocks are worth measuring this way: a per-kernel time does not see
// the layout transforms another block size would add (the caller filters).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "driver/build.h"

namespace kiln::driver {

struct InGraphOptions {
  // Target, input shapes and the chooser for the workloads without
  // candidates (what `kiln build --tuning-log` would use); output_path and
  // configs are set per round.
  BuildOptions build;
  // Recorded whole-model runs of every round's package (rounded up to visits
  // of 3 back-to-back runs, the rounds' visits interleaved).
  int repeats = 30;
  // One line per step ("round 2 of 6 built", ...); may be empty.
  std::function<void(const std::string&)> progress;
};

// The in-graph time of one candidate: the kernels of its workload in the
// model, per call, one entry per repeat (a workload used by several nodes:
// their summed time over their summed calls).
struct InGraphTime {
  std::string workload;
  std::string config_json;
  std::vector<double> per_call_ms;
};

// `candidates`: workload key -> configs to measure (Config::to_json text),
// best first; workloads the model does not use are ignored. Returns a time
// for every candidate of a workload the model uses, in no particular order.
// Throws what build() throws, or std::runtime_error when a package fails.
std::vector<InGraphTime> measure_in_graph(
    const std::string& model_path,
    const std::map<std::string, std::vector<std::string>>& candidates,
    const InGraphOptions& options);

// The rounds measure_in_graph builds: per round, workload key -> config.
// Each implementation set (a node's workload keys) contributes its
// candidates in turn, implementations alternating (A1, B1, A2, B2, ...); a
// set with fewer candidates than rounds starts over. Exposed for tests.
std::vector<std::map<std::string, std::string>> in_graph_rounds(
    const std::vector<std::vector<std::string>>& implementation_sets,
    const std::map<std::string, std::vector<std::string>>& candidates);

}  // namespace kiln::driver
