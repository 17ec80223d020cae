// The tuner's side of in-graph measurement (driver/measure_in_graph.h):
// which configs to re-measure inside the model, and the records that keep
// their in-graph times. Those records carry the target key's
// "measured=in-graph" field (target_key.h), so they never count as trials
// and never mix with isolated times; a build prefers them
// (tuned_configs.h, configs_for_build).
#pragma once

#include <cstddef>
#include <map>
#include <set>
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

// ---- concurrent runs ----------------------------------------------------------------------------
// Two `kiln tune` on one database each ran the in-graph step and stored
// in-graph records of the same configs, and one timed its kernels while the
// other measured (a 5 us kernel at 2.5-3.8 ms). The step claims its work like
// the search (records.h, Claims) and takes turns on the host:
//  - Each candidate is claimed under in_graph_claim_key(in-graph key), a key
//    no record has: a config that an earlier run timed in the graph is timed
//    again (each step weighs its candidates against the untuned config in
//    the same builds), but one held by a live claim of another run is not,
//    nor one whose in-graph record was stored since this process started (by
//    a run that has released its claims since). A workload goes whole to
//    one run: where any of its candidates is refused, this run times none of
//    them (a build weighs a workload's in-graph records of one step only,
//    tuned_configs.cc's keep_newest_step, so a step needs the untuned config
//    beside the tuned ones, and every run's candidates hold the untuned
//    config). The claims last until the InGraphClaims is destroyed (the end
//    of the run's in-graph step; a killed run's are reaped, or expire after
//    RecordDB::kClaimTtlS). A workload this run holds stays its own: each of
//    its models that uses it times it (a job's shared task).
//  - One in-graph step at a time per host builds and times (the "timing
//    turn", a claim on a key of this host), and it times no visit while
//    another tuner of this host holds claims (its search is measuring).
class InGraphClaims {
 public:
  explicit InGraphClaims(RecordDB& db);
  ~InGraphClaims();  // releases every claim of this object (best effort)
  InGraphClaims(const InGraphClaims&) = delete;
  InGraphClaims& operator=(const InGraphClaims&) = delete;

  // `candidates` (in_graph_candidates) narrowed to the workloads this run
  // claimed whole (or holds already, with the configs it could claim); the
  // others are dropped.
  std::map<std::string, std::vector<std::string>> claim(
      const std::map<std::string, std::vector<std::string>>& candidates,
      const std::string& in_graph_key);
  // Takes this host's timing turn: 0 when taken (until release_turn()), else
  // the pid of the process that holds it.
  int64_t try_take_turn();
  void release_turn();
  // The pid of another live tuner process of this host that is measuring
  // right now (it holds live claims other than an in-graph step's candidate
  // claims), or 0.
  int64_t other_local_measurer() const;
  // Heartbeat of this object's claims.
  void renew();

 private:
  RecordDB& db_;
  std::map<std::string, std::string> owners_;          // per workload: its claims' owner
  std::map<std::string, std::set<std::string>> held_;  // per workload: the configs this run holds
  std::string turn_owner_;
};

// The claim key of an in-graph step's candidates on `in_graph_key`.
std::string in_graph_claim_key(const std::string& in_graph_key);
// When this process started (unix seconds).
int64_t process_start_unix();

}  // namespace kiln::tuner
