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

#include <chrono>
#include <functional>
#include <map>
#include <optional>
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
  // When the measurement should end (a tuning run's time budget): the rounds
  // that would not fit, estimated from the first round's build and run
  // times, are dropped, the last ones first (each node's worse candidates),
  // never below two rounds.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Whether another process is measuring on this machine right now (another
  // tuner's search; may be empty): its kernels and ours would time each
  // other. While it says so the step times nothing: before each visit it
  // waits (polling; a line through `progress`), and a visit during which it
  // began is discarded and run again. At the deadline the step stops with
  // the visits it has.
  std::function<bool()> others_measuring;
};

// The in-graph time of one candidate: the kernels of its workload in the
// model, per call, one entry per repeat (a workload used by several nodes:
// their summed time over their summed calls).
struct InGraphTime {
  std::string workload;
  std::string config_json;
  std::vector<double> per_call_ms;
};

struct InGraphResult {
  std::vector<InGraphTime> times;
  size_t rounds = 0;          // rounds built and measured
  size_t rounds_planned = 0;  // rounds the candidates asked for
};

// `candidates`: workload key -> configs to measure (Config::to_json text),
// best first; workloads the model does not use are ignored. Returns a time
// for every measured candidate of a workload the model uses (every one
// unless the deadline dropped rounds), in no particular order. Throws what
// build() throws, or std::runtime_error when a package fails.
InGraphResult measure_in_graph(const std::string& model_path,
                               const std::map<std::string, std::vector<std::string>>& candidates,
                               const InGraphOptions& options);

// How many of `planned` rounds fit in `remaining_s` seconds, counted from
// the end of the first round's build: each further round costs a build
// (`build_s`) and every round its recorded runs (`repeats`, rounded up to
// visits of one unrecorded and 3 recorded runs, each `run_s`). At least
// min(2, planned): the best and the next candidate of each node. Exposed
// for tests.
size_t in_graph_rounds_that_fit(size_t planned, double remaining_s, double build_s, double run_s,
                                int repeats);

// The rounds measure_in_graph builds: per round, workload key -> config.
// Each implementation set (a node's workload keys) contributes its
// candidates in turn, implementations alternating (A1, B1, A2, B2, ...); a
// set with fewer candidates than rounds starts over. Exposed for tests.
std::vector<std::map<std::string, std::string>> in_graph_rounds(
    const std::vector<std::vector<std::string>>& implementation_sets,
    const std::map<std::string, std::vector<std::string>>& candidates);

}  // namespace kiln::driver
