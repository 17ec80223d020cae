// The tuning engine: tasks -> search -> safe measurement -> records.
//
//   for each round the task scheduler hands out (task_scheduler.h):
//     batch   = the task's tuner proposes configs (task_search.h; the
//               fallback first when the database lacks it)
//     batch   = sink.claim(batch)         (record_sink.h: configs another run
//               recorded or holds are dropped, the trial cap counts every run)
//     results = measure_batch(batch)      (measure.h: a worker process each)
//     sink.add_batch(records)             (stored before anything else; while
//               the database is locked (RecordDBBusy) the round is kept and
//               retried with backoff, 0.1 s doubling to 5 s; on any other
//               error its records go to sink.unsaved_path() and the run ends)
//     tuner, scheduler and cost model learn from the results
//
// `kiln tune` parses arguments and draws progress around tune(); the replay
// bench drives the same TaskSearch and SharedCostModel offline.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "tuner/measure.h"
#include "tuner/record_sink.h"
#include "tuner/records.h"
#include "tuner/task_scheduler.h"
#include "tuner/tasks.h"

namespace kiln::tuner {

struct TuneOptions {
  std::string tuner = "xgb";  // xgb, random, grid, ga
  int64_t trials = 64;        // per task in total, earlier runs' records included
  int early_stopping = 0;     // trials without improvement that end a task; 0: off
  int batch = 16;             // candidates measured per round
  double time_budget_s = 0;   // 0: none
  bool free_layout = false;   // conv configs may change the fallback's channel blocks
  codegen::Target target = codegen::Target::host();
  // Per task (one entry per task), replacing `trials` where non-empty: a
  // job's models may ask for different totals (tuner/job.h).
  std::vector<int64_t> task_trials;
  // Workload keys of one node's implementations (driver::template_workload_sets),
  // for the scheduler to treat them as alternatives (task_scheduler.h).
  std::vector<std::vector<std::string>> implementation_sets;
  // Measurement settings; tune() fills num_threads (when 0) and
  // reference_cache (a private folder for the run), and chains
  // on_result/should_stop with the observer and `should_stop` below.
  MeasureOptions measure;
  // Asked between measurements: true stops the run after the one in flight
  // (Ctrl-C). May be empty.
  std::function<bool()> should_stop;
};

// What the loop reports while it runs; every method has a no-op default.
class TuneObserver {
 public:
  virtual ~TuneObserver() = default;
  // Before the first round: the target key and how many records of other
  // workloads warm-started the cost model.
  virtual void on_start(const std::vector<Task>& tasks, const std::string& target_key,
                        size_t warm_records) {}
  // After each measurement of task `task`: its trials so far, this result's
  // and the best GFLOP/s, and the trials left over the active tasks.
  virtual void on_result(size_t task, int64_t trials, double gflops, double best,
                         int64_t remaining) {}
  // After each round, once its records are stored.
  virtual void on_round(size_t task, int64_t trials, const std::vector<double>& gflops, double best,
                        int64_t remaining) {}
  // While a round of `records` measured records waits for a locked database
  // (0: the next batch waits to be claimed, nothing measured is at stake):
  // how long it has waited so far and the error; called before each retry.
  virtual void on_store_waiting(size_t records, double waited_s, const std::string& error) {}
};

struct TaskSummary {
  Task task;
  int64_t trials = 0;  // earlier runs' included, not those a concurrent run stored meanwhile
  double best_gflops = 0;
  TaskState state = TaskState::Active;
};

struct TuneSummary {
  std::vector<TaskSummary> tasks;
  std::string target_key;
  size_t warm_records = 0;
  int64_t run_trials = 0;  // measured by this run
  double elapsed_s = 0;
  std::string stop_reason;  // TaskScheduler::stop_reason() ("every task finished", "time budget
                            // spent", ...) or "interrupted"
  bool interrupted = false;
  bool budget_spent() const { return stop_reason == "time budget spent"; }
};

// Tunes `tasks`, resuming from `history` (the records of earlier runs on this
// target: never measured again) and writing every measurement to `sink`.
// Throws std::runtime_error when this machine cannot run the target's code
// (check_host_runs; with options.measure.runner: when the runner cannot be
// started or its device cannot run it, check_runner_runs), the measurement
// worker cannot be found or the sink fails with anything but RecordDBBusy
// (then the round's records are written to sink.unsaved_path() first, and
// the message says how to import them); records stored until then stay
// stored. With a runner, a num_threads of 0 means the device's default.
TuneSummary tune(const std::vector<Task>& tasks, const RecordDB& history, RecordSink& sink,
                 TuneOptions options, TuneObserver* observer = nullptr);

// kiln tune --report's JSON (and kiln.tune's summary in Python): per task its
// workload, count, weight, trials, best_gflops and state; the run's trials,
// elapsed_s, stop_reason, tuning_log and target. Indented by `indent` spaces.
std::string tune_report_json(const TuneSummary& summary, const std::string& tuning_log,
                             int indent = 2);

// The record of one measured candidate.
Record make_record(const std::string& workload_key, const std::string& target_key,
                   const std::string& config_json, const MeasureResult& r);

}  // namespace kiln::tuner
