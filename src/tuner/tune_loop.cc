#include "tuner/tune_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include "runtime/c_runtime_api.h"
#include "support/temp_files.h"
#include "support/version.h"
#include "tuner/remote_runner.h"
#include "tuner/target_key.h"
#include "tuner/task_search.h"

namespace kiln::tuner {
namespace {

// A private temporary folder for the measurement workers' reference outputs
// ($TMPDIR/kiln-ref-PID-XXXXXX), removed with the run and by kiln's signal
// handler (support/temp_files.h).
struct ReferenceCache {
  std::optional<support::TempDir> dir;
  std::string path;
  ReferenceCache() {
    try {
      dir.emplace("ref");
      path = dir->path().string();
    } catch (const std::exception&) {  // without one, workers compute their own
    }
  }
};

// The trial total of task i.
int64_t task_cap(const TuneOptions& o, size_t i) {
  return o.task_trials.empty() ? o.trials : o.task_trials.at(i);
}

// Trials still to run over the active tasks.
int64_t remaining_trials(const TaskScheduler& sched, const TuneOptions& o) {
  int64_t left = 0;
  for (size_t i = 0; i < sched.tasks().size(); ++i)
    if (sched.state(i) == TaskState::Active)
      left += std::max<int64_t>(0, task_cap(o, i) - sched.trials(i));
  return left;
}

SchedulerOptions scheduler_options(const TuneOptions& o) {
  SchedulerOptions s;
  s.round_trials = o.batch;
  s.max_trials_per_task = o.trials;
  s.max_trials_of_task = o.task_trials;
  s.early_stopping = o.early_stopping;
  s.time_budget_s = o.time_budget_s;
  s.implementation_sets = o.implementation_sets;
  return s;
}

// The searches of every task, resumed from the database, sharing one model.
std::vector<std::unique_ptr<TaskSearch>> resume_searches(const std::vector<Task>& tasks,
                                                         const RecordDB& history,
                                                         const std::string& tkey,
                                                         const TuneOptions& o, TaskScheduler& sched,
                                                         SharedCostModel& model) {
  std::vector<std::unique_ptr<TaskSearch>> searches;
  for (size_t i = 0; i < tasks.size(); ++i) {
    searches.push_back(TaskSearch::resume(tasks[i], history.records(tasks[i].workload_key, tkey),
                                          o.free_layout, o.target.isa(), o.measure.timeout_s));
    sched.resume(i, searches.back()->trials, searches.back()->best_gflops);
    model.add_task(searches.back().get());
  }
  for (auto& t : searches) t->tuner = make_task_tuner(o.tuner, *t, model, o.batch);
  return searches;
}

// Calls f until it does not throw RecordDBBusy, sleeping 0.1 s doubling to
// 5 s in between; `waiting(waited_s, error)` before each sleep. Returns
// nullopt when `give_up()` turns true while waiting.
template <typename F>
auto retry_while_busy(F f, const std::function<void(double, const std::string&)>& waiting,
                      const std::function<bool()>& give_up) -> std::optional<decltype(f())> {
  auto start = std::chrono::steady_clock::now();
  double delay = 0.1;
  for (;;) {
    try {
      return f();
    } catch (const RecordDBBusy& e) {
      if (give_up && give_up()) return std::nullopt;
      waiting(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              e.what());
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      delay = std::min(delay * 2, 5.0);
    }
  }
}

// Writes records that could not be stored to `path` (JSON lines, appended);
// returns an error message, empty when written.
std::string write_unsaved(const std::string& path, const std::vector<Record>& records) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  for (const Record& r : records) out << record_to_json_line(r) << '\n';
  out.close();
  return out ? "" : "cannot write '" + path + "'";
}

// Stores a measured round: retried while the database is locked, never
// dropped. Throws (after writing the records to the sink's unsaved file) on
// any other error, or when a stop is requested while the database is locked.
void store_round(RecordSink& sink, const std::vector<Record>& records, TuneObserver& obs,
                 const std::function<bool()>& stopped) {
  std::string error;
  try {
    auto stored = retry_while_busy(
        [&] {
          sink.add_batch(records);
          return true;
        },
        [&](double waited, const std::string& e) {
          obs.on_store_waiting(records.size(), waited, e);
        },
        stopped);
    if (stored) return;
    error = "interrupted while the records database was locked";
  } catch (const std::invalid_argument&) {
    throw;  // a bad record: a bug, not the database
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::string path = sink.unsaved_path();
  if (path.empty()) throw std::runtime_error(error);
  std::string werr = write_unsaved(path, records);
  if (!werr.empty())
    throw std::runtime_error(error + "; the round's " + std::to_string(records.size()) +
                             " measured records are lost too: " + werr);
  throw std::runtime_error(error + "; the round's " + std::to_string(records.size()) +
                           " measured records were written to " + path + "; import them with `" +
                           sink.import_hint(path) + "`");
}

// Frees the claims of a round's configs that were not measured (stopped, or
// the time budget spent), for other runs.
void release_unmeasured(RecordSink& sink) {
  try {
    sink.release_claims();
  } catch (const std::exception&) {
    // They expire by themselves.
  }
}

// Drops this run's unstored claims when the run ends, however it ends.
struct ClaimRelease {
  RecordSink& sink;
  ~ClaimRelease() {
    try {
      sink.release_claims();
    } catch (...) {
      // They expire by themselves.
    }
  }
};

}  // namespace

Record make_record(const std::string& workload_key, const std::string& target_key,
                   const std::string& config_json, const MeasureResult& r) {
  Record rec;
  rec.workload_key = workload_key;
  rec.target_key = target_key;
  rec.config_json = config_json;
  rec.times_ms = r.times_ms;
  rec.error = r.error;
  rec.error_message = r.message;
  rec.timestamp_unix = static_cast<int64_t>(std::time(nullptr));
  rec.kiln_version = kiln_version();
  rec.gflops = r.error == ErrorClass::kOk ? r.gflops : 0;
  return rec;
}

TuneSummary tune(const std::vector<Task>& tasks, const RecordDB& history, RecordSink& sink,
                 TuneOptions o, TuneObserver* observer) {
  if (o.measure.runner.empty()) {
    check_host_runs(o.target);  // a candidate would die with SIGILL: not a result
  } else {
    // One runner for the whole run; the device, not this machine, must run the code,
    // and its default thread count is the one the records are keyed by.
    if (!o.measure.runner_session) o.measure.runner_session = runner_for(o.measure);
    check_runner_runs(*o.measure.runner_session, o.target);
    if (o.measure.num_threads == 0)
      o.measure.num_threads = std::max(1, o.measure.runner_session->hello().num_threads);
  }
  TuneObserver silent;
  TuneObserver& obs = observer ? *observer : silent;
  auto start = std::chrono::steady_clock::now();
  if (o.measure.num_threads == 0) o.measure.num_threads = kiln_get_num_threads();
  TuneSummary summary;
  summary.target_key =
      TargetKey::for_target(o.target, o.measure.num_threads).isolated(o.measure.cold_weights).key();
  const std::string& tkey = summary.target_key;
  ReferenceCache reference_cache;  // workers share reference outputs for this run
  o.measure.reference_cache = reference_cache.path;

  TaskScheduler sched(tasks, scheduler_options(o));
  SharedCostModel model;
  std::vector<std::unique_ptr<TaskSearch>> searches =
      resume_searches(tasks, history, tkey, o, sched, model);
  if (o.tuner == "xgb") {
    summary.warm_records = model.warm_start(history, tkey, 48, 1500);
    model.retrain();  // warm start: this run's tasks' records and the other workloads'
  }
  obs.on_start(tasks, tkey, summary.warm_records);

  auto stopped = [&] { return o.should_stop && o.should_stop(); };
  ClaimRelease release{sink};
  auto last_heartbeat = std::chrono::steady_clock::now();
  while (!stopped()) {
    std::optional<size_t> next = sched.next_task();
    if (!next) break;
    const size_t ti = *next;
    TaskSearch& t = *searches[ti];
    size_t not_from_tuner = 0;
    std::vector<schedule::Config> batch = t.next_batch(sched.round_size(ti), &not_from_tuner);
    if (batch.empty()) {
      sched.mark_exhausted(ti);
      continue;
    }
    // Claimed before measured: configs another run recorded or is measuring
    // are dropped (the tuner has marked them visited and moves on).
    std::vector<std::string> configs;
    for (const auto& c : batch) configs.push_back(c.to_json());
    std::optional<ClaimResult> claimed = retry_while_busy(
        [&] {
          return sink.claim(t.task.workload_key, tkey, configs, task_cap(o, ti),
                            o.measure.timeout_s);
        },
        [&](double waited, const std::string& e) { obs.on_store_waiting(0, waited, e); }, stopped);
    if (!claimed) break;
    std::vector<schedule::Config> granted;
    std::vector<MeasureInput> inputs;
    size_t granted_not_from_tuner = 0;  // of the leading fallback and retries
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i < claimed->granted.size() && claimed->granted[i]) {
        granted.push_back(batch[i]);
        inputs.push_back({t.task.workload_key, configs[i]});
        if (i < not_from_tuner) ++granted_not_from_tuner;
      }
    }
    not_from_tuner = granted_not_from_tuner;
    batch = std::move(granted);
    if (batch.empty()) {
      if (claimed->capped) sched.mark_capped(ti);
      continue;
    }
    MeasureOptions mopts = o.measure;
    const int64_t done_before = sched.trials(ti);
    double running_best = t.best_gflops;
    mopts.on_result = [&](size_t i, const MeasureResult& r) {
      // Heartbeat: claims of a long round must not expire under it.
      auto now = std::chrono::steady_clock::now();
      if (now - last_heartbeat > std::chrono::seconds(60)) {
        last_heartbeat = now;
        try {
          sink.renew_claims();
        } catch (const std::exception&) {
          // Best effort: the next measurement tries again.
        }
      }
      double g = r.error == ErrorClass::kOk ? r.gflops : 0;
      running_best = std::max(running_best, g);
      obs.on_result(ti, done_before + static_cast<int64_t>(i) + 1, g, running_best,
                    remaining_trials(sched, o) - 1 - static_cast<int64_t>(i));
    };
    // A round also ends at the time budget, between two measurements: its
    // candidates past it would eat the time kept for what follows the search
    // (kiln tune's in-graph step); the ones not measured are released.
    mopts.should_stop = [&] { return stopped() || sched.remaining_s() <= 0; };
    std::vector<MeasureResult> results = measure_batch(inputs, o.target, mopts);
    if (results.empty()) {
      if (stopped() || sched.remaining_s() > 0) break;
      release_unmeasured(sink);
      continue;  // next_task() ends the run: "time budget spent"
    }
    batch.resize(results.size());
    std::vector<Record> records;
    std::vector<double> gflops;
    for (size_t i = 0; i < results.size(); ++i) {
      records.push_back(make_record(t.task.workload_key, tkey, inputs[i].config_json, results[i]));
      gflops.push_back(records.back().gflops);
    }
    const bool all_measured = results.size() == inputs.size();
    store_round(sink, records, obs, stopped);  // stored before anything else can go wrong
    if (!all_measured) release_unmeasured(sink);
    t.record(batch, gflops, std::min(not_from_tuner, batch.size()));
    sched.record(ti, gflops);
    if (o.tuner == "xgb") model.retrain();
    obs.on_round(ti, sched.trials(ti), gflops, t.best_gflops, remaining_trials(sched, o));
  }

  summary.interrupted = stopped();
  summary.stop_reason = summary.interrupted ? "interrupted" : sched.stop_reason();
  summary.run_trials = sched.run_trials();
  summary.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < tasks.size(); ++i)
    summary.tasks.push_back({tasks[i], sched.trials(i), searches[i]->best_gflops, sched.state(i)});
  return summary;
}

std::string tune_report_json(const TuneSummary& sum, const std::string& tuning_log, int indent) {
  nlohmann::json report = {{"tasks", nlohmann::json::array()}};
  for (const TaskSummary& t : sum.tasks)
    report["tasks"].push_back({{"workload", t.task.workload_key},
                               {"count", t.task.count},
                               {"weight", t.task.weight},
                               {"trials", t.trials},
                               {"best_gflops", t.best_gflops},
                               {"state", task_state_name(t.state)}});
  report["trials"] = sum.run_trials;
  report["elapsed_s"] = sum.elapsed_s;
  report["stop_reason"] = sum.stop_reason;
  report["tuning_log"] = tuning_log;
  report["target"] = sum.target_key;
  return report.dump(indent);
}

}  // namespace kiln::tuner
