// Replays the model-based search offline on configs already measured, to
// compare search settings without the machine's noise.
//
//   kiln_tuner_replay DB [DB ...] [--seeds N] [--batch N]
//
// For each workload of the databases (every target, records pooled), the
// pool is its verified configs with their measured GFLOP/s. A simulated run
// starts from the template's fallback config (as `kiln tune` does) and, each
// round, trains the cost model on what it has "measured", scores the rest of
// the pool and takes the best `batch` (each pick random with probability
// epsilon), looking their speed up instead of measuring. It prints, per
// strategy, the median trials over the seeds until the pool's best config is
// found and until one within 3 % of it is. Random order is the baseline.
//
// The pool is what random and xgb searches proposed, not the whole space, so
// the numbers rank strategies; they do not predict a live run's trials.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/op_template.h"
#include "schedule/lower.h"
#include "tuner/cost_model.h"
#include "tuner/features.h"
#include "tuner/records.h"

namespace {

using namespace kiln;

struct Pool {
  std::string workload_key;
  std::vector<schedule::Config> configs;
  std::vector<std::vector<float>> features;
  std::vector<double> gflops;
  int fallback = -1;  // index in the pool, -1 if it was never measured
  int best = 0;
};

Pool load_pool(const std::string& key, const std::vector<tuner::Record>& records) {
  Pool p;
  p.workload_key = key;
  ops::Workload w = ops::Workload::parse(key);
  const ops::OpTemplate& tmpl = ops::get_template(w.template_name);
  schedule::ConfigSpace space = tmpl.space(w);
  std::map<int64_t, std::pair<double, int>> by_index;  // summed GFLOP/s, count
  std::map<int64_t, schedule::Config> configs;
  for (const tuner::Record& r : records) {
    if (r.error != tuner::ErrorClass::kOk || r.gflops <= 0) continue;
    schedule::Config c;
    try {
      c = schedule::Config::from_json(space, r.config_json);
    } catch (const std::exception&) {
      continue;  // a record of an older space
    }
    auto& [sum, n] = by_index[c.index()];
    sum += r.gflops;
    ++n;
    configs.emplace(c.index(), c);
  }
  const int64_t fallback_index = tmpl.fallback(w).index();
  for (auto& [index, acc] : by_index) {
    const schedule::Config& c = configs.at(index);
    ops::Kernel k = ops::make_kernel(tmpl, w, c);
    p.features.push_back(tuner::combined_features(
        schedule::lower(k.sch, k.args, "replay", schedule::LowerOptions{.unroll = false}), c));
    p.gflops.push_back(acc.first / acc.second);
    if (index == fallback_index) p.fallback = static_cast<int>(p.configs.size());
    p.configs.push_back(c);
  }
  p.best = static_cast<int>(std::max_element(p.gflops.begin(), p.gflops.end()) - p.gflops.begin());
  return p;
}

struct Strategy {
  std::string name;
  bool use_model = true;
  double epsilon = 0.05;
  int rounds = 30;           // boosting rounds per retrain
  int replan_every = 16;     // results between plans (the plan is reused until then)
  bool rank_labels = false;  // labels: rank within the task instead of GFLOP/s / best
  int features = 0;          // 0 all, 1 lowered-IR only, 2 knobs only
};

std::vector<float> masked(const std::vector<float>& f, int which) {
  std::vector<float> out = f;
  if (which == 1) std::fill(out.begin() + tuner::kLoweredFeatures, out.end(), 0.0f);
  if (which == 2) std::fill(out.begin(), out.begin() + tuner::kLoweredFeatures, 0.0f);
  return out;
}

// Trials until the pool's best, and until one within 3 % of it, is measured.
std::pair<int, int> simulate(const Pool& p, const Strategy& s, int batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = static_cast<int>(p.configs.size());
  std::vector<bool> measured(n, false);
  std::vector<int> order;  // measured, in order
  auto measure = [&](int i) {
    measured[i] = true;
    order.push_back(i);
  };
  auto random_unmeasured = [&]() {
    std::vector<int> left;
    for (int i = 0; i < n; ++i)
      if (!measured[i]) left.push_back(i);
    return left[std::uniform_int_distribution<size_t>(0, left.size() - 1)(rng)];
  };
  if (p.fallback >= 0) measure(p.fallback);
  tuner::CostModel model;
  std::vector<int> plan;
  size_t plan_pos = 0, results_at_plan = 0;
  const double near = 0.97 * p.gflops[p.best];
  int to_near = -1;
  while (static_cast<int>(order.size()) < n && !measured[p.best]) {
    const bool stale = plan.empty() || order.size() - results_at_plan >= size_t(s.replan_every);
    if (s.use_model && stale && order.size() >= 8) {
      std::vector<std::vector<float>> X;
      std::vector<float> y;
      double best = 0;
      for (int i : order) best = std::max(best, p.gflops[i]);
      std::vector<int> sorted = order;
      std::sort(sorted.begin(), sorted.end(),
                [&](int a, int b) { return p.gflops[a] < p.gflops[b]; });
      for (size_t r = 0; r < sorted.size(); ++r) {
        X.push_back(masked(p.features[sorted[r]], s.features));
        y.push_back(s.rank_labels ? float(r) / sorted.size() : float(p.gflops[sorted[r]] / best));
      }
      model.fit(X, y, {}, s.rounds);
      std::vector<int> left;
      std::vector<std::vector<float>> LX;
      for (int i = 0; i < n; ++i)
        if (!measured[i]) {
          left.push_back(i);
          LX.push_back(masked(p.features[i], s.features));
        }
      std::vector<float> score = model.predict(LX);
      std::vector<size_t> idx(left.size());
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(),
                       [&](size_t a, size_t b) { return score[a] > score[b]; });
      plan.clear();
      for (size_t k = 0; k < idx.size() && k < 64; ++k) plan.push_back(left[idx[k]]);
      plan_pos = 0;
      results_at_plan = order.size();
    }
    for (int b = 0; b < batch && static_cast<int>(order.size()) < n; ++b) {
      int pick = -1;
      if (s.use_model && u(rng) >= s.epsilon)
        while (plan_pos < plan.size() && pick < 0) {
          int i = plan[plan_pos++];
          if (!measured[i]) pick = i;
        }
      if (pick < 0) pick = random_unmeasured();
      measure(pick);
      if (to_near < 0 && p.gflops[pick] >= near) to_near = static_cast<int>(order.size());
    }
  }
  int to_best = static_cast<int>(std::find(order.begin(), order.end(), p.best) - order.begin()) + 1;
  return {to_best, to_near < 0 ? to_best : to_near};
}

int median(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dbs;
  int seeds = 20, batch = 16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seeds" && i + 1 < argc)
      seeds = std::stoi(argv[++i]);
    else if (a == "--batch" && i + 1 < argc)
      batch = std::stoi(argv[++i]);
    else
      dbs.push_back(a);
  }
  if (dbs.empty()) {
    std::fprintf(stderr, "usage: kiln_tuner_replay DB [DB ...] [--seeds N] [--batch N]\n");
    return 2;
  }
  std::map<std::string, std::vector<tuner::Record>> by_workload;
  for (const std::string& path : dbs) {
    tuner::RecordDB db = tuner::RecordDB::open(path, tuner::RecordDB::Mode::kMustExist);
    for (const std::string& t : db.targets())
      for (const std::string& w : db.workloads(t))
        for (tuner::Record& r : db.records(w, t)) by_workload[w].push_back(std::move(r));
  }
  const std::vector<Strategy> strategies = {
      {"random", false, 1.0},
      {"xgb plan/64", true, 0.05, 30, 64},
      {"xgb plan/16", true, 0.05, 30, 16},
      {"xgb plan/16 rank", true, 0.05, 30, 16, true},
      {"xgb plan/16 100r", true, 0.05, 100, 16},
      {"xgb plan/16 eps.2", true, 0.2, 30, 16},
      {"xgb plan/16 IR only", true, 0.05, 30, 16, false, 1},
      {"xgb plan/16 knobs only", true, 0.05, 30, 16, false, 2},
  };
  for (const auto& [key, records] : by_workload) {
    Pool p = load_pool(key, records);
    std::printf("%s\n  pool %zu configs, best %.1f GFLOP/s, fallback %s\n", key.c_str(),
                p.configs.size(), p.gflops[p.best], p.fallback >= 0 ? "measured" : "absent");
    for (const Strategy& s : strategies) {
      std::vector<int> best, near;
      for (int seed = 0; seed < seeds; ++seed) {
        auto [b, n] = simulate(p, s, batch, 1000 + seed);
        best.push_back(b);
        near.push_back(n);
      }
      std::printf("  %-20s median trials to best %5d, to within 3%% %5d\n", s.name.c_str(),
                  median(best), median(near));
      std::fflush(stdout);
    }
  }
}
