#include "tuner/task_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kiln::tuner {

const char* task_state_name(TaskState s) {
  switch (s) {
    case TaskState::Active: return "active";
    case TaskState::Capped: return "trial cap";
    case TaskState::EarlyStopped: return "early stopped";
    case TaskState::Exhausted: return "exhausted";
  }
  return "?";
}

namespace {

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TaskScheduler::TaskScheduler(std::vector<Task> tasks, SchedulerOptions options)
    : tasks_(std::move(tasks)), options_(std::move(options)), rng_(options_.seed) {
  if (options_.round_trials < 1) throw std::invalid_argument("round_trials must be >= 1");
  if (!options_.max_trials_of_task.empty() && options_.max_trials_of_task.size() != tasks_.size())
    throw std::invalid_argument("max_trials_of_task needs one entry per task");
  if (!options_.clock) options_.clock = steady_seconds;
  start_s_ = options_.clock();
  stats_.resize(tasks_.size());
  for (TaskStats& s : stats_) s.stopper = EarlyStopping(options_.early_stopping);
  alternatives_.resize(tasks_.size());
  for (const std::vector<std::string>& set : options_.implementation_sets) {
    std::vector<size_t> members;
    for (const std::string& key : set)
      for (size_t i = 0; i < tasks_.size(); ++i)
        if (tasks_[i].workload_key == key) members.push_back(i);
    for (size_t i : members)
      for (size_t j : members)
        if (i != j && std::find(alternatives_[i].begin(), alternatives_[i].end(), j) ==
                          alternatives_[i].end())
          alternatives_[i].push_back(j);
  }
}

double TaskScheduler::elapsed_s() const { return options_.clock() - start_s_; }

double TaskScheduler::remaining_s() const {
  if (options_.time_budget_s <= 0) return std::numeric_limits<double>::infinity();
  return std::max(0.0, options_.time_budget_s - elapsed_s());
}

void TaskScheduler::resume(size_t task, int64_t trials, double best_gflops) {
  TaskStats& s = stats_.at(task);
  if (trials <= 0) return;
  s.trials += trials;
  s.rounds = std::max<int>(
      s.rounds, static_cast<int>((trials + options_.round_trials - 1) / options_.round_trials));
  if (best_gflops > 0) s.stopper.observe(best_gflops);  // later trials must beat it
  s.cost_history.push_back(cost(task));
  check_caps(task);
}

int64_t TaskScheduler::cap(size_t task) const {
  return options_.max_trials_of_task.empty() ? options_.max_trials_per_task
                                             : options_.max_trials_of_task[task];
}

void TaskScheduler::check_caps(size_t task) {
  TaskStats& s = stats_[task];
  if (s.state != TaskState::Active) return;
  if (cap(task) > 0 && s.trials >= cap(task))
    s.state = TaskState::Capped;
  else if (s.stopper.should_stop())
    s.state = TaskState::EarlyStopped;
}

double TaskScheduler::fallback_gflops() const {
  double slowest = std::numeric_limits<double>::infinity();
  for (const TaskStats& s : stats_)
    if (s.stopper.best() > 0) slowest = std::min(slowest, s.stopper.best());
  return std::isfinite(slowest) ? slowest : 1.0;
}

double TaskScheduler::cost(size_t task) const {
  double g = stats_[task].stopper.best();
  return tasks_[task].flops / ((g > 0 ? g : fallback_gflops()) * 1e9);
}

double TaskScheduler::alternatives_cost(size_t task) const {
  double m = std::numeric_limits<double>::infinity();
  for (size_t j : alternatives_[task]) m = std::min(m, cost(j));
  return m;
}

double TaskScheduler::estimated_latency_s() const {
  double total = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    // A node's implementations count once, at the fastest (the first of equals).
    bool counted_elsewhere = false;
    for (size_t j : alternatives_[i])
      if (cost(j) < cost(i) || (cost(j) == cost(i) && j < i)) counted_elsewhere = true;
    if (!counted_elsewhere) total += tasks_[i].count * cost(i);
  }
  return total;
}

double TaskScheduler::gradient(size_t task) const {
  const TaskStats& s = stats_.at(task);
  const double c = cost(task);
  const int w = options_.backward_window;
  double backward = 0;
  const auto& h = s.cost_history;
  if (w > 0 && h.size() > static_cast<size_t>(w)) backward = (h.back() - h[h.size() - 1 - w]) / w;
  // Optimism 1: the cost keeps falling like 1/rounds.
  double next = c - c / std::max(1, s.rounds);
  // Optimism 2: the task reaches 1/beta of the best speed of its template.
  double group_best = 0;
  int group_measured = 0;
  for (size_t j = 0; j < tasks_.size(); ++j) {
    if (tasks_[j].template_name != tasks_[task].template_name) continue;
    if (stats_[j].stopper.best() <= 0) continue;
    ++group_measured;
    group_best = std::max(group_best, stats_[j].stopper.best());
  }
  if (group_measured > 1 && options_.beta > 0)
    next = std::min(next, options_.beta * tasks_[task].flops / (group_best * 1e9));
  double forward = next - c;
  // Alternatives: only a change of the node's fastest implementation counts.
  const double m = alternatives_cost(task);
  if (std::isfinite(m)) {
    forward = std::min(next, m) - std::min(c, m);
    if (c >= m) backward = 0;
  }
  return tasks_[task].count * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

std::optional<size_t> TaskScheduler::next_warm_up(const std::vector<size_t>& alive) const {
  // The models take turns, each with its heaviest task first
  // (Task::model_rank); equal ranks in task order.
  std::optional<size_t> pick;
  for (size_t i : alive)
    if (stats_[i].rounds == 0 && (!pick || tasks_[i].model_rank < tasks_[*pick].model_rank))
      pick = i;
  return pick;
}

std::optional<size_t> TaskScheduler::next_task() {
  // Finished work is reported as finished, even if the budget ran out with it.
  std::vector<size_t> alive;
  for (size_t i = 0; i < tasks_.size(); ++i)
    if (active(i)) alive.push_back(i);
  if (alive.empty()) {
    stop_reason_ = "every task finished";
    return std::nullopt;
  }
  if (options_.time_budget_s > 0 && elapsed_s() >= options_.time_budget_s) {
    stop_reason_ = "time budget spent";
    return std::nullopt;
  }
  if (options_.total_trials > 0 && run_trials_ >= options_.total_trials) {
    stop_reason_ = "trial budget spent";
    return std::nullopt;
  }
  stop_reason_.clear();
  if (std::optional<size_t> i = next_warm_up(alive)) return i;
  std::uniform_real_distribution<double> u(0, 1);
  auto random_alive = [&] {
    return alive[std::uniform_int_distribution<size_t>(0, alive.size() - 1)(rng_)];
  };
  if (u(rng_) < options_.eps_greedy) return random_alive();
  std::vector<double> grads;
  for (size_t i : alive) grads.push_back(gradient(i));
  auto [lo, hi] = std::minmax_element(grads.begin(), grads.end());
  if (*lo == *hi) return random_alive();
  return alive[lo - grads.begin()];
}

int TaskScheduler::round_size(size_t task) const {
  int64_t n = options_.round_trials;
  if (cap(task) > 0) n = std::min(n, cap(task) - stats_.at(task).trials);
  if (options_.total_trials > 0) n = std::min(n, options_.total_trials - run_trials_);
  return static_cast<int>(std::max<int64_t>(n, 0));
}

void TaskScheduler::record(size_t task, const std::vector<double>& gflops) {
  TaskStats& s = stats_.at(task);
  for (double g : gflops) s.stopper.observe(g);
  s.trials += static_cast<int64_t>(gflops.size());
  run_trials_ += static_cast<int64_t>(gflops.size());
  ++s.rounds;
  s.cost_history.push_back(cost(task));
  check_caps(task);
}

void TaskScheduler::mark_capped(size_t task) {
  TaskStats& s = stats_.at(task);
  if (s.state == TaskState::Active) s.state = TaskState::Capped;
}

void TaskScheduler::mark_exhausted(size_t task) {
  TaskStats& s = stats_.at(task);
  if (s.state == TaskState::Active) s.state = TaskState::Exhausted;
}

}  // namespace kiln::tuner
