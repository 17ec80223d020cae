// Search over one task's config space: which configs to measure next.
//
// A Tuner proposes batches of configs (next_batch) and learns their measured
// speed (update). Every tuner proposes each config of the space at most once,
// counting configs measured by an earlier run (the `visited` set passed at
// construction, read from the records database), so resuming never measures
// anything twice; a tuner whose space is exhausted returns an empty batch.
//
//   RandomTuner       uniform without repeats (the baseline)
//   GridTuner         index order
//   GATuner           genetic: crossover and mutation of knob choice indices
//   ModelBasedTuner   simulated annealing on a cost model's predictions, with
//                     epsilon-greedy random picks (AutoTVM's XGBTuner)
//
// Proposed configs are marked visited when proposed, not when measured: a
// candidate that failed to build or crashed is not retried either.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "schedule/config_space.h"

namespace kiln::tuner {

class Tuner {
 public:
  // `visited`: indices (Config::index) that must never be proposed, e.g.
  // those already in the records database. Indices outside the space are
  // ignored (a template whose space changed since).
  Tuner(schedule::ConfigSpace space, const std::vector<int64_t>& visited, uint64_t seed);
  virtual ~Tuner() = default;
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // Up to n configs never proposed (nor visited) before; fewer when fewer are
  // left, none when the space is exhausted.
  virtual std::vector<schedule::Config> next_batch(int n) = 0;
  // The measured speed of configs this tuner proposed (or any of the space),
  // in GFLOP/s, 0 for a candidate that failed. Sizes must match.
  virtual void update(const std::vector<schedule::Config>& configs,
                      const std::vector<double>& gflops);

  // True when every config has been proposed: next_batch returns nothing more.
  bool exhausted() const {
    return static_cast<int64_t>(visited_.size()) >= space_.size() && num_reserved() == 0;
  }
  int64_t num_visited() const { return static_cast<int64_t>(visited_.size()); }
  bool is_visited(int64_t index) const { return visited_.count(index) != 0; }
  const schedule::ConfigSpace& space() const { return space_; }
  // Best result reported through update() (0 and an empty config before one).
  double best_gflops() const { return best_gflops_; }
  const schedule::Config& best_config() const { return best_config_; }
  virtual std::string name() const = 0;

 protected:
  // Configs marked visited but not yet handed out by next_batch.
  virtual int64_t num_reserved() const { return 0; }
  // Marks an index visited; false if it already was.
  bool visit(int64_t index) { return visited_.insert(index).second; }
  // A uniformly random unvisited index, marked visited; -1 when exhausted.
  int64_t take_random_unvisited();
  std::mt19937_64& rng() { return rng_; }

 private:
  schedule::ConfigSpace space_;
  std::unordered_set<int64_t> visited_;
  std::mt19937_64 rng_;
  double best_gflops_ = 0;
  schedule::Config best_config_;
};

class RandomTuner : public Tuner {
 public:
  explicit RandomTuner(schedule::ConfigSpace space, const std::vector<int64_t>& visited = {},
                       uint64_t seed = 0);
  std::vector<schedule::Config> next_batch(int n) override;
  std::string name() const override { return "random"; }
};

class GridTuner : public Tuner {
 public:
  explicit GridTuner(schedule::ConfigSpace space, const std::vector<int64_t>& visited = {});
  std::vector<schedule::Config> next_batch(int n) override;
  std::string name() const override { return "grid"; }

 private:
  int64_t cursor_ = 0;
};

struct GAOptions {
  int population = 64;         // configs per generation, and size of the parent pool
  double mutation_prob = 0.1;  // per knob of a child
};

// A generation is `population` children of parents drawn from the best
// `population` configs measured so far (so the best ones survive: elitism),
// with probability proportional to their rank there (robust to the scale of
// the speeds and to one outlier). A child takes each knob's choice from one of
// its two parents (uniform crossover), then each knob mutates to a random
// choice with mutation_prob. Children already visited are redrawn; the first
// generation (and any shortfall) is random.
class GATuner : public Tuner {
 public:
  explicit GATuner(schedule::ConfigSpace space, const std::vector<int64_t>& visited = {},
                   GAOptions options = {}, uint64_t seed = 0);
  std::vector<schedule::Config> next_batch(int n) override;
  void update(const std::vector<schedule::Config>& configs,
              const std::vector<double>& gflops) override;
  std::string name() const override { return "ga"; }
  int generation() const { return generation_; }  // generations bred so far

 protected:
  int64_t num_reserved() const override { return static_cast<int64_t>(pending_.size()); }

 private:
  void breed();
  std::vector<int64_t> child_of(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

  GAOptions options_;
  std::deque<schedule::Config> pending_;  // this generation, not yet proposed
  // The best measured configs (at most `population`), best first.
  std::vector<std::pair<double, schedule::Config>> pool_;
  int generation_ = 0;
};

// Predicted scores of configs, higher is better (any scale): the cost model.
using ScoreFn = std::function<std::vector<double>(const std::vector<schedule::Config>&)>;

struct ModelBasedOptions {
  int plan_size = 64;  // configs chosen per annealing run
  // Results that make a plan stale (the model has been retrained on them):
  // 0 means plan_size. `kiln tune` re-plans after every batch.
  int replan_after = 0;
  int num_chains = 128;     // parallel annealing chains
  int max_iters = 500;      // annealing steps per run
  int stall_iters = 50;     // stop a run when the top plan_size set is unchanged this long
  double start_temp = 1.0;  // temperature, linear from start to 0 over max_iters, relative
                            // to the scale of the scores (their largest magnitude)
  double epsilon = 0.05;    // share of each batch drawn at random instead (exploration)
  // A space this small (configs) is scored whole instead of annealed: exact,
  // and no dearer than one annealing run. 0: always anneal.
  int64_t exhaustive_max = 16384;
  // Proposals before this many results have come back are random (a cost
  // model trained on nothing predicts nothing).
  int warmup = 0;
};

// Plans by simulated annealing, or, in a space of at most exhaustive_max
// configs, by scoring every unvisited config. Annealing chains start from the
// best measured configs, where the previous run's chains ended, and random
// points; each step moves every chain to a neighbour (one knob changed to
// another choice), accepted if its predicted score is higher or with
// probability exp(delta / (scale * T)). The plan is the best plan_size
// unvisited configs seen; batches take from it best first, each pick replaced
// by a random unvisited config with probability epsilon. A new plan is made
// when a pick needs one and the plan has run out or replan_after results have
// come back since the last (the model has been retrained by then).
class ModelBasedTuner : public Tuner {
 public:
  ModelBasedTuner(schedule::ConfigSpace space, ScoreFn score,
                  const std::vector<int64_t>& visited = {}, ModelBasedOptions options = {},
                  uint64_t seed = 0);
  std::vector<schedule::Config> next_batch(int n) override;
  void update(const std::vector<schedule::Config>& configs,
              const std::vector<double>& gflops) override;
  std::string name() const override { return "model"; }
  int num_plans() const { return num_plans_; }  // plans made so far

 private:
  void make_plan();
  void plan_exhaustively();
  std::vector<double> predict(const std::vector<schedule::Config>& configs);
  schedule::Config neighbour(const schedule::Config& c);

  ScoreFn score_;
  ModelBasedOptions options_;
  std::vector<schedule::Config> plan_;  // best first; may hold configs visited since
  size_t plan_pos_ = 0;
  std::vector<schedule::Config> chains_;  // where the last run's chains ended
  std::vector<std::pair<double, schedule::Config>> measured_best_;  // best few, best first
  int64_t results_ = 0, results_at_plan_ = 0;
  int num_plans_ = 0;
};

// Stops a task that has not improved in `patience` consecutive trials
// (kiln tune --early-stopping N). Patience 0 never stops.
class EarlyStopping {
 public:
  explicit EarlyStopping(int patience = 0) : patience_(patience) {}
  // One trial's result in GFLOP/s (0 for an error). True if it improved.
  bool observe(double gflops);
  bool should_stop() const { return patience_ > 0 && since_best_ >= patience_; }
  int trials_since_best() const { return since_best_; }
  double best() const { return best_; }

 private:
  int patience_;
  int since_best_ = 0;
  double best_ = 0;
};

// The one place a tuner is made by name (kiln tune --tuner, the replay
// bench): "random", "grid", "ga", or "xgb", the model-based tuner, which needs
// `score` (the cost model's prediction) and takes `model_options`. Throws
// std::invalid_argument for another name, or for "xgb" without a score.
std::unique_ptr<Tuner> make_tuner(const std::string& name, schedule::ConfigSpace space,
                                  const std::vector<int64_t>& visited = {}, uint64_t seed = 0,
                                  ScoreFn score = {}, ModelBasedOptions model_options = {});

}  // namespace kiln::tuner
