// The search strategies over synthetic config spaces with synthetic
// objectives: no config is ever proposed twice (nor one visited by an earlier
// run), every tuner ends cleanly when its space is exhausted, the model-based
// tuner with a perfect cost model finds the optimum far sooner than random
// search, and the genetic tuner's generations get better.
#include "tuner/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

namespace kiln::tuner {
namespace {

using schedule::Config;
using schedule::ConfigSpace;

// 28 x 10 x 8 = 2240 configs.
ConfigSpace medium_space() {
  ConfigSpace s;
  s.define_split("tile_x", 64, 3);  // 28 exact factorizations
  s.define_split("tile_y", 48, 2);  // 10 divisors
  s.define_knob("unroll", {0, 1, 2, 4, 8, 16, 32, 64});
  return s;
}

// 5 x 3 x 6 = 90 configs, one knob with a single choice.
ConfigSpace small_space() {
  ConfigSpace s;
  s.define_split("a", 16, 2);
  s.define_knob("b", {1, 2, 3});
  s.define_knob("fixed", {7});
  s.define_split("c", 12, 2);
  return s;
}

// A synthetic speed: one peak at a fixed choice per knob, falling off with
// the distance of each knob's choice from it. Unique optimum, 100 GFLOP/s.
struct Objective {
  std::vector<int64_t> peak;
  double operator()(const Config& c) const {
    double d = 0;
    for (size_t k = 0; k < peak.size(); ++k) d += std::abs(double(c.choice_indices()[k] - peak[k]));
    return 100.0 / (1.0 + d);
  }
  std::vector<double> operator()(const std::vector<Config>& cs) const {
    std::vector<double> out;
    for (const Config& c : cs) out.push_back((*this)(c));
    return out;
  }
};

Objective medium_objective() { return {{17, 6, 5}}; }
Objective small_objective() { return {{3, 1, 0, 2}}; }

// Model: annealing; ModelWhole: the space scored whole (exhaustive_max).
enum class Kind { Random, Grid, GA, Model, ModelWhole };

std::unique_ptr<Tuner> make(Kind kind, const ConfigSpace& space, const Objective& f,
                            const std::vector<int64_t>& visited = {}, uint64_t seed = 1) {
  switch (kind) {
    case Kind::Random: return std::make_unique<RandomTuner>(space, visited, seed);
    case Kind::Grid: return std::make_unique<GridTuner>(space, visited);
    case Kind::GA: return std::make_unique<GATuner>(space, visited, GAOptions{16, 0.1}, seed);
    case Kind::Model:
    case Kind::ModelWhole: {
      ModelBasedOptions o;
      o.plan_size = 16;
      o.num_chains = 32;
      o.max_iters = 100;
      o.exhaustive_max = kind == Kind::ModelWhole ? space.size() : 0;
      return std::make_unique<ModelBasedTuner>(
          space, [f](const std::vector<Config>& cs) { return f(cs); }, visited, o, seed);
    }
  }
  return nullptr;
}

const Kind kAllKinds[] = {Kind::Random, Kind::Grid, Kind::GA, Kind::Model, Kind::ModelWhole};
const char* kind_name(Kind k) {
  const char* names[] = {"random", "grid", "ga", "model", "model (whole space)"};
  return names[static_cast<int>(k)];
}

// Runs a tuner to exhaustion in batches of `batch` (feeding the objective
// back); returns every proposed index in order.
std::vector<int64_t> run_to_end(Tuner& t, const Objective& f, int batch) {
  std::vector<int64_t> proposed;
  for (int guard = 0; guard < 100000; ++guard) {
    std::vector<Config> cs = t.next_batch(batch);
    if (cs.empty()) break;
    EXPECT_LE(static_cast<int>(cs.size()), batch);
    for (const Config& c : cs) proposed.push_back(c.index());
    t.update(cs, f(cs));
  }
  return proposed;
}

TEST(Search, EveryTunerProposesEachConfigOnceAndEndsCleanly) {
  for (Kind kind : kAllKinds) {
    for (int batch : {1, 7, 64, 200}) {
      SCOPED_TRACE(std::string(kind_name(kind)) + " batch " + std::to_string(batch));
      ConfigSpace space = small_space();
      auto t = make(kind, space, small_objective());
      EXPECT_FALSE(t->exhausted());
      std::vector<int64_t> proposed = run_to_end(*t, small_objective(), batch);
      std::set<int64_t> distinct(proposed.begin(), proposed.end());
      EXPECT_EQ(distinct.size(), proposed.size()) << "a config was proposed twice";
      EXPECT_EQ(static_cast<int64_t>(proposed.size()), space.size());
      EXPECT_EQ(*distinct.begin(), 0);
      EXPECT_EQ(*distinct.rbegin(), space.size() - 1);
      EXPECT_TRUE(t->exhausted());
      EXPECT_TRUE(t->next_batch(10).empty());
      EXPECT_EQ(t->best_gflops(), 100.0);  // every config was measured, so the peak too
      EXPECT_EQ(t->best_config().choice_indices(), small_objective().peak);
    }
  }
}

TEST(Search, GridProposesInIndexOrder) {
  GridTuner t(small_space(), {2, 3, 50});
  std::vector<int64_t> proposed = run_to_end(t, small_objective(), 8);
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 90; ++i)
    if (i != 2 && i != 3 && i != 50) want.push_back(i);
  EXPECT_EQ(proposed, want);
}

TEST(Search, SpacesOfOneConfig) {
  ConfigSpace empty;  // no knobs: one (empty) config
  ConfigSpace single;
  single.define_knob("only", {4});
  for (const ConfigSpace& space : {empty, single}) {
    for (Kind kind : kAllKinds) {
      SCOPED_TRACE(kind_name(kind));
      auto t = make(kind, space, Objective{std::vector<int64_t>(space.knob_names().size(), 0)});
      std::vector<Config> first = t->next_batch(5);
      ASSERT_EQ(first.size(), 1u);
      EXPECT_EQ(first[0].index(), 0);
      EXPECT_TRUE(t->next_batch(5).empty());
      EXPECT_TRUE(t->exhausted());
      // Resumed with that config measured: nothing to propose at all.
      auto resumed = make(kind, space, Objective{}, {0});
      EXPECT_TRUE(resumed->exhausted());
      EXPECT_TRUE(resumed->next_batch(5).empty());
    }
  }
}

TEST(Search, ResumeNeverProposesVisitedConfigs) {
  ConfigSpace space = medium_space();
  std::mt19937_64 rng(5);
  std::vector<int64_t> all(space.size());
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int64_t> visited(all.begin(), all.begin() + space.size() * 3 / 4);
  visited.push_back(-1);            // outside the space (an older template's index): ignored
  visited.push_back(space.size());  // likewise
  visited.push_back(visited[0]);    // repeated
  const std::set<int64_t> before(visited.begin(), visited.end());
  for (Kind kind : kAllKinds) {
    SCOPED_TRACE(kind_name(kind));
    auto t = make(kind, space, medium_objective(), visited);
    EXPECT_EQ(t->num_visited(), space.size() * 3 / 4);
    std::vector<int64_t> proposed = run_to_end(*t, medium_objective(), 50);
    std::set<int64_t> distinct(proposed.begin(), proposed.end());
    EXPECT_EQ(distinct.size(), proposed.size());
    EXPECT_EQ(static_cast<int64_t>(proposed.size()), space.size() - space.size() * 3 / 4);
    for (int64_t i : proposed) EXPECT_FALSE(before.count(i)) << "visited config " << i;
  }
}

TEST(Search, UpdateChecksSizesAndTracksTheBest) {
  RandomTuner t(small_space());
  std::vector<Config> cs = t.next_batch(3);
  EXPECT_THROW(t.update(cs, {1.0}), std::invalid_argument);
  t.update(cs, {0.0, 5.0, 2.0});
  EXPECT_EQ(t.best_gflops(), 5.0);
  EXPECT_EQ(t.best_config(), cs[1]);
  t.update({cs[0]}, {0.0});  // a failure never becomes the best
  EXPECT_EQ(t.best_config(), cs[1]);
}

// Trials until the optimum is proposed, or -1.
int64_t trials_to_optimum(Tuner& t, const Objective& f, int batch, int64_t limit) {
  int64_t trials = 0;
  while (trials < limit) {
    std::vector<Config> cs = t.next_batch(batch);
    if (cs.empty()) return -1;
    std::vector<double> g = f(cs);
    for (size_t i = 0; i < cs.size(); ++i)
      if (g[i] == 100.0) return trials + static_cast<int64_t>(i) + 1;
    trials += static_cast<int64_t>(cs.size());
    t.update(cs, g);
  }
  return -1;
}

// 28 x 10 x 8 x 12 x 6 = 161280 configs.
ConfigSpace large_space() {
  ConfigSpace s = medium_space();
  s.define_split("tile_z", 60, 2);  // 12 divisors
  s.define_knob("vec", {1, 2, 4, 8, 16, 32});
  return s;
}

TEST(Search, ModelBasedWithAnOracleFindsTheOptimumFarSoonerThanRandom) {
  struct Case {
    ConfigSpace space;
    Objective f;
    int64_t exhaustive_max;
    int64_t limit;  // random search needs (N + 1) / 2 on average
  };
  const Case cases[] = {
      {medium_space(), medium_objective(), 0, 64},           // anneal: 3% of the space
      {medium_space(), medium_objective(), 1 << 20, 16},     // scored whole: the first batch
      {large_space(), Objective{{17, 6, 5, 9, 1}}, 0, 160},  // anneal: 0.1% of the space
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("space " + std::to_string(c.space.size()) + " exhaustive_max " +
                 std::to_string(c.exhaustive_max));
    double random_total = 0;
    const int seeds = 5;
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      ModelBasedOptions o;
      o.plan_size = 32;
      o.exhaustive_max = c.exhaustive_max;
      int scorer_calls = 0;
      ModelBasedTuner model(
          c.space,
          [&](const std::vector<Config>& cs) {
            ++scorer_calls;
            return c.f(cs);
          },
          {}, o, seed);
      int64_t found = trials_to_optimum(model, c.f, 16, c.limit);
      EXPECT_GT(found, 0) << "not found within " << c.limit << " trials";
      EXPECT_GT(scorer_calls, 0);
      RandomTuner random(c.space, {}, seed);
      random_total += static_cast<double>(trials_to_optimum(random, c.f, 16, c.space.size()));
    }
    // The comparison itself: random search over these seeds needs far more.
    EXPECT_GT(random_total / seeds, 2.0 * c.limit);
  }
}

TEST(Search, ModelBasedIsRandomDuringWarmupAndExploresWithEpsilon) {
  ConfigSpace space = medium_space();
  const Objective f = medium_objective();
  ModelBasedOptions o;
  o.warmup = 40;
  o.plan_size = 32;
  int scorer_calls = 0;
  auto scorer = [&](const std::vector<Config>& cs) {
    ++scorer_calls;
    return f(cs);
  };
  ModelBasedTuner t(space, scorer, {}, o, 3);
  for (int round = 0; round < 3; ++round) {  // 3 x 16 = 48 proposals, 32 results before the 3rd
    std::vector<Config> cs = t.next_batch(16);
    EXPECT_EQ(scorer_calls, 0) << "scored before " << o.warmup << " results";
    t.update(cs, f(cs));
  }
  EXPECT_EQ(t.next_batch(16).size(), 16u);  // 48 results: planned now
  EXPECT_GT(scorer_calls, 0);
  EXPECT_EQ(t.num_plans(), 1);

  // epsilon = 1: every pick is random, so no plan is ever made.
  ModelBasedOptions all_random = o;
  all_random.warmup = 0;
  all_random.epsilon = 1.0;
  int calls = 0;
  ModelBasedTuner r(
      space,
      [&](const std::vector<Config>& v) {
        ++calls;
        return f(v);
      },
      {}, all_random, 3);
  std::vector<Config> batch = r.next_batch(64);
  EXPECT_EQ(batch.size(), 64u);
  EXPECT_EQ(r.num_plans(), 0);
  EXPECT_EQ(calls, 0);
}

TEST(Search, ModelBasedReplansAfterReplanAfterResults) {
  ConfigSpace space = medium_space();
  const Objective f = medium_objective();
  auto plans_after_rounds = [&](int replan_after, int rounds) {
    ModelBasedOptions o;
    o.plan_size = 64;
    o.replan_after = replan_after;
    ModelBasedTuner t(space, f, {}, o, 5);
    for (int r = 0; r < rounds; ++r) {
      std::vector<Config> cs = t.next_batch(16);
      t.update(cs, f(cs));
    }
    return t.num_plans();
  };
  // 4 rounds of 16: re-planning every 16 results plans once per round; the
  // default (plan_size = 64) plans once for all four.
  EXPECT_EQ(plans_after_rounds(16, 4), 4);
  EXPECT_EQ(plans_after_rounds(0, 4), 1);
  EXPECT_EQ(plans_after_rounds(32, 4), 2);
  ModelBasedOptions bad;
  bad.replan_after = -1;
  EXPECT_THROW(ModelBasedTuner(space, f, {}, bad), std::invalid_argument);
}

TEST(Search, ModelBasedScorerMustAnswerEveryConfig) {
  ModelBasedTuner t(medium_space(),
                    [](const std::vector<Config>& cs) { return std::vector<double>(1, 0.0); });
  EXPECT_THROW(t.next_batch(4), std::runtime_error);
  EXPECT_THROW(ModelBasedTuner(medium_space(), ScoreFn{}), std::invalid_argument);
}

TEST(Search, GeneticGenerationsImprove) {
  ConfigSpace space = medium_space();
  const Objective f = medium_objective();
  const int pop = 32;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    GATuner t(space, {}, GAOptions{pop, 0.1}, seed);
    std::vector<double> mean_of_generation;
    for (int gen = 0; gen < 10; ++gen) {
      std::vector<Config> cs = t.next_batch(pop);
      ASSERT_EQ(cs.size(), static_cast<size_t>(pop));
      std::vector<double> g = f(cs);
      mean_of_generation.push_back(std::accumulate(g.begin(), g.end(), 0.0) / pop);
      t.update(cs, g);
    }
    EXPECT_EQ(t.generation(), 10);
    // Random configs average about 8 GFLOP/s here; bred ones climb toward the
    // peak. No generation can stay there: only 25 configs lie within distance
    // 2 of the peak (33 GFLOP/s and up) and none is measured twice, so a
    // generation of 32 averages at most ~24 GFLOP/s once the best are taken.
    const double early = mean_of_generation[0];
    const double middle =
        (mean_of_generation[3] + mean_of_generation[4] + mean_of_generation[5]) / 3;
    EXPECT_GT(middle, 1.6 * early) << "generation 0: " << early << ", 3-5: " << middle;
    EXPECT_GE(t.best_gflops(), 50.0);  // within one choice of the peak
  }
}

TEST(Search, EarlyStopping) {
  EarlyStopping off;
  for (int i = 0; i < 100; ++i) off.observe(1.0);
  EXPECT_FALSE(off.should_stop());

  EarlyStopping s(3);
  EXPECT_TRUE(s.observe(0.0) == false);  // a failure is no improvement
  EXPECT_TRUE(s.observe(5.0));
  EXPECT_FALSE(s.observe(5.0));  // equal is no improvement
  EXPECT_FALSE(s.observe(4.0));
  EXPECT_FALSE(s.should_stop());
  EXPECT_TRUE(s.observe(6.0));
  EXPECT_EQ(s.trials_since_best(), 0);
  s.observe(1.0);
  s.observe(1.0);
  EXPECT_FALSE(s.should_stop());
  s.observe(0.0);
  EXPECT_TRUE(s.should_stop());
  EXPECT_EQ(s.best(), 6.0);
}

TEST(Search, MakeTunerByName) {
  for (const char* name : {"random", "grid", "ga"}) {
    auto t = make_tuner(name, small_space());
    EXPECT_EQ(t->name(), name);
    EXPECT_EQ(t->next_batch(4).size(), 4u);
  }
  EXPECT_THROW(make_tuner("xgb", small_space()), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::tuner
