// kiln tune: searches the template workloads of one or more models and
// stores every measurement in the records database (issue 4's thin path:
// tasks -> tuner -> safe measurement -> records, resumable).
#include "cli/tune_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
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
    "                 [--target TARGET] [--free-layout]\n"
    "                 [--number N] [--repeat N] [--min-repeat-ms MS] [--timeout S] [--report "
    "OUT.json]\n"
    "  --trials N         trials per task in total, measured ones of earlier runs included "
    "(default 64)\n"
    "  --tuner T          xgb (cost model + simulated annealing, default), random, grid, ga\n"
    "  --early-stopping N stop a task after N trials without improvement (default off)\n"
    "  --time-budget S    stop the whole run after S seconds (default none)\n"
    "  --batch N          candidates measured per round (default 16)\n"
    "  --target TARGET    'llvm -mcpu=... -mattr=...' to tune for (default: this machine; the\n"
    "                     machine must be able to run the target's code)\n"
    "  --free-layout      let conv configs change channel blocks (default: keep the fallback's,\n"
    "                     so that neighbouring convolutions need no layout transform)\n"
    "Re-running resumes: configs already in DB are not measured again. Ctrl-C stops after the\n"
    "measurement in flight; everything measured is stored.\n"
    "Exit status: 0 when every task finished (trials, early stopping or space exhausted), 3 when\n"
    "the time budget ran out first, 130 after Ctrl-C; records are stored in every case.\n";

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct TuneArgs {
  std::vector<std::string> models;
  std::string db, tuner = "xgb", input_shapes, report, target;
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
    else if (s == "--free-layout")
      a.free_layout = true;
    else if (s == "--target")
      a.target = value();
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
  // The template's fallback config, measured first when the database lacks
  // it: the build's default is the baseline every tuned record must beat,
  // and a few random candidates often do not.
  std::optional<schedule::Config> pending_fallback;
};

// Features come from the loop IR before unrolling: unroll annotations and
// extents say what unrolling will do, and expanding large register tiles
// (then simplifying every copy) made the search cost seconds per round.
const schedule::LowerOptions kFeatureLowering{.unroll = false};

std::vector<float> features_of(TaskSearch& t, const schedule::Config& cfg) {
  auto it = t.features.find(cfg.index());
  if (it != t.features.end()) return it->second;
  std::vector<float> f;
  try {
    ops::Kernel k = ops::make_kernel(*t.tmpl, t.workload, cfg);
    f = tuner::combined_features(schedule::lower(k.sch, k.args, "candidate", kFeatureLowering),
                                 cfg);
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
  // Records of workloads outside this run (warm_start()): features, labels
  // relative to their workload's best, one ranking group per workload.
  std::vector<std::vector<float>> warm_X;
  std::vector<float> warm_y;
  std::vector<unsigned> warm_groups;

  void retrain() {
    std::vector<std::vector<float>> X = warm_X;
    std::vector<float> y = warm_y;
    std::vector<unsigned> groups = warm_groups;
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

  // Loads the database's verified records of other workloads on this target
  // (other models tuned earlier): the features are the lowered loop IR's, so
  // what was learned there ranks this run's first candidates. Up to
  // `per_workload` records each (spread over the speed range), `max_total` in all.
  size_t warm_start(const tuner::RecordDB& db, const std::string& tkey, size_t per_workload,
                    size_t max_total) {
    std::set<std::string> own;
    for (TaskSearch* t : tasks) own.insert(t->task.workload_key);
    size_t loaded = 0;
    for (const std::string& key : db.workloads(tkey)) {
      if (own.count(key) || loaded >= max_total) continue;
      try {
        ops::Workload w = ops::Workload::parse(key);
        const ops::OpTemplate& tmpl = ops::get_template(w.template_name);
        schedule::ConfigSpace space = tmpl.space(w);
        std::vector<tuner::Record> ok;
        for (tuner::Record& r : db.records(key, tkey))
          if (r.error == tuner::ErrorClass::kOk && r.gflops > 0) ok.push_back(std::move(r));
        if (ok.size() < 2) continue;
        std::sort(ok.begin(), ok.end(), [](auto& x, auto& y) { return x.gflops > y.gflops; });
        double best = ok.front().gflops;
        size_t n = std::min({ok.size(), per_workload, max_total - loaded}), added = 0;
        for (size_t k = 0; k < n; ++k) {
          const tuner::Record& r = ok[k * ok.size() / n];
          schedule::Config cfg = schedule::Config::from_json(space, r.config_json);
          ops::Kernel kern = ops::make_kernel(tmpl, w, cfg);
          warm_X.push_back(tuner::combined_features(
              schedule::lower(kern.sch, kern.args, "warm", kFeatureLowering), cfg));
          warm_y.push_back(static_cast<float>(r.gflops / best));
          ++added;
        }
        warm_groups.push_back(static_cast<unsigned>(added));
        loaded += added;
      } catch (const std::exception&) {
        // A record of another kiln's space or template: not usable here.
      }
    }
    return loaded;
  }
};

std::unique_ptr<tuner::Tuner> make_tuner(const std::string& kind, TaskSearch& t,
                                         const std::vector<int64_t>& visited, SharedModel& model,
                                         int batch) {
  schedule::ConfigSpace space = t.tmpl->space(t.workload);
  if (kind == "random") return std::make_unique<tuner::RandomTuner>(space, visited, 1);
  if (kind == "grid") return std::make_unique<tuner::GridTuner>(space, visited);
  if (kind == "ga") return std::make_unique<tuner::GATuner>(space, visited, tuner::GAOptions{}, 1);
  tuner::ModelBasedOptions opts;
  // Lowering a candidate for its features costs ~20 ms (large unrolled conv
  // tiles): 16 chains x 24 steps keep a round's search near 8 s on two cores.
  opts.num_chains = 16;
  opts.max_iters = 24;
  // Plan again after every batch: the model has just been retrained on it.
  // Replaying recorded searches (bench/tuner/replay_search.cc), this found
  // the best config in 0.4-0.8x the trials of re-planning every 64 results.
  opts.replan_after = batch;
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
  if (n <= 0) return {};
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

tuner::Record to_record(const std::string& workload, const std::string& tkey,
                        const std::string& config_json, const tuner::MeasureResult& r) {
  tuner::Record rec;
  rec.workload_key = workload;
  rec.target_key = tkey;
  rec.config_json = config_json;
  rec.times_ms = r.times_ms;
  rec.error = error_class(r.error);
  rec.error_message = r.message;
  rec.timestamp_unix = static_cast<int64_t>(std::time(nullptr));
  rec.kiln_version = tuner::kiln_version();
  rec.gflops = r.error == tuner::MeasureError::kOk ? r.gflops : 0;
  return rec;
}

// Trials still to run over the active tasks.
int64_t remaining_trials(const tuner::TaskScheduler& sched, int64_t per_task) {
  int64_t left = 0;
  for (size_t i = 0; i < sched.tasks().size(); ++i)
    if (sched.state(i) == tuner::TaskState::Active)
      left += std::max<int64_t>(0, per_task - sched.trials(i));
  return left;
}

// One live line per task: on a terminal it is redrawn after every
// measurement and a new line starts when the scheduler moves to another
// task; in a log (not a terminal) one line per round.
class ProgressLine {
 public:
  ProgressLine(size_t num_tasks, int64_t per_task, bool tty)
      : num_tasks_(num_tasks), per_task_(per_task), tty_(tty) {}

  void show(size_t ti, const tuner::Task& task, int64_t trials, double cur, double best,
            int64_t left) {
    ++measured_;
    if (!tty_) return;
    if (open_ && ti != task_) std::printf("\n");
    print(ti, task, trials, cur, best, left);
  }
  void round_done(size_t ti, const tuner::Task& task, int64_t trials,
                  const std::vector<double>& gflops, double best, int64_t left) {
    double cur = gflops.empty() ? 0 : *std::max_element(gflops.begin(), gflops.end());
    if (tty_) {
      if (open_ && ti != task_) std::printf("\n");
      print(ti, task, trials, cur, best, left);
    } else {
      print(ti, task, trials, cur, best, left);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  void finish() {
    if (tty_ && open_) std::printf("\n");
    open_ = false;
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  void print(size_t ti, const tuner::Task& task, int64_t trials, double cur, double best,
             int64_t left) {
    double per_trial = elapsed() / std::max<int64_t>(1, measured_);
    std::printf(
        "%s[task %zu/%zu] %-28s trials %lld/%lld  cur %7.1f  best %7.1f GFLOP/s  "
        "elapsed %s  remaining ~%s%s",
        tty_ ? "\r" : "", ti + 1, num_tasks_, task.template_name.c_str(),
        static_cast<long long>(trials), static_cast<long long>(per_task_), cur, best,
        fmt_duration(elapsed()).c_str(),
        fmt_duration(per_trial * static_cast<double>(std::max<int64_t>(0, left))).c_str(),
        tty_ ? "\x1b[K" : "");
    std::fflush(stdout);
    task_ = ti;
    open_ = tty_;
  }

  size_t num_tasks_;
  int64_t per_task_;
  bool tty_;
  size_t task_ = 0;
  bool open_ = false;
  int64_t measured_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A private temporary folder for the measurement workers' reference outputs,
// removed with the run.
struct ReferenceCache {
  std::string path;
  ReferenceCache() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/kiln-ref-XXXXXX";
    if (mkdtemp(templ.data())) path = templ;  // without one, workers compute their own
  }
  ~ReferenceCache() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  ReferenceCache(const ReferenceCache&) = delete;
  ReferenceCache& operator=(const ReferenceCache&) = delete;
};
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
  codegen::Target target =
      a.target.empty() ? codegen::Target::host() : codegen::Target::parse(a.target);
  int threads = kiln_get_num_threads();
  a.measure.num_threads = threads;
  std::string tkey = tuner::TargetKey::for_target(target, threads).key();
  tuner::RecordDB db = tuner::RecordDB::open(a.db);
  ReferenceCache reference_cache;  // workers share reference outputs for this run
  a.measure.reference_cache = reference_cache.path;

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
    schedule::Config fallback = t->tmpl->fallback(t->workload);
    if (std::find(t->visited.begin(), t->visited.end(), fallback.index()) == t->visited.end()) {
      t->pending_fallback = fallback;
      t->visited.push_back(fallback.index());  // the tuner never proposes it again
    }
    sched.resume(i, trials, t->best_gflops);
    model.tasks.push_back(t.get());
    searches.push_back(std::move(t));
  }
  for (auto& t : searches) t->tuner = make_tuner(a.tuner, *t, t->visited, model, a.batch);
  size_t warm = 0;
  if (a.tuner == "xgb") {
    warm = model.warm_start(db, tkey, 48, 1500);
    model.retrain();  // warm start: this run's tasks' records and the other workloads'
  }

  std::printf("kiln tune: %zu tasks, %s tuner, %lld trials per task, records in %s\n", tasks.size(),
              a.tuner.c_str(), static_cast<long long>(a.trials), a.db.c_str());
  if (warm)
    std::printf("cost model warm-started from %zu records of other workloads in %s\n", warm,
                a.db.c_str());
  auto previous = std::signal(SIGINT, on_sigint);
  ProgressLine progress(tasks.size(), a.trials, isatty(fileno(stdout)));
  while (!g_interrupted) {
    std::optional<size_t> next = sched.next_task();
    if (!next) break;
    size_t ti = *next;
    TaskSearch& t = *searches[ti];
    std::vector<schedule::Config> batch;
    const size_t own_from = t.pending_fallback ? 1 : 0;  // batch[own_from..]: the tuner's
    if (t.pending_fallback) batch.push_back(*t.pending_fallback);
    t.pending_fallback.reset();
    for (auto& c : next_layout_batch(t, sched.round_size(ti) - static_cast<int>(own_from)))
      batch.push_back(c);
    if (batch.empty()) {
      sched.mark_exhausted(ti);
      continue;
    }
    std::vector<tuner::MeasureInput> inputs;
    for (const auto& c : batch) inputs.push_back({t.task.workload_key, c.to_json()});
    // The live line moves with every measurement; Ctrl-C stops the batch
    // after the measurement in flight.
    tuner::MeasureOptions mopts = a.measure;
    int64_t done_before = sched.trials(ti);
    double running_best = t.best_gflops;
    mopts.on_result = [&](size_t i, const tuner::MeasureResult& r) {
      double g = r.error == tuner::MeasureError::kOk ? r.gflops : 0;
      running_best = std::max(running_best, g);
      progress.show(ti, t.task, done_before + static_cast<int64_t>(i) + 1, g, running_best,
                    remaining_trials(sched, a.trials) - 1 - static_cast<int64_t>(i));
    };
    mopts.should_stop = [] { return g_interrupted.load(); };
    std::vector<tuner::MeasureResult> results = tuner::measure_batch(inputs, target, mopts);
    batch.resize(results.size());
    std::vector<tuner::Record> records;
    std::vector<double> gflops;
    for (size_t i = 0; i < results.size(); ++i) {
      tuner::Record rec = to_record(t.task.workload_key, tkey, inputs[i].config_json, results[i]);
      records.push_back(rec);
      gflops.push_back(rec.gflops);
      if (rec.gflops > 0) t.measured.emplace_back(batch[i].index(), rec.gflops);
      t.best_gflops = std::max(t.best_gflops, rec.gflops);
    }
    if (records.empty()) break;
    db.add_batch(records);  // stored before anything else can go wrong
    if (batch.size() > own_from)
      t.tuner->update(std::vector<schedule::Config>(batch.begin() + own_from, batch.end()),
                      std::vector<double>(gflops.begin() + own_from, gflops.end()));
    sched.record(ti, gflops);
    if (a.tuner == "xgb") model.retrain();
    progress.round_done(ti, t.task, sched.trials(ti), gflops, t.best_gflops,
                        remaining_trials(sched, a.trials));
  }
  progress.finish();
  double elapsed = progress.elapsed();
  std::signal(SIGINT, previous);

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
  if (g_interrupted) return 130;
  // A nightly job learns from the status whether the budget sufficed.
  return stop == "time budget spent" ? 3 : 0;
}

}  // namespace kiln::cli
