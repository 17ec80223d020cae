// Which task gets the next round of trials: TVM auto-scheduler's gradient
// task scheduler (Zheng et al., Ansor, OSDI 2020, section 6).
//
// The objective is the models' template latency, f = sum_i count_i * c_i,
// where c_i = flops_i / best GFLOP/s_i is task i's best latency so far. Each
// round goes to the task whose next round is expected to cut f most:
//
//   grad_i = count_i * (alpha * backward_i + (1 - alpha) * forward_i)
//   backward_i = (c_i(r) - c_i(r - w)) / w        how fast c_i fell over its
//                                                  last w rounds (0 before w)
//   forward_i  = min(c_i - c_i / r,  beta * flops_i / best_in_group) - c_i
//                                                  optimism: c_i keeps falling
//                                                  like 1/rounds, or reaches
//                                                  1/beta of the speed the best
//                                                  task of its template reached
//
// and the most negative grad wins (ties at random).
//
// Implementations of one node (a 3x3 stride-1 Conv: direct and Winograd;
// SchedulerOptions::implementation_sets) are alternatives: the build runs the
// faster, so the objective counts min_i c_i over them once, and a task's
// gradient is the change of that minimum: min(next_i, m) - min(c_i, m), m the
// best of the others (its backward term only while it is the minimum). A
// losing implementation gets rounds only while its optimistic next cost
// could overtake the winner. Before that every task
// gets one round (warm-up: by Task::model_rank, the models taking turns,
// each with its heaviest task first), and with probability eps_greedy a
// random active task is picked instead. A task stops when it reaches its
// trial cap, its early-stopping patience, or its tuner's space is exhausted;
// the run stops when no task is active, the total trial budget is spent, or
// the time budget is spent.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tuner/search.h"
#include "tuner/tasks.h"

namespace kiln::tuner {

struct SchedulerOptions {
  int round_trials = 64;            // trials per round (one batch of measurements)
  int64_t total_trials = 0;         // trials of this run over all tasks; 0: no bound
  int64_t max_trials_per_task = 0;  // including resumed ones; 0: no cap
  int early_stopping = 0;           // stop a task after this many trials without gain; 0: off
  double time_budget_s = 0;         // wall-clock seconds for the run; 0: none
  double alpha = 0.2;               // weight of the backward (observed) gradient
  int backward_window = 3;          // rounds
  double beta = 2.0;                // see forward_i above
  double eps_greedy = 0.05;         // chance of a random task per round
  uint64_t seed = 0;
  std::function<double()> clock;  // seconds, for the time budget; default steady_clock
  // Per task, replacing max_trials_per_task where non-empty (one entry per
  // task): a job's models may ask for different trial counts (tuner/job.h).
  std::vector<int64_t> max_trials_of_task;
  // Workload keys of the implementations of one node, per node with more
  // than one (driver::template_workload_sets); keys of no task are ignored.
  std::vector<std::vector<std::string>> implementation_sets;
};

enum class TaskState { Active, Capped, EarlyStopped, Exhausted };
const char* task_state_name(TaskState s);  // "active", "trial cap", "early stopped", "exhausted"

class TaskScheduler {
 public:
  TaskScheduler(std::vector<Task> tasks, SchedulerOptions options = {});

  // Before the first next_task: trials a task already has (from the records
  // database) and the best GFLOP/s among them. Counts toward its trial cap
  // (not toward total_trials) and is the level later trials must beat.
  void resume(size_t task, int64_t trials, double best_gflops);

  // The task that gets the next round, or nullopt when the run is over
  // (stop_reason() says why).
  std::optional<size_t> next_task();
  // Trials for the next round of `task`: round_trials, fewer near its cap or
  // the total budget.
  int round_size(size_t task) const;
  // The results of one round of `task`, GFLOP/s per trial, 0 for failures.
  void record(size_t task, const std::vector<double>& gflops);
  // The task's tuner has no config left to propose.
  void mark_exhausted(size_t task);
  // The task's trial cap is reached counting other runs' records and claims.
  void mark_capped(size_t task);

  const std::vector<Task>& tasks() const { return tasks_; }
  TaskState state(size_t task) const { return stats_.at(task).state; }
  int64_t trials(size_t task) const { return stats_.at(task).trials; }
  int rounds(size_t task) const { return stats_.at(task).rounds; }
  double best_gflops(size_t task) const { return stats_.at(task).stopper.best(); }
  int64_t run_trials() const { return run_trials_; }  // this run, all tasks
  double elapsed_s() const;
  // Seconds left of the time budget (infinity without one, 0 when spent):
  // next_task() checks the budget between rounds, and the tuning loop ends a
  // round's measurements when this reaches 0.
  double remaining_s() const;
  // Why next_task() returned nullopt; empty while the run goes on.
  const std::string& stop_reason() const { return stop_reason_; }
  // Estimated template latency of the models, seconds: sum of count * flops /
  // best speed; a task without a result is assumed to run at the slowest
  // speed any task reached (1 GFLOP/s before any).
  double estimated_latency_s() const;
  // The scheduler's grad_i (<= 0; more negative: more to gain).
  double gradient(size_t task) const;

 private:
  struct TaskStats {
    TaskState state = TaskState::Active;
    int64_t trials = 0;
    int rounds = 0;
    EarlyStopping stopper;
    std::vector<double> cost_history;  // best latency after each round, seconds
  };

  int64_t cap(size_t task) const;  // the task's trial cap; 0: none
  // The warm-up's next task among `alive`: the one without a round yet with
  // the smallest Task::model_rank; nullopt once every alive task had one.
  std::optional<size_t> next_warm_up(const std::vector<size_t>& alive) const;
  double cost(size_t task) const;  // best latency of one call, seconds (estimated if none)
  double fallback_gflops() const;
  // The best cost among `task`'s alternatives (infinity without any).
  double alternatives_cost(size_t task) const;
  bool active(size_t task) const { return stats_[task].state == TaskState::Active; }
  void check_caps(size_t task);

  std::vector<Task> tasks_;
  SchedulerOptions options_;
  std::vector<TaskStats> stats_;
  std::vector<std::vector<size_t>> alternatives_;  // per task: the other implementations
  std::mt19937_64 rng_;
  double start_s_;
  int64_t run_trials_ = 0;
  std::string stop_reason_;
};

}  // namespace kiln::tuner
