#include "tuner/in_graph_records.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ops/op_template.h"
#include "support/version.h"
#include "tuner/config_match.h"
#include "tuner/rank_test.h"
#include "tuner/target_key.h"

namespace kiln::tuner {

std::map<std::string, std::vector<std::string>> in_graph_candidates(
    const RecordDB& db, const std::string& target_key, const std::vector<std::string>& workloads,
    int k, const Isa* fallback_isa) {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& key : workloads) {
    if (out.count(key)) continue;
    ops::Workload w;
    const ops::OpTemplate* t = nullptr;
    try {
      w = ops::Workload::parse(key);
      t = &ops::get_template(w.template_name);
    } catch (const std::exception&) {
      continue;  // a workload of a template this kiln lacks
    }
    schedule::ConfigSpace space = t->space(w);
    std::pair<int64_t, int64_t> want = ops::fallback_layout_blocks(*t, w);
    std::vector<Record> records = db.records(key, target_key);
    std::sort(records.begin(), records.end(),
              [](const Record& a, const Record& b) { return a.mean_ms() < b.mean_ms(); });
    std::vector<std::string> picked;
    // Their indices in today's space: one config stored under two indices
    // (before and after its space grew, config_match.h) is measured once.
    std::vector<int64_t> picked_index;
    for (const Record& r : records) {
      if (static_cast<int>(picked.size()) >= k) break;
      if (r.error != ErrorClass::kOk || r.times_ms.empty()) continue;
      try {
        schedule::Config cfg = schedule::Config::from_json(space, r.config_json);
        if (ops::layout_blocks(*t, w, cfg) != want) continue;
        if (std::find(picked_index.begin(), picked_index.end(), cfg.index()) != picked_index.end())
          continue;
        // The stored (canonical) text: the in-graph record of this config then has the same.
        picked.push_back(r.config_json);
        picked_index.push_back(cfg.index());
      } catch (const std::exception&) {
        // A record of an older space.
      }
    }
    if (picked.empty()) continue;
    if (fallback_isa) {
      // Records store configs in canonical text (sorted keys, compact).
      // Second, right after the isolated best: a step cut short by a time
      // budget (driver::InGraphOptions::deadline) keeps its first rounds,
      // which then still weigh each workload's best against the untuned.
      schedule::Config fallback = t->fallback(w, *fallback_isa);
      auto it = std::find(picked_index.begin(), picked_index.end(), fallback.index());
      if (it != picked_index.begin()) {
        if (it != picked_index.end()) picked.erase(picked.begin() + (it - picked_index.begin()));
        picked.insert(picked.begin() + 1, nlohmann::json::parse(fallback.to_json()).dump());
      }
    }
    out[key] = std::move(picked);
  }
  return out;
}

bool clearly_faster(const Record& candidate, const Record& baseline, size_t comparisons) {
  if (candidate.times_ms.empty() || baseline.times_ms.empty()) return false;
  if (median(candidate.times_ms) > (1 - kMinInGraphGain) * median(baseline.times_ms)) return false;
  if (candidate.times_ms.size() < kMinRankSamples || baseline.times_ms.size() < kMinRankSamples)
    return true;
  const double alpha = 0.05 / static_cast<double>(std::max<size_t>(comparisons, 1));
  return rank_test_p_lower(candidate.times_ms, baseline.times_ms) <= alpha;
}

InGraphEstimate estimate_in_graph(const std::vector<std::vector<std::string>>& implementation_sets,
                                  const std::vector<Record>& in_graph_records, const Isa& isa) {
  std::map<std::string, std::vector<const Record*>> by_workload;
  for (const Record& r : in_graph_records)
    if (r.error == ErrorClass::kOk) by_workload[r.workload_key].push_back(&r);
  InGraphEstimate e;
  for (const std::vector<std::string>& set : implementation_sets) {
    if (set.empty()) continue;
    const Record* untuned = nullptr;
    try {
      ops::Workload w = ops::Workload::parse(set.front());
      const ConfigMatcher fallback(set.front(),
                                   ops::get_template(w.template_name).fallback(w, isa).to_json());
      for (const Record* r : by_workload[set.front()])
        if (fallback.matches(r->config_json)) untuned = r;
    } catch (const std::exception&) {
      continue;  // a workload this kiln cannot parse: not in the estimate
    }
    if (!untuned) continue;
    const Record* best = untuned;
    size_t others = 0;
    for (const std::string& w : set)
      for (const Record* r : by_workload[w]) {
        if (r == untuned) continue;
        ++others;
        if (r->mean_ms() < best->mean_ms()) best = r;
      }
    if (best != untuned && !clearly_faster(*best, *untuned, others)) best = untuned;
    e.tuned_ms += best->mean_ms();
    e.untuned_ms += untuned->mean_ms();
    ++e.nodes;
    if (best != untuned) ++e.tuned_nodes;
  }
  return e;
}

Record in_graph_record(const std::string& workload_key, const std::string& in_graph_key,
                       const std::string& config_json, const std::vector<double>& per_call_ms) {
  if (TargetKey::parse(in_graph_key).measured != TargetKey::kInGraph)
    throw std::invalid_argument("in_graph_record: target key \"" + in_graph_key +
                                "\" is not an in-graph key");
  if (per_call_ms.empty())
    throw std::invalid_argument("in_graph_record: no times for " + workload_key);
  Record r;
  r.workload_key = workload_key;
  r.target_key = in_graph_key;
  r.config_json = config_json;
  // A kernel of 0.1 ms shares 2 cores with whatever else runs: one repeat in
  // ten may take 20x longer (a worker thread descheduled). The ranking uses
  // the mean of times_ms, so each stored time is the median of a group of
  // kGroup consecutive repeats: robust to such spikes, still one value per
  // few runs for a reader to judge the spread.
  constexpr size_t kGroup = 5;
  for (size_t i = 0; i < per_call_ms.size(); i += kGroup) {
    std::vector<double> g(per_call_ms.begin() + static_cast<std::ptrdiff_t>(i),
                          per_call_ms.begin() + static_cast<std::ptrdiff_t>(
                                                    std::min(i + kGroup, per_call_ms.size())));
    std::nth_element(g.begin(), g.begin() + g.size() / 2, g.end());
    r.times_ms.push_back(g[g.size() / 2]);
  }
  r.timestamp_unix = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  r.kiln_version = ::kiln::kiln_version();
  std::vector<double> sorted = per_call_ms;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  double median = sorted[sorted.size() / 2];
  ops::Workload w = ops::Workload::parse(workload_key);
  if (median > 0) r.gflops = ops::get_template(w.template_name).flops(w) / (median * 1e6);
  return r;
}

}  // namespace kiln::tuner
