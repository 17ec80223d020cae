// The tuner's side of in-graph measurement (driver/measure_in_graph.h):
// which configs to re-measure inside the model, and the records that keep
// their in-graph times. Those records carry the target key's
// "measured=in-graph" field (target_key.h), so they never count as trials
// and never mix with isolated times; a build prefers them
// (tuned_configs.h, configs_for_build).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "support/isa.h"
#include "tuner/records.h"

namespace kiln::tuner {

// For each workload, up to `k` distinct verified configs (the records' canonical
// config text) of its isolated
// records on `target_key`, fastest first, among those that keep the
// template's fallback channel blocks (a per-kernel time cannot see the
// layout transforms other blocks would add). Workloads without such
// records are left out. With `fallback_isa`, each workload's fallback config
// for that ISA is added when they lack it, second, after the best (first
// when it is the best; a step cut short keeps the first rounds): timed in the graph
// beside them, it keeps a build from taking a tuned config that the isolated
// search ranked above the untuned build's but that runs slower in the model
// (ConvNeXt-T's Linear layers, tuned on a loaded machine, built 4 % slower).
std::map<std::string, std::vector<std::string>> in_graph_candidates(
    const RecordDB& db, const std::string& target_key, const std::vector<std::string>& workloads,
    int k, const Isa* fallback_isa = nullptr);

// The record of one in-graph measurement: `per_call_ms` one time per
// repeat; its times_ms are the medians of consecutive groups of 5 repeats
// (robust to a descheduled thread's spikes), GFLOP/s from the template's
// FLOP count over the median of all repeats.
// `in_graph_key` must be a TargetKey with measured = in-graph.
Record in_graph_record(const std::string& workload_key, const std::string& in_graph_key,
                       const std::string& config_json, const std::vector<double>& per_call_ms);

// Whether a tuned config's in-graph record beats `baseline` (the node's
// untuned config, timed in the same step) by more than the step can be
// wrong about:
//  - its median time at least kMinInGraphGain lower: each candidate runs in
//    its own build, and the same config measured 2 % apart from one build to
//    the next on the Zen 4 (code and buffer placement); and
//  - with kMinRankSamples times or more on each side, a one-sided rank test
//    (rank_test.h) at 5 % over `comparisons` (the node's other records:
//    picking the fastest of several draws the luckiest, so each must pass
//    at 5 % / comparisons). Fewer times (a step run with few repeats): the
//    margin alone.
// Why: on AVX2 code on the Zen 4 the step picked, among three Winograd
// configs within 5 % of each other, one that profiled 8 % slower than the
// untuned config in the built package and tied it in three more builds
// (bench/tuner/results/latency-curve-resnet18-2026-11-29b-avx2-zen4.md). A
// node keeps its untuned config unless a tuned one wins clearly.
constexpr double kMinInGraphGain = 0.03;
constexpr size_t kMinRankSamples = 4;
bool clearly_faster(const Record& candidate, const Record& baseline, size_t comparisons);

// What the in-graph records predict for a model's template kernels, per run:
// for each template node (an implementation set of driver::template_workload_sets,
// in kernel order, a node counted once), the fastest in-graph time of any of its
// implementations' records where it is clearly_faster than the untuned one, as a
// build chooses, against the time of what an untuned build runs (its first
// implementation's fallback config for `isa`). Nodes without a record of that
// fallback are left out of both sums.
struct InGraphEstimate {
  double tuned_ms = 0;     // what a build runs of each node
  double untuned_ms = 0;   // each node's untuned default
  size_t nodes = 0;        // nodes in the sums
  size_t tuned_nodes = 0;  // of those, nodes a build gives a tuned config
};
InGraphEstimate estimate_in_graph(const std::vector<std::vector<std::string>>& implementation_sets,
                                  const std::vector<Record>& in_graph_records, const Isa& isa);

}  // namespace kiln::tuner
