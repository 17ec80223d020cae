#include "tuner/in_graph_records.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ops/op_template.h"
#include "support/version.h"
#include "tuner/config_match.h"
#include "tuner/rank_test.h"
#include "tuner/record_backend.h"
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

namespace {

const int64_t kProcessStart = static_cast<int64_t>(std::time(nullptr));
constexpr const char* kClaimSuffix = "; claimed-by=in-graph-step";
constexpr const char* kTurnWorkload = "kiln.in-graph-timing-turn";

std::string turn_key() { return "host=" + this_host(); }

// The pid of a claim owner of this host ("pid@host/token"), or 0.
int64_t local_pid(const std::string& owner) {
  const size_t at = owner.find('@'), slash = owner.find('/', at == std::string::npos ? 0 : at);
  if (at == std::string::npos || slash == std::string::npos) return 0;
  if (owner.compare(at + 1, slash - at - 1, this_host()) != 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(owner.c_str(), &end, 10);
  return end == owner.c_str() + at && pid > 0 ? pid : 0;
}

}  // namespace

int64_t process_start_unix() { return kProcessStart; }

std::string in_graph_claim_key(const std::string& in_graph_key) {
  return in_graph_key + kClaimSuffix;
}

InGraphClaims::InGraphClaims(RecordDB& db) : db_(db), turn_owner_(make_claim_owner()) {}

InGraphClaims::~InGraphClaims() {
  std::vector<std::string> owners = {turn_owner_};
  for (const auto& [w, o] : owners_) owners.push_back(o);
  for (const std::string& o : owners) try {
      db_.release_claims(o);
    } catch (const std::exception&) {
      // They expire by themselves.
    }
}

std::map<std::string, std::vector<std::string>> InGraphClaims::claim(
    const std::map<std::string, std::vector<std::string>>& candidates,
    const std::string& in_graph_key) {
  std::map<std::string, std::vector<std::string>> out;
  const std::string key = in_graph_claim_key(in_graph_key);
  for (const auto& entry : candidates) {
    // Named copies, not a structured binding: clang 14 (the sanitizer
    // build) cannot capture a binding in the lambdas below.
    const std::string& workload = entry.first;
    const std::vector<std::string>& configs = entry.second;
    std::string& owner = owners_[workload];
    if (owner.empty()) owner = make_claim_owner();
    auto held = held_.find(workload);
    if (held != held_.end()) {
      // This run holds the workload (an earlier model of it used it): its
      // configs stay this run's, and new ones are claimed (another run,
      // refused the untuned config, holds none of them for long).
      std::vector<std::string> fresh;
      for (const std::string& c : configs)
        if (!held->second.count(c)) fresh.push_back(c);
      ClaimResult granted = db_.claim(workload, key, fresh, owner);
      for (size_t i = 0; i < fresh.size() && i < granted.granted.size(); ++i)
        if (granted.granted[i]) held->second.insert(fresh[i]);
      std::vector<std::string> mine;
      for (const std::string& c : configs)
        if (held->second.count(c)) mine.push_back(c);
      if (!mine.empty()) out[workload] = std::move(mine);
      continue;
    }
    ClaimResult granted = db_.claim(workload, key, configs, owner);
    bool all =
        granted.granted.size() == configs.size() &&
        std::all_of(granted.granted.begin(), granted.granted.end(), [](bool g) { return g; });
    // Claimed first, then checked: a run that stored its records released
    // its claims after, so a config it timed is either still held or
    // already recorded here.
    if (all)
      for (const Record& r : db_.records(workload, in_graph_key)) {
        if (r.timestamp_unix < kProcessStart) continue;
        all = std::none_of(configs.begin(), configs.end(), [&](const std::string& c) {
          return ConfigMatcher(workload, c).matches(r.config_json);
        });
        if (!all) break;
      }
    if (all) {
      out[workload] = configs;
      held_[workload].insert(configs.begin(), configs.end());
    } else {
      db_.release_claims(owner);  // the workload is the other run's
    }
  }
  return out;
}

int64_t InGraphClaims::try_take_turn() {
  ClaimResult r = db_.claim(kTurnWorkload, turn_key(), {"{}"}, turn_owner_);
  if (!r.granted.empty() && r.granted[0]) return 0;
  for (const ClaimHolder& h : db_.live_claim_holders())
    if (h.target_key == turn_key() && h.owner != turn_owner_)
      if (int64_t pid = local_pid(h.owner)) return pid;
  return -1;  // held, but by no owner this host can name
}

void InGraphClaims::release_turn() { db_.release_claims(turn_owner_); }

int64_t InGraphClaims::other_local_measurer() const {
  const std::string suffix = kClaimSuffix;
  for (const ClaimHolder& h : db_.live_claim_holders()) {
    const int64_t pid = local_pid(h.owner);
    if (pid == 0 || pid == static_cast<int64_t>(::getpid()) || h.target_key.ends_with(suffix) ||
        owner_is_dead_local_process(h.owner))
      continue;
    return pid;
  }
  return 0;
}

void InGraphClaims::renew() {
  for (const auto& [w, o] : owners_) db_.renew_claims(o);
  db_.renew_claims(turn_owner_);
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
