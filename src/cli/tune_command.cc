// kiln tune: searches the template workloads of one or more models and
// stores every measurement in the records database (issue 4's thin path:
// tasks -> tuner -> safe measurement -> records, resumable).
#include "cli/tune_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "codegen/target.h"
#include "driver/tasks.h"
#include "frontend/onnx_import.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "schedule/lower.h"
#include "tuner/cost_model.h"
#include "tuner/features.h"
#include "tuner/measure.h"
#include "tuner/records.h"
#include "tuner/search.h"
#include "tuner/target_key.h"
#include "tuner/task_scheduler.h"

namespace kiln::cli {
namespace {

const char* kTuneUsage =
    "usage: kiln tune MODEL.onnx [MORE.onnx ...] --tuning-log DB [--trials N] [--tuner "
    "xgb|random|grid|ga]\n"
    "                 [--early-stopping N] [--time-budget SECONDS] [--batch N] [--input-shapes S]\n"
    "                 [--number N] [--repeat N] [--min-repeat-ms MS] [--timeout S] [--report "
    "OUT.json]\n"
    "  --trials N         trials per task in total, measured ones of earlier runs included "
    "(default 64)\n"
    "  --tuner T          xgb (cost model + simulated annealing, default), random, grid, ga\n"
    "  --early-stopping N stop a task after N trials without improvement (default off)\n"
    "  --time-budget S    stop the whole run after S seconds (default none)\n"
    "  --batch N          candidates measured per round (default 16)\n"
    "  --free-layout      let conv configs change channel blocks (default: keep the fallback's,\n"
    "                     so that neighbouring convolutions need no layout transform)\n"
    "Re-running resumes: configs already in DB are not measured again. Ctrl-C stops after the\n"
    "measurement in flight; everything measured is stored.\n";

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct TuneArgs {
  std::vector<std::string> models;
  std::string db, tuner = "xgb", input_shapes, report;
  bool free_layout = false;
  int64_t trials = 64;
  int early_stopping = 0, batch = 16;
  double time_budget = 0;
  tuner::MeasureOptions measure;
};

TuneArgs parse_args(const std::vector<std::string>& args) {
  TuneArgs a;
  a.measure.repeat = 3;
  a.measure.min_repeat_ms = 20;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(s + " needs a value\n" + kTuneUsage);
      return args[++i];
    };
    auto number = [&]() -> double {
      std::string v = value();
      try {
        size_t pos = 0;
        double d = std::stod(v, &pos);
        if (pos != v.size() || d < 0) throw std::invalid_argument(v);
        return d;
      } catch (const std::exception&) {
        throw std::invalid_argument(s + " wants a non-negative number, not '" + v + "'");
      }
    };
    if (s == "--tuning-log")
      a.db = value();
    else if (s == "--trials")
      a.trials = static_cast<int64_t>(number());
    else if (s == "--tuner")
      a.tuner = value();
    else if (s == "--early-stopping")
      a.early_stopping = static_cast<int>(number());
    else if (s == "--time-budget")
      a.time_budget = number();
    else if (s == "--batch")
      a.batch = std::max(1, static_cast<int>(number()));
    else if (s == "--input-shapes")
      a.input_shapes = value();
    else if (s == "--number")
      a.measure.number = std::max(1, static_cast<int>(number()));
    else if (s == "--repeat")
      a.measure.repeat = std::max(1, static_cast<int>(number()));
    else if (s == "--min-repeat-ms")
      a.measure.min_repeat_ms = number();
    else if (s == "--timeout")
      a.measure.timeout_s = number();
    else if (s == "--report")
      a.report = value();
    else if (!s.empty() && s[0] == '-')
      throw std::invalid_argument("unknown option " + s + "\n" + kTuneUsage);
    else
      a.models.push_back(s);
  }
  if (a.models.empty()) throw std::invalid_argument(std::string("no model given\n") + kTuneUsage);
  if (a.db.empty())
    throw std::invalid_argument(std::string("--tuning-log DB is required\n") + kTuneUsage);
  if (a.tuner != "xgb" && a.tuner != "random" && a.tuner != "grid" && a.tuner != "ga")
    throw std::invalid_argument("--tuner must be xgb, random, grid or ga, not '" + a.tuner + "'");
  return a;
}

tuner::ErrorClass error_class(tuner::MeasureError e) {
  switch (e) {
    case tuner::MeasureError::kOk: return tuner::ErrorClass::kOk;
    case tuner::MeasureError::kCompileError: return tuner::ErrorClass::kCompileError;
    case tuner::MeasureError::kRuntimeError: return tuner::ErrorClass::kRuntimeError;
    case tuner::MeasureError::kTimeout: return tuner::ErrorClass::kTimeout;
    case tuner::MeasureError::kWrongResult: return tuner::ErrorClass::kWrongResult;
    case tuner::MeasureError::kInvalidConfig: return tuner::ErrorClass::kInvalidConfig;
  }
  return tuner::ErrorClass::kRuntimeError;
}

// The search state of one task: its space, its tuner and, for xgb, the
// features of every config it has lowered (cached by index).
struct TaskSearch {
  tuner::Task task;
  const ops::OpTemplate* tmpl = nullptr;
  ops::Workload workload;
  std::unique_ptr<tuner::Tuner> tuner;
  std::map<int64_t, std::vector<float>> features;
  std::vector<std::pair<int64_t, double>> measured;  // (config index, GFLOP/s)
  std::vector<int64_t> visited;                      // indices already in the database
  // Conv configs keep the fallback's channel blocks unless --free-layout:
  // the build then needs no layout transform between neighbouring convs.
  std::pair<int64_t, int64_t> layout{0, 0};
  double best_gflops = 0;
};

std::vector<float> features_of(TaskSearch& t, const schedule::Config& cfg) {
  auto it = t.features.find(cfg.index());
  if (it != t.features.end()) return it->second;
  std::vector<float> f;
  try {
    ops::Kernel k = ops::make_kernel(*t.tmpl, t.workload, cfg);
    f = tuner::combined_features(schedule::lower(k.sch, k.args, "candidate"), cfg);
  } catch (const std::exception&) {
    f.assign(tuner::kFeatures, 0.0f);
  }
  return t.features[cfg.index()] = f;
}

// One cost model shared by every task: trained on all measured configs (of
// every workload, this run's and earlier runs'), so that it transfers.
struct SharedModel {
  tuner::CostModel model;
  std::vector<TaskSearch*> tasks;
  void retrain() {
    std::vector<std::vector<float>> X;
    std::vector<float> y;
    std::vector<unsigned> groups;
    for (TaskSearch* t : tasks) {
      if (t->measured.empty()) continue;
      double best = std::max(t->best_gflops, 1e-9);
      for (auto& [index, gflops] : t->measured) {
        X.push_back(features_of(*t, t->tmpl->space(t->workload).get(index)));
        y.push_back(static_cast<float>(gflops / best));  // relative: comparable across tasks
      }
      groups.push_back(static_cast<unsigned>(t->measured.size()));
    }
    if (X.size() >= 8) model.fit(X, y, groups, 30);
  }
};

std::unique_ptr<tuner::Tuner> make_tuner(const std::string& kind, TaskSearch& t,
                                         const std::vector<int64_t>& visited, SharedModel& model) {
  schedule::ConfigSpace space = t.tmpl->space(t.workload);
  if (kind == "random") return std::make_unique<tuner::RandomTuner>(space, visited, 1);
  if (kind == "grid") return std::make_unique<tuner::GridTuner>(space, visited);
  if (kind == "ga") return std::make_unique<tuner::GATuner>(space, visited, tuner::GAOptions{}, 1);
  tuner::ModelBasedOptions opts;
  opts.num_chains = 32;  // lowering a candidate for its features costs milliseconds
  opts.max_iters = 40;
  TaskSearch* tp = &t;
  SharedModel* mp = &model;
  auto score = [tp, mp](const std::vector<schedule::Config>& cfgs) {
    std::vector<double> s(cfgs.size(), 0.0);
    if (!mp->model.trained()) return s;
    std::vector<std::vector<float>> X;
    for (const auto& c : cfgs) X.push_back(features_of(*tp, c));
    std::vector<float> p = mp->model.predict(X);
    for (size_t i = 0; i < p.size(); ++i) s[i] = p[i];
    return s;
  };
  return std::make_unique<tuner::ModelBasedTuner>(space, score, visited, opts, 1);
}

// Up to n proposals of the task's tuner that keep its layout; others are
// dropped unmeasured (the tuner never proposes them again).
std::vector<schedule::Config> next_layout_batch(TaskSearch& t, int n) {
  if (t.layout == std::pair<int64_t, int64_t>{0, 0}) return t.tuner->next_batch(n);
  std::vector<schedule::Config> out;
  while (static_cast<int>(out.size()) < n) {
    std::vector<schedule::Config> got = t.tuner->next_batch(n);
    if (got.empty()) break;
    for (auto& c : got)
      if (static_cast<int>(out.size()) < n &&
          ops::layout_blocks(*t.tmpl, t.workload, c) == t.layout)
        out.push_back(c);
  }
  return out;
}

std::string fmt_duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return buf;
}

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(kTuneUsage, stdout);
      return 0;
    }
  TuneArgs a = parse_args(args);
  std::vector<graph::Graph> graphs;
  for (const std::string& m : a.models)
    graphs.push_back(frontend::import_onnx(m, frontend::parse_input_shapes(a.input_shapes)));
  std::vector<tuner::Task> tasks = driver::extract_tasks(graphs);
  if (tasks.empty()) {
    std::printf("kiln tune: no tunable workload in the model(s)\n");
    return 0;
  }
  codegen::Target target = codegen::Target::host();
  int threads = kiln_get_num_threads();
  a.measure.num_threads = threads;
  std::string tkey = tuner::TargetKey::for_target(target, threads).key();
  tuner::RecordDB db = tuner::RecordDB::open(a.db);

  tuner::SchedulerOptions sopts;
  sopts.round_trials = a.batch;
  sopts.max_trials_per_task = a.trials;
  sopts.early_stopping = a.early_stopping;
  sopts.time_budget_s = a.time_budget;
  tuner::TaskScheduler sched(tasks, sopts);

  SharedModel model;
  std::vector<std::unique_ptr<TaskSearch>> searches;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto t = std::make_unique<TaskSearch>();
    t->task = tasks[i];
    t->tmpl = &ops::get_template(tasks[i].template_name);
    t->workload = ops::Workload::parse(tasks[i].workload_key);
    if (!a.free_layout)
      t->layout = ops::layout_blocks(*t->tmpl, t->workload, t->tmpl->fallback(t->workload));
    schedule::ConfigSpace space = t->tmpl->space(t->workload);
    int64_t trials = 0;
    for (const tuner::Record& r : db.records(tasks[i].workload_key, tkey)) {
      ++trials;
      try {
        int64_t index = schedule::Config::from_json(space, r.config_json).index();
        t->visited.push_back(index);
        if (r.error == tuner::ErrorClass::kOk) {
          t->measured.emplace_back(index, r.gflops);
          t->best_gflops = std::max(t->best_gflops, r.gflops);
        }
      } catch (const std::exception&) {
        // A record of an older space: counted, not revisited.
      }
    }
    sched.resume(i, trials, t->best_gflops);
    model.tasks.push_back(t.get());
    searches.push_back(std::move(t));
  }
  for (auto& t : searches) t->tuner = make_tuner(a.tuner, *t, t->visited, model);
  if (a.tuner == "xgb") model.retrain();  // warm start from the database

  std::printf("kiln tune: %zu tasks, %s tuner, %lld trials per task, records in %s\n", tasks.size(),
              a.tuner.c_str(), static_cast<long long>(a.trials), a.db.c_str());
  auto previous = std::signal(SIGINT, on_sigint);
  bool tty = isatty(fileno(stdout));
  auto start = std::chrono::steady_clock::now();
  while (!g_interrupted) {
    std::optional<size_t> next = sched.next_task();
    if (!next) break;
    size_t ti = *next;
    TaskSearch& t = *searches[ti];
    std::vector<schedule::Config> batch = next_layout_batch(t, sched.round_size(ti));
    if (batch.empty()) {
      sched.mark_exhausted(ti);
      continue;
    }
    std::vector<tuner::MeasureInput> inputs;
    for (const auto& c : batch) inputs.push_back({t.task.workload_key, c.to_json()});
    std::vector<tuner::MeasureResult> results = tuner::measure_batch(inputs, target, a.measure);
    std::vector<tuner::Record> records;
    std::vector<double> gflops;
    double round_best = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      tuner::Record rec;
      rec.workload_key = t.task.workload_key;
      rec.target_key = tkey;
      rec.config_json = inputs[i].config_json;
      rec.times_ms = r.times_ms;
      rec.error = error_class(r.error);
      rec.error_message = r.message;
      rec.timestamp_unix = static_cast<int64_t>(std::time(nullptr));
      rec.kiln_version = tuner::kiln_version();
      rec.gflops = r.error == tuner::MeasureError::kOk ? r.gflops : 0;
      records.push_back(rec);
      gflops.push_back(rec.gflops);
      round_best = std::max(round_best, rec.gflops);
      if (rec.gflops > 0) t.measured.emplace_back(batch[i].index(), rec.gflops);
      t.best_gflops = std::max(t.best_gflops, rec.gflops);
    }
    db.add_batch(records);  // stored before anything else can go wrong
    t.tuner->update(batch, gflops);
    sched.record(ti, gflops);
    if (a.tuner == "xgb") model.retrain();
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double per_trial = elapsed / std::max<int64_t>(1, sched.run_trials());
    int64_t left = 0;
    for (size_t i = 0; i < tasks.size(); ++i)
      if (sched.state(i) == tuner::TaskState::Active)
        left += std::max<int64_t>(0, a.trials - sched.trials(i));
    std::printf(
        "%s[task %zu/%zu] %-18s trials %lld/%lld  cur %7.1f  best %7.1f GFLOP/s  elapsed %s  "
        "remaining ~%s%s",
        tty ? "\r" : "", ti + 1, tasks.size(), t.task.template_name.c_str(),
        static_cast<long long>(sched.trials(ti)), static_cast<long long>(a.trials), round_best,
        t.best_gflops, fmt_duration(elapsed).c_str(), fmt_duration(per_trial * left).c_str(),
        tty ? "" : "\n");
    std::fflush(stdout);
  }
  std::signal(SIGINT, previous);
  if (tty) std::printf("\n");

  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%-4s %-28s %6s %9s %14s  %s\n", "task", "template", "count", "trials",
              "best GFLOP/s", "state");
  nlohmann::json report = {{"tasks", nlohmann::json::array()}};
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::printf("%-4zu %-28s %6d %9lld %14.1f  %s\n", i + 1, tasks[i].template_name.c_str(),
                tasks[i].count, static_cast<long long>(sched.trials(i)), searches[i]->best_gflops,
                tuner::task_state_name(sched.state(i)));
    report["tasks"].push_back({{"workload", tasks[i].workload_key},
                               {"count", tasks[i].count},
                               {"weight", tasks[i].weight},
                               {"trials", sched.trials(i)},
                               {"best_gflops", searches[i]->best_gflops},
                               {"state", tuner::task_state_name(sched.state(i))}});
  }
  std::string stop = g_interrupted ? "interrupted" : sched.stop_reason();
  std::printf("%lld trials in %s (%s); records in %s\n", static_cast<long long>(sched.run_trials()),
              fmt_duration(elapsed).c_str(), stop.empty() ? "done" : stop.c_str(), a.db.c_str());
  report["trials"] = sched.run_trials();
  report["elapsed_s"] = elapsed;
  report["stop_reason"] = stop;
  report["tuning_log"] = a.db;
  report["target"] = tkey;
  if (!a.report.empty()) {
    std::ofstream out(a.report);
    out << report.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write report '" + a.report + "'");
  }
  return g_interrupted ? 130 : 0;
}

}  // namespace kiln::cli
