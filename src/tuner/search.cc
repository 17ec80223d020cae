#include "tuner/search.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace kiln::tuner {

using schedule::Config;
using schedule::ConfigSpace;

// ---- Tuner ---------------------------------------------------------------------

Tuner::Tuner(ConfigSpace space, const std::vector<int64_t>& visited, uint64_t seed)
    : space_(std::move(space)), rng_(seed) {
  for (int64_t i : visited)
    if (i >= 0 && i < space_.size()) visited_.insert(i);
}

void Tuner::update(const std::vector<Config>& configs, const std::vector<double>& gflops) {
  if (configs.size() != gflops.size())
    throw std::invalid_argument("tuner update: " + std::to_string(configs.size()) +
                                " configs but " + std::to_string(gflops.size()) + " results");
  for (size_t i = 0; i < configs.size(); ++i) {
    if (gflops[i] > best_gflops_) {
      best_gflops_ = gflops[i];
      best_config_ = configs[i];
    }
  }
}

int64_t Tuner::take_random_unvisited() {
  const int64_t size = space_.size();
  const int64_t left = size - static_cast<int64_t>(visited_.size());
  if (left <= 0) return -1;
  // Rejection sampling is cheap while a fair share of the space is left; a
  // nearly exhausted space (then small enough to have been measured almost
  // fully) is scanned for the k-th unvisited index instead.
  std::uniform_int_distribution<int64_t> any(0, size - 1);
  for (int attempt = 0; attempt < 64; ++attempt) {
    int64_t i = any(rng_);
    if (visit(i)) return i;
  }
  int64_t k = std::uniform_int_distribution<int64_t>(0, left - 1)(rng_);
  for (int64_t i = 0; i < size; ++i)
    if (!is_visited(i) && k-- == 0) {
      visit(i);
      return i;
    }
  return -1;  // unreachable: `left` unvisited indices exist
}

// ---- RandomTuner, GridTuner ------------------------------------------------------

RandomTuner::RandomTuner(ConfigSpace space, const std::vector<int64_t>& visited, uint64_t seed)
    : Tuner(std::move(space), visited, seed) {}

std::vector<Config> RandomTuner::next_batch(int n) {
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n) {
    int64_t i = take_random_unvisited();
    if (i < 0) break;
    out.push_back(space().get(i));
  }
  return out;
}

GridTuner::GridTuner(ConfigSpace space, const std::vector<int64_t>& visited)
    : Tuner(std::move(space), visited, 0) {}

std::vector<Config> GridTuner::next_batch(int n) {
  std::vector<Config> out;
  for (; cursor_ < space().size() && static_cast<int>(out.size()) < n; ++cursor_)
    if (visit(cursor_)) out.push_back(space().get(cursor_));
  return out;
}

// ---- GATuner ---------------------------------------------------------------------

GATuner::GATuner(ConfigSpace space, const std::vector<int64_t>& visited, GAOptions options,
                 uint64_t seed)
    : Tuner(std::move(space), visited, seed), options_(options) {
  if (options_.population < 1) throw std::invalid_argument("GA population must be >= 1");
}

std::vector<Config> GATuner::next_batch(int n) {
  std::vector<Config> out;
  while (static_cast<int>(out.size()) < n) {
    if (pending_.empty()) breed();
    if (pending_.empty()) break;  // exhausted
    out.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  return out;
}

void GATuner::update(const std::vector<Config>& configs, const std::vector<double>& gflops) {
  Tuner::update(configs, gflops);
  for (size_t i = 0; i < configs.size(); ++i)
    if (gflops[i] > 0) pool_.emplace_back(gflops[i], configs[i]);
  std::stable_sort(pool_.begin(), pool_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  if (pool_.size() > static_cast<size_t>(options_.population)) pool_.resize(options_.population);
}

std::vector<int64_t> GATuner::child_of(const std::vector<int64_t>& a,
                                       const std::vector<int64_t>& b) {
  const std::vector<int64_t> sizes = space().knob_sizes();
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<int64_t> child(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    child[k] = u(rng()) < 0.5 ? a[k] : b[k];
    if (u(rng()) < options_.mutation_prob)
      child[k] = std::uniform_int_distribution<int64_t>(0, sizes[k] - 1)(rng());
  }
  return child;
}

void GATuner::breed() {
  ++generation_;
  std::vector<double> weights;
  for (size_t r = 0; r < pool_.size(); ++r) weights.push_back(double(pool_.size() - r));  // rank
  for (int c = 0; c < options_.population; ++c) {
    int64_t index = -1;
    // Children of fit parents; a few redraws when a child was measured
    // already (late generations converge), then a random config.
    for (int attempt = 0; !pool_.empty() && attempt < 16 && index < 0; ++attempt) {
      std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
      const Config& a = pool_[pick(rng())].second;
      const Config& b = pool_[pick(rng())].second;
      int64_t i = space().from_choices(child_of(a.choice_indices(), b.choice_indices())).index();
      if (visit(i)) index = i;
    }
    if (index < 0) index = take_random_unvisited();
    if (index < 0) return;  // exhausted
    pending_.push_back(space().get(index));
  }
}

// ---- ModelBasedTuner -------------------------------------------------------------

namespace {

// The best `capacity` unvisited configs offered so far, each index once.
class TopSet {
 public:
  explicit TopSet(size_t capacity) : capacity_(capacity) {}

  // True if the set changed.
  bool offer(double score, const Config& c) {
    if (capacity_ == 0 || configs_.count(c.index())) return false;
    if (by_score_.size() >= capacity_) {
      auto worst = by_score_.begin();
      if (score <= worst->first) return false;
      configs_.erase(worst->second);
      by_score_.erase(worst);
    }
    by_score_.emplace(score, c.index());
    configs_.emplace(c.index(), c);
    return true;
  }

  std::vector<Config> best_first() const {
    std::vector<Config> out;
    for (auto it = by_score_.rbegin(); it != by_score_.rend(); ++it)
      out.push_back(configs_.at(it->second));
    return out;
  }

 private:
  size_t capacity_;
  std::set<std::pair<double, int64_t>> by_score_;  // ascending; ties by index
  std::unordered_map<int64_t, Config> configs_;
};

}  // namespace

ModelBasedTuner::ModelBasedTuner(ConfigSpace space, ScoreFn score,
                                 const std::vector<int64_t>& visited, ModelBasedOptions options,
                                 uint64_t seed)
    : Tuner(std::move(space), visited, seed), score_(std::move(score)), options_(options) {
  if (!score_) throw std::invalid_argument("model-based tuner needs a score function");
  if (options_.plan_size < 1 || options_.num_chains < 1 || options_.max_iters < 0 ||
      options_.replan_after < 0)
    throw std::invalid_argument(
        "model-based tuner: plan_size and num_chains must be >= 1, replan_after >= 0");
}

std::vector<Config> ModelBasedTuner::next_batch(int n) {
  std::vector<Config> out;
  std::uniform_real_distribution<double> u(0, 1);
  const bool warm = results_ >= options_.warmup;
  // The model has learnt from replan_after results since the last plan: plan
  // again, but only when a pick needs the plan, and once per batch at most.
  const int replan_after = options_.replan_after > 0 ? options_.replan_after : options_.plan_size;
  bool stale = num_plans_ == 0 || results_ - results_at_plan_ >= replan_after;
  bool planned = false;
  auto from_plan = [&]() -> int64_t {
    while (true) {
      if (!stale) {
        while (plan_pos_ < plan_.size()) {
          int64_t i = plan_[plan_pos_++].index();
          if (visit(i)) return i;
        }
      }
      if (planned) return -1;
      make_plan();
      planned = true;
      stale = false;
    }
  };
  while (static_cast<int>(out.size()) < n) {
    int64_t index = -1;
    if (warm && u(rng()) >= options_.epsilon) index = from_plan();
    if (index < 0) index = take_random_unvisited();
    if (index < 0) break;  // exhausted
    out.push_back(space().get(index));
  }
  return out;
}

void ModelBasedTuner::update(const std::vector<Config>& configs,
                             const std::vector<double>& gflops) {
  Tuner::update(configs, gflops);
  results_ += static_cast<int64_t>(configs.size());
  for (size_t i = 0; i < configs.size(); ++i)
    if (gflops[i] > 0) measured_best_.emplace_back(gflops[i], configs[i]);
  std::stable_sort(measured_best_.begin(), measured_best_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t keep = static_cast<size_t>(std::max(1, options_.num_chains / 4));
  if (measured_best_.size() > keep) measured_best_.resize(keep);
}

Config ModelBasedTuner::neighbour(const Config& c) {
  const std::vector<int64_t> sizes = space().knob_sizes();
  std::vector<size_t> movable;
  for (size_t k = 0; k < sizes.size(); ++k)
    if (sizes[k] > 1) movable.push_back(k);
  if (movable.empty()) return c;
  std::vector<int64_t> choices = c.choice_indices();
  size_t k = movable[std::uniform_int_distribution<size_t>(0, movable.size() - 1)(rng())];
  // Another choice of knob k, uniformly.
  int64_t other = std::uniform_int_distribution<int64_t>(0, sizes[k] - 2)(rng());
  choices[k] = other >= choices[k] ? other + 1 : other;
  return space().from_choices(choices);
}

std::vector<double> ModelBasedTuner::predict(const std::vector<Config>& configs) {
  std::vector<double> s = score_(configs);
  if (s.size() != configs.size())
    throw std::runtime_error("cost model returned " + std::to_string(s.size()) + " scores for " +
                             std::to_string(configs.size()) + " configs");
  return s;
}

void ModelBasedTuner::plan_exhaustively() {
  TopSet top(static_cast<size_t>(options_.plan_size));
  std::vector<Config> chunk;
  auto flush = [&] {
    std::vector<double> scores = predict(chunk);
    for (size_t i = 0; i < chunk.size(); ++i) top.offer(scores[i], chunk[i]);
    chunk.clear();
  };
  for (int64_t i = 0; i < space().size(); ++i) {
    if (is_visited(i)) continue;
    chunk.push_back(space().get(i));
    if (chunk.size() == 4096) flush();
  }
  if (!chunk.empty()) flush();
  plan_ = top.best_first();
}

void ModelBasedTuner::make_plan() {
  ++num_plans_;
  results_at_plan_ = results_;
  plan_.clear();
  plan_pos_ = 0;
  if (exhausted()) return;

  if (space().size() <= options_.exhaustive_max) return plan_exhaustively();

  // Start points: the best measured configs, where the last run's chains
  // ended, then random ones.
  const size_t chains = static_cast<size_t>(options_.num_chains);
  std::vector<Config> points;
  for (const auto& [g, c] : measured_best_)
    if (points.size() < chains) points.push_back(c);
  for (const Config& c : chains_)
    if (points.size() < chains) points.push_back(c);
  while (points.size() < chains) points.push_back(space().random(rng()));

  std::vector<double> scores = predict(points);
  TopSet top(static_cast<size_t>(options_.plan_size));
  double scale = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    scale = std::max(scale, std::abs(scores[i]));
    if (!is_visited(points[i].index())) top.offer(scores[i], points[i]);
  }

  std::uniform_real_distribution<double> u(0, 1);
  int stalled = 0;
  for (int iter = 0; iter < options_.max_iters && stalled < options_.stall_iters; ++iter) {
    const double temp = options_.start_temp * (1.0 - double(iter) / options_.max_iters);
    std::vector<Config> next;
    for (const Config& p : points) next.push_back(neighbour(p));
    std::vector<double> next_scores = predict(next);
    bool changed = false;
    for (size_t i = 0; i < points.size(); ++i) {
      scale = std::max(scale, std::abs(next_scores[i]));
      if (!is_visited(next[i].index())) changed |= top.offer(next_scores[i], next[i]);
      const double delta = next_scores[i] - scores[i];
      const double s = scale > 0 ? scale : 1.0;
      if (delta >= 0 || (temp > 0 && u(rng()) < std::exp(delta / (s * temp)))) {
        points[i] = next[i];
        scores[i] = next_scores[i];
      }
    }
    stalled = changed ? 0 : stalled + 1;
  }
  plan_ = top.best_first();
  chains_ = std::move(points);
}

// ---- EarlyStopping, make_tuner ----------------------------------------------------

bool EarlyStopping::observe(double gflops) {
  if (gflops > best_) {
    best_ = gflops;
    since_best_ = 0;
    return true;
  }
  ++since_best_;
  return false;
}

std::unique_ptr<Tuner> make_tuner(const std::string& name, ConfigSpace space,
                                  const std::vector<int64_t>& visited, uint64_t seed, ScoreFn score,
                                  ModelBasedOptions model_options) {
  if (name == "random") return std::make_unique<RandomTuner>(std::move(space), visited, seed);
  if (name == "grid") return std::make_unique<GridTuner>(std::move(space), visited);
  if (name == "ga") return std::make_unique<GATuner>(std::move(space), visited, GAOptions{}, seed);
  if (name == "xgb") {
    if (!score) throw std::invalid_argument("the xgb tuner needs a cost model's score function");
    return std::make_unique<ModelBasedTuner>(std::move(space), std::move(score), visited,
                                             model_options, seed);
  }
  throw std::invalid_argument("unknown tuner '" + name + "' (xgb, random, grid, ga)");
}

}  // namespace kiln::tuner
