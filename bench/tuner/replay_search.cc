// Replays kiln's real search offline on configs already measured, to compare
// search settings without the machine's noise.
//
//   kiln_tuner_replay DB [DB ...] [--seeds N] [--batch N]
//
// For each workload of the databases (every target, records pooled), the
// pool is its verified configs with their measured GFLOP/s. A simulated run
// is `kiln tune`'s own search (tuner/task_search.h): a TaskSearch that
// measures the template's fallback first, the tuner made by make_tuner (the
// real ModelBasedTuner with kiln tune's options, or the random tuner), and
// the SharedCostModel retrained after every batch. Only "measuring" differs:
// a proposal's speed is looked up in the pool, and every config outside the
// pool is marked visited, so the tuner proposes pool configs only. It prints,
// per strategy, the median trials over the seeds until the pool's best config
// is found and until one within 3 % of it is. Random order is the baseline.
//
// The pool is what earlier searches proposed, not the whole space, so the
// numbers rank strategies; they do not predict a live run's trials.
#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "tuner/records.h"
#include "tuner/task_search.h"

namespace {

using namespace kiln;

// Spaces larger than this are skipped: every config outside the pool is
// listed as visited.
constexpr int64_t kMaxSpace = 4'000'000;

// The fallback is the one this machine's builds use.
const Isa& host_isa() {
  static const Isa isa = codegen::Target::host().isa();
  return isa;
}

struct Pool {
  tuner::Task task;
  std::map<int64_t, double> gflops;  // config index -> mean measured GFLOP/s
  int64_t best = -1;                 // index of the fastest config
};

Pool load_pool(const std::string& key, const std::vector<tuner::Record>& records) {
  Pool p;
  ops::Workload w = ops::Workload::parse(key);
  const ops::OpTemplate& tmpl = ops::get_template(w.template_name);
  p.task = {key, w.template_name, 1, tmpl.flops(w), 1.0};
  schedule::ConfigSpace space = tmpl.space(w);
  std::map<int64_t, std::pair<double, int>> sums;
  for (const tuner::Record& r : records) {
    if (r.error != tuner::ErrorClass::kOk || r.gflops <= 0) continue;
    try {
      auto& [sum, n] = sums[schedule::Config::from_json(space, r.config_json).index()];
      sum += r.gflops;
      ++n;
    } catch (const std::exception&) {
      // A record of an older space.
    }
  }
  for (auto& [index, acc] : sums) {
    p.gflops[index] = acc.first / acc.second;
    if (p.best < 0 || p.gflops[index] > p.gflops[p.best]) p.best = index;
  }
  return p;
}

struct Strategy {
  std::string name;
  std::string tuner;     // make_tuner's name
  int replan_after = 0;  // 0: kiln tune's (every batch)
  double epsilon = -1;   // < 0: kiln tune's
};

// Trials until the pool's best, and until one within 3 % of it, is measured.
std::pair<int, int> simulate(const Pool& p, const Strategy& s, int batch, uint64_t seed) {
  auto search = tuner::TaskSearch::resume(p.task, {}, /*free_layout=*/true, host_isa());
  tuner::TaskSearch& t = *search;
  schedule::ConfigSpace space = t.tmpl->space(t.workload);
  if (t.pending_fallback && !p.gflops.count(t.pending_fallback->index()))
    t.pending_fallback.reset();  // never measured: nothing to replay
  for (int64_t i = 0; i < space.size(); ++i)
    if (!p.gflops.count(i)) t.visited.push_back(i);
  tuner::SharedCostModel model;
  model.add_task(&t);
  tuner::ModelBasedOptions opts = tuner::model_based_options(batch);
  if (s.replan_after > 0) opts.replan_after = s.replan_after;
  if (s.epsilon >= 0) opts.epsilon = s.epsilon;
  tuner::ScoreFn score;
  if (s.tuner == "xgb")
    score = [&](const std::vector<schedule::Config>& cfgs) {
      // Configs outside the pool are visited: never planned, so not lowered.
      std::vector<schedule::Config> in_pool;
      for (const auto& c : cfgs)
        if (p.gflops.count(c.index())) in_pool.push_back(c);
      std::vector<double> pool_scores = model.score(t, in_pool), out;
      // Below every pool config, on the scores' own scale (annealing's
      // temperature is relative to the largest magnitude).
      double low = pool_scores.empty()
                       ? 0.0
                       : *std::min_element(pool_scores.begin(), pool_scores.end()) - 1.0;
      size_t k = 0;
      for (const auto& c : cfgs) out.push_back(p.gflops.count(c.index()) ? pool_scores[k++] : low);
      return out;
    };
  t.tuner = tuner::make_tuner(s.tuner, space, t.visited, seed, score, opts);

  const double near = 0.97 * p.gflops.at(p.best);
  int trials = 0, to_near = -1, to_best = -1;
  while (to_best < 0) {
    size_t not_from_tuner = 0;
    std::vector<schedule::Config> cfgs = t.next_batch(batch, &not_from_tuner);
    if (cfgs.empty()) break;
    std::vector<double> gflops;
    for (const auto& c : cfgs) {
      gflops.push_back(p.gflops.at(c.index()));
      ++trials;
      if (to_near < 0 && gflops.back() >= near) to_near = trials;
      if (to_best < 0 && c.index() == p.best) to_best = trials;
    }
    t.record(cfgs, gflops, not_from_tuner);
    if (s.tuner == "xgb") model.retrain();
  }
  if (to_best < 0)
    to_best = trials;  // the tuner ran out first (cannot happen: best is in the pool)
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
      seeds = std::max(1, std::stoi(argv[++i]));
    else if (a == "--batch" && i + 1 < argc)
      batch = std::max(1, std::stoi(argv[++i]));
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
      {"random", "random"},
      {"xgb (kiln tune)", "xgb"},
      {"xgb plan/64", "xgb", 64},
      {"xgb eps.2", "xgb", 0, 0.2},
  };
  for (const auto& [key, records] : by_workload) {
    Pool p = load_pool(key, records);
    if (p.best < 0) {
      std::printf("%s\n  no verified record fits this kiln's space: skipped\n", key.c_str());
      continue;
    }
    const int64_t space_size =
        ops::get_template(p.task.template_name).space(ops::Workload::parse(key)).size();
    if (space_size > kMaxSpace) {
      std::printf("%s\n  space of %lld configs: too large to replay, skipped\n", key.c_str(),
                  static_cast<long long>(space_size));
      continue;
    }
    schedule::Config fallback =
        ops::get_template(p.task.template_name).fallback(ops::Workload::parse(key), host_isa());
    std::printf("%s\n  pool %zu of %lld configs, best %.1f GFLOP/s, fallback %s\n", key.c_str(),
                p.gflops.size(), static_cast<long long>(space_size), p.gflops.at(p.best),
                p.gflops.count(fallback.index()) ? "measured" : "absent");
    for (const Strategy& s : strategies) {
      std::vector<int> best, near;
      for (int seed = 0; seed < seeds; ++seed) {
        auto [b, n] = simulate(p, s, batch, 1000 + static_cast<uint64_t>(seed));
        best.push_back(b);
        near.push_back(n);
      }
      std::printf("  %-20s median trials to best %5d, to within 3%% %5d\n", s.name.c_str(),
                  median(best), median(near));
      std::fflush(stdout);
    }
  }
}
