#include "tuner/task_search.h"

#include <algorithm>
#include <set>

#include "schedule/lower.h"
#include "tuner/features.h"

namespace kiln::tuner {
namespace {

// Features come from the loop IR before unrolling: unroll annotations and
// extents say what unrolling will do, and expanding large register tiles
// (then simplifying every copy) made the search cost seconds per round.
const schedule::LowerOptions kFeatureLowering{.unroll = false};

std::vector<float> lowered_features(const ops::OpTemplate& tmpl, const ops::Workload& w,
                                    const schedule::Config& cfg, const char* name) {
  ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, kFeatureLowering);
  f.name = name;
  return combined_features(f, cfg);
}

}  // namespace

// ---- TaskSearch -----------------------------------------------------------------

std::unique_ptr<TaskSearch> TaskSearch::resume(const Task& task, const std::vector<Record>& history,
                                               bool free_layout, const Isa& isa, double timeout_s) {
  auto t = std::make_unique<TaskSearch>();
  t->task = task;
  t->tmpl = &ops::get_template(task.template_name);
  t->workload = ops::Workload::parse(task.workload_key);
  t->isa = isa;
  schedule::Config fallback = t->tmpl->fallback(t->workload, isa);
  if (!free_layout) t->layout = ops::layout_blocks(*t->tmpl, t->workload, fallback);
  schedule::ConfigSpace space = t->tmpl->space(t->workload);
  std::vector<const Record*> retries;
  for (const Record& r : history) {
    if (timed_out_below(r, timeout_s)) {
      retries.push_back(&r);
      continue;
    }
    ++t->trials;
    try {
      int64_t index = schedule::Config::from_json(space, r.config_json).index();
      t->visited.push_back(index);
      if (r.error == ErrorClass::kOk) {
        t->measured.emplace_back(index, r.gflops);
        t->best_gflops = std::max(t->best_gflops, r.gflops);
      }
    } catch (const std::exception&) {
      // A record of an older space: counted, not revisited.
    }
  }
  for (const Record* r : retries) {
    try {
      schedule::Config cfg = schedule::Config::from_json(space, r->config_json);
      if (std::find(t->visited.begin(), t->visited.end(), cfg.index()) != t->visited.end())
        continue;  // measured again already, or a repeat
      t->visited.push_back(cfg.index());
      t->pending_retries.push_back(std::move(cfg));
    } catch (const std::exception&) {
      // A record of an older space: nothing to retry.
    }
  }
  if (std::find(t->visited.begin(), t->visited.end(), fallback.index()) == t->visited.end()) {
    t->pending_fallback = fallback;
    t->visited.push_back(fallback.index());  // the tuner never proposes it again
  }
  return t;
}

const std::vector<float>& TaskSearch::features_of(const schedule::Config& cfg) {
  auto it = features.find(cfg.index());
  if (it != features.end()) return it->second;
  std::vector<float> f;
  try {
    f = lowered_features(*tmpl, workload, cfg, "candidate");
  } catch (const std::exception&) {
    f.assign(kFeatures, 0.0f);
  }
  return features[cfg.index()] = std::move(f);
}

std::vector<schedule::Config> TaskSearch::next_batch(int n, size_t* not_from_tuner) {
  std::vector<schedule::Config> out;
  *not_from_tuner = 0;
  if (pending_fallback) {
    out.push_back(*pending_fallback);
    pending_fallback.reset();
  }
  while (static_cast<int>(out.size()) < n && !pending_retries.empty()) {
    out.push_back(std::move(pending_retries.front()));
    pending_retries.erase(pending_retries.begin());
  }
  *not_from_tuner = out.size();
  const int own = n - static_cast<int>(out.size());  // the tuner's share of the batch
  if (own <= 0) return out;
  // Whole batches of `own`, filtered: a tuner's batch is planned as a whole.
  while (static_cast<int>(out.size()) < n) {
    std::vector<schedule::Config> got = tuner->next_batch(own);
    if (got.empty()) break;
    for (schedule::Config& c : got)
      if (static_cast<int>(out.size()) < n && searchable(c)) out.push_back(std::move(c));
  }
  return out;
}

bool TaskSearch::searchable(const schedule::Config& cfg) const {
  if (layout != std::pair<int64_t, int64_t>{0, 0} &&
      ops::layout_blocks(*tmpl, workload, cfg) != layout)
    return false;
  return tmpl->fits(workload, cfg, isa);
}

void TaskSearch::record(const std::vector<schedule::Config>& batch,
                        const std::vector<double>& gflops, size_t not_from_tuner) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (gflops[i] > 0) measured.emplace_back(batch[i].index(), gflops[i]);
    best_gflops = std::max(best_gflops, gflops[i]);
  }
  if (batch.size() > not_from_tuner)
    tuner->update(std::vector<schedule::Config>(batch.begin() + not_from_tuner, batch.end()),
                  std::vector<double>(gflops.begin() + not_from_tuner, gflops.end()));
}

// ---- SharedCostModel ------------------------------------------------------------

void SharedCostModel::retrain() {
  std::vector<std::vector<float>> X = warm_X_;
  std::vector<float> y = warm_y_;
  std::vector<unsigned> groups = warm_groups_;
  for (TaskSearch* t : tasks_) {
    if (t->measured.empty()) continue;
    double best = std::max(t->best_gflops, 1e-9);
    schedule::ConfigSpace space = t->tmpl->space(t->workload);
    for (auto& [index, gflops] : t->measured) {
      X.push_back(t->features_of(space.get(index)));
      y.push_back(static_cast<float>(gflops / best));  // relative: comparable across tasks
    }
    groups.push_back(static_cast<unsigned>(t->measured.size()));
  }
  if (X.size() >= 8) model_.fit(X, y, groups, 30);
}

size_t SharedCostModel::warm_start(const RecordDB& db, const std::string& target_key,
                                   size_t per_workload, size_t max_total) {
  std::set<std::string> own;
  for (TaskSearch* t : tasks_) own.insert(t->task.workload_key);
  size_t loaded = 0;
  for (const std::string& key : db.workloads(target_key)) {
    if (own.count(key) || loaded >= max_total) continue;
    try {
      ops::Workload w = ops::Workload::parse(key);
      const ops::OpTemplate& tmpl = ops::get_template(w.template_name);
      schedule::ConfigSpace space = tmpl.space(w);
      std::vector<Record> ok;
      for (Record& r : db.records(key, target_key))
        if (r.error == ErrorClass::kOk && r.gflops > 0) ok.push_back(std::move(r));
      if (ok.size() < 2) continue;
      std::sort(ok.begin(), ok.end(), [](auto& x, auto& y) { return x.gflops > y.gflops; });
      double best = ok.front().gflops;
      size_t n = std::min({ok.size(), per_workload, max_total - loaded}), added = 0;
      for (size_t k = 0; k < n; ++k) {
        const Record& r = ok[k * ok.size() / n];
        schedule::Config cfg = schedule::Config::from_json(space, r.config_json);
        warm_X_.push_back(lowered_features(tmpl, w, cfg, "warm"));
        warm_y_.push_back(static_cast<float>(r.gflops / best));
        ++added;
      }
      warm_groups_.push_back(static_cast<unsigned>(added));
      loaded += added;
    } catch (const std::exception&) {
      // A record of another kiln's space or template: not usable here.
    }
  }
  return loaded;
}

std::vector<double> SharedCostModel::score(TaskSearch& t,
                                           const std::vector<schedule::Config>& cfgs) const {
  std::vector<double> s(cfgs.size(), 0.0);
  if (!model_.trained()) return s;
  std::vector<std::vector<float>> X;
  for (const auto& c : cfgs) X.push_back(t.features_of(c));
  std::vector<float> p = model_.predict(X);
  for (size_t i = 0; i < p.size(); ++i) s[i] = p[i];
  return s;
}

// ---- tuners -----------------------------------------------------------------------

ModelBasedOptions model_based_options(int batch) {
  ModelBasedOptions opts;
  // Lowering a candidate for its features costs ~20 ms (large unrolled conv
  // tiles): 16 chains x 24 steps keep a round's search near 8 s on two cores.
  opts.num_chains = 16;
  opts.max_iters = 24;
  // Plan again after every batch: the model has just been retrained on it.
  // Replaying recorded searches (bench/tuner/replay_search.cc), this found
  // the best config in 0.4-0.8x the trials of re-planning every 64 results.
  opts.replan_after = batch;
  return opts;
}

std::unique_ptr<Tuner> make_task_tuner(const std::string& name, TaskSearch& t,
                                       SharedCostModel& model, int batch, uint64_t seed) {
  ScoreFn score;
  if (name == "xgb") {
    TaskSearch* tp = &t;
    SharedCostModel* mp = &model;
    // Configs the search would drop (another layout, too many accumulators
    // for the ISA's registers) score lowest, so that the plan holds
    // searchable ones and few proposals are wasted (and are not lowered for
    // their features).
    score = [tp, mp](const std::vector<schedule::Config>& cfgs) {
      std::vector<double> s(cfgs.size(), -1e9);
      std::vector<schedule::Config> kept;
      std::vector<size_t> at;
      for (size_t i = 0; i < cfgs.size(); ++i)
        if (tp->searchable(cfgs[i])) {
          kept.push_back(cfgs[i]);
          at.push_back(i);
        }
      if (kept.empty()) return s;
      std::vector<double> ks = mp->score(*tp, kept);
      for (size_t j = 0; j < at.size(); ++j) s[at[j]] = ks[j];
      return s;
    };
  }
  return make_tuner(name, t.tmpl->space(t.workload), t.visited, seed, std::move(score),
                    model_based_options(batch));
}

}  // namespace kiln::tuner
