// The search state of the tasks of one tuning run, and the cost model they
// share: what `kiln tune` (tune_loop.h) and the offline replay bench
// (bench/tuner/replay_search.cc) both drive, so that the replay measures the
// shipped search, not a copy of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_template.h"
#include "schedule/config_space.h"
#include "tuner/cost_model.h"
#include "tuner/records.h"
#include "tuner/search.h"
#include "tuner/tasks.h"

namespace kiln::tuner {

// One task's search: its space, its tuner and the features of every config
// it has lowered (cached by index).
struct TaskSearch {
  Task task;
  const ops::OpTemplate* tmpl = nullptr;
  ops::Workload workload;
  std::unique_ptr<Tuner> tuner;
  std::map<int64_t, std::vector<float>> features;    // config index -> features
  std::vector<std::pair<int64_t, double>> measured;  // (config index, GFLOP/s) of verified runs
  std::vector<int64_t> visited;                      // indices never to propose
  // Conv configs keep the fallback's channel blocks unless the run frees the
  // layout: the build then needs no layout transform between neighbouring
  // convs. {0, 0}: any layout.
  std::pair<int64_t, int64_t> layout{0, 0};
  // The target's ISA: its fallback, and which configs fit its registers
  // (OpTemplate::fits); the tuner's proposals that do not are dropped.
  Isa isa;
  double best_gflops = 0;
  int64_t trials = 0;  // records already in the database (resumed)
  // The template's fallback config, measured first when the database lacks
  // it: the build's default is the baseline every tuned record must beat,
  // and a few random candidates often do not.
  std::optional<schedule::Config> pending_fallback;
  // Configs whose only records are timeouts at a shorter limit than this
  // run's (timed_out_below): measured again, right after the fallback.
  std::vector<schedule::Config> pending_retries;

  // A task's search resumed from `history` (its records on this target):
  // measured configs are visited, verified ones train the model.
  // `isa` (the target's) decides the fallback. Timeouts at a limit below
  // timeout_s (this run's --timeout; 0: none) are not trials: their configs
  // become pending_retries.
  static std::unique_ptr<TaskSearch> resume(const Task& task, const std::vector<Record>& history,
                                            bool free_layout, const Isa& isa,
                                            double timeout_s = 0);

  // Features of a config (lowered loop IR before unrolling + knob values),
  // cached; zeros when the config does not lower.
  const std::vector<float>& features_of(const schedule::Config& cfg);

  // Up to n proposals of the tuner that are searchable(), the pending
  // fallback and retries first; other proposals are dropped unmeasured (the
  // tuner never proposes them again). Sets how many of the batch's leading
  // configs are not the tuner's own (the fallback and retries).
  std::vector<schedule::Config> next_batch(int n, size_t* not_from_tuner);
  // Whether the search measures a config here: it keeps the task's layout
  // (when fixed) and fits the ISA's registers.
  bool searchable(const schedule::Config& cfg) const;

  // Tells the tuner and the model's training set one batch's results
  // (GFLOP/s, 0 for failures); the first `not_from_tuner` configs are not
  // passed to the tuner, which did not propose them.
  void record(const std::vector<schedule::Config>& batch, const std::vector<double>& gflops,
              size_t not_from_tuner);
};

// One cost model shared by every task of a run: trained on all measured
// configs of every workload (this run's and earlier runs'), so that it
// transfers between tasks.
class SharedCostModel {
 public:
  void add_task(TaskSearch* t) { tasks_.push_back(t); }
  // Refits on every task's measured configs (labels: GFLOP/s over the task's
  // best, one ranking group per task) and the warm-start records.
  void retrain();
  // Loads the database's verified records of other workloads on `target_key`
  // (other models tuned earlier), up to `per_workload` per workload spread over
  // the speed range and `max_total` in all. Returns how many.
  size_t warm_start(const RecordDB& db, const std::string& target_key, size_t per_workload,
                    size_t max_total);
  // The predicted scores of configs of task `t` (zeros before training).
  std::vector<double> score(TaskSearch& t, const std::vector<schedule::Config>& cfgs) const;
  bool trained() const { return model_.trained(); }

 private:
  CostModel model_;
  std::vector<TaskSearch*> tasks_;
  std::vector<std::vector<float>> warm_X_;
  std::vector<float> warm_y_;
  std::vector<unsigned> warm_groups_;
};

// The options `kiln tune` gives the model-based tuner for batches of `batch`.
ModelBasedOptions model_based_options(int batch);

// The task's tuner by name (make_tuner), the xgb one scoring with `model`.
std::unique_ptr<Tuner> make_task_tuner(const std::string& name, TaskSearch& t,
                                       SharedCostModel& model, int batch, uint64_t seed = 1);

}  // namespace kiln::tuner
