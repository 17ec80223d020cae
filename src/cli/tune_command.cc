// kiln tune: searches the template workloads of one or more models and
// stores every measurement in the records database (issue 4's thin path:
// tasks -> tuner -> safe measurement -> records, resumable).
#include "cli/tune_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "autotune/model_steps.h"
#include "codegen/target.h"
#include "driver/build.h"
#include "frontend/onnx_import.h"
#include "runtime/c_runtime_api.h"
#include "support/output_file.h"
#include "support/same_file.h"
#include "support/stale_temps.h"
#include "tuner/in_graph_records.h"
#include "tuner/job.h"
#include "tuner/layout_records.h"
#include "tuner/records.h"
#include "tuner/remote_runner.h"
#include "tuner/report.h"
#include "tuner/target_key.h"
#include "tuner/tasks.h"
#include "tuner/tune_loop.h"
#include "tuner/tuned_configs.h"

namespace kiln::cli {
namespace {

const char* kTuneUsage =
    "usage: kiln tune MODEL.onnx [MORE.onnx ...] --tuning-log DB [--trials N] [--tuner "
    "xgb|random|grid|ga]\n"
    "                 [--early-stopping N] [--time-budget SECONDS] [--batch N] [--input-shapes S]\n"
    "                 [--target TARGET] [--free-layout] [--precision fp32|bf16]\n"
    "                 [--number N] [--repeat N] [--min-repeat-ms MS] [--timeout S] [--report "
    "OUT.json]\n"
    "                 [--runner COMMAND] [--compile-budget S] [--in-graph K]\n"
    "       kiln tune --job JOB.toml [--tuning-log DB] [--report OUT.html] [--report OUT.json]\n"
    "                 [--previous-report OLD.json] [options above]\n"
    "       kiln tune --worker --job JOB.toml [--tuning-log DB] [options above]\n"
    "  --trials N         trials per task in total, measured ones of earlier runs included "
    "(default 64)\n"
    "  --tuner T          xgb (cost model + simulated annealing, default), random, grid, ga\n"
    "  --early-stopping N stop a task after N trials without improvement (default off)\n"
    "  --time-budget S    stop the whole run after S seconds (default none); with the in-graph\n"
    "                     step the search stops at 85 % of it, the step gets the rest\n"
    "  --batch N          candidates measured per round (default 16)\n"
    "  --target TARGET    'llvm -mcpu=... -mattr=...' to tune for (default: this machine; the\n"
    "                     machine must be able to run the target's code)\n"
    "  --precision P      fp32 (default) or bf16: tune the workloads `kiln build --precision P`\n"
    "                     builds (bf16: the bf16 templates' tasks; avx512bf16 or amx-bf16)\n"
    "  --free-layout      let conv configs change the fallback's channel blocks, and after the\n"
    "                     search time and store the layout transforms they may need, for\n"
    "                     kiln build --layout-dp (default: keep the fallback's blocks,\n"
    "                     --keep-layouts; the joint choice is not yet faster end to end)\n"
    "  --runner COMMAND   measure on another device: COMMAND (run by /bin/sh -c) must start\n"
    "                     `kiln-measure-worker --serve` there, e.g. \"ssh pi@device\n"
    "                     kiln-measure-worker --serve\"; this machine compiles each candidate\n"
    "                     for --target and sends it; the device verifies and times it\n"
    "  --compile-budget S a candidate that took longer than S seconds to compile is recorded\n"
    "                     as compile_budget, not run (default 20; one whose estimated code size\n"
    "                     is over the budget is never compiled)\n"
    "  --in-graph K       after the search, re-measure each task's K fastest configs and its\n"
    "                     fallback inside the compiled model (fused epilogues, neighbours, caches\n"
    "                     as in a real run) and store those times too; builds prefer them, so a\n"
    "                     tuned config that runs slower there than the fallback is not taken\n"
    "                     (default 3; 0: off; never with --runner)\n"
    "  --cold-weights     time each candidate with its weights read from memory and its input\n"
    "                     warm, as inside a model whose weights outgrow the caches; records go\n"
    "                     under the target key's 'measured=cold-weights' (default when the\n"
    "                     models' weights exceed half this machine's last-level cache, not with\n"
    "                     --runner)\n"
    "  --warm-weights     time each candidate on repeated calls, its weights cached\n"
    "Re-running resumes: configs already in DB are not measured again. Ctrl-C stops after the\n"
    "measurement in flight; everything measured is stored.\n"
    "Exit status: 0 when every task finished (trials, early stopping or space exhausted), 3 when\n"
    "the time budget ran out first, 130 after Ctrl-C; records are stored in every case.\n"
    "Jobs (docs/nightly.md): the job file names the models, their input shapes, trials and\n"
    "priorities; one task per distinct workload over all models, one scheduler for the job.\n"
    "  --report F         F.html: a self-contained HTML page; anything else: JSON (repeatable)\n"
    "  --previous-report F  the report to compare with (default: the --report .json file as it\n"
    "                     was before this run)\n"
    "  --worker           join a running job through the shared DB: take work until the job's\n"
    "                     trials are done; no report, never exit 3\n"
    "  Job exit status: 0 done, 3 time budget ran out, 4 a model failed to import (named; the\n"
    "  others were tuned), 1 any other error, 130 Ctrl-C.\n";

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct TuneArgs {
  std::vector<std::string> models;
  std::string db, tuner = "xgb", input_shapes, report, target;
  std::string precision = "fp32";  // --precision: which templates' workloads are the tasks
  graph::Precision graph_precision() const {
    return precision == "bf16" ? graph::Precision::kBf16 : graph::Precision::kFp32;
  }
  // Jobs: --job FILE, --worker, every --report, --previous-report; `set` holds
  // the options given on the command line (they override the job file's).
  std::string job, previous_report;
  std::vector<std::string> reports;
  std::set<std::string> set;
  bool worker = false;
  bool free_layout = false;  // --free-layout: true (see kTuneUsage)
  int64_t trials = 64;
  int early_stopping = 0, batch = 16;
  int in_graph = 3;  // configs per task re-measured inside the model (0: none)
  // --cold-weights / --warm-weights: how isolated measurements meet the
  // weights ("cold", "warm"); empty: chosen by choose_weight_measurement().
  std::string weights;
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
    if (s.size() > 2 && s[0] == '-') a.set.insert(s);
    if (s == "--tuning-log")
      a.db = value();
    else if (s == "--job")
      a.job = value();
    else if (s == "--worker")
      a.worker = true;
    else if (s == "--previous-report")
      a.previous_report = value();
    else if (s == "--trials") {
      a.trials = static_cast<int64_t>(number());
      // 0 would mean "no trials" to the scheduler but never finish the run.
      if (a.trials < 1)
        throw std::invalid_argument("--trials needs at least 1, not '" + args[i] + "'");
    } else if (s == "--tuner")
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
    else if (s == "--cold-weights" || s == "--warm-weights")
      a.weights = s.substr(2, 4);
    else if (s == "--in-graph") {
      a.in_graph = static_cast<int>(number());
    } else if (s == "--compile-budget")
      a.measure.compile_budget_s = number();
    else if (s == "--report") {
      a.report = value();
      a.reports.push_back(a.report);
    } else if (s == "--free-layout")
      a.free_layout = true;
    else if (s == "--keep-layouts")
      a.free_layout = false;
    else if (s == "--target")
      a.target = value();
    else if (s == "--precision")
      a.precision = value();
    else if (s == "--runner")
      a.measure.runner = value();
    else if (!s.empty() && s[0] == '-')
      throw std::invalid_argument("unknown option " + s + "\n" + kTuneUsage);
    else
      a.models.push_back(s);
  }
  if (a.precision != "fp32" && a.precision != "bf16")
    throw std::invalid_argument("--precision must be fp32 or bf16, not '" + a.precision + "'");
  if (!a.job.empty()) {
    if (a.precision != "fp32")
      throw std::invalid_argument("--precision: a job file tunes fp32 only (tune bf16 per model)");
    if (!a.models.empty())
      throw std::invalid_argument("--job takes its models from the job file, not '" + a.models[0] +
                                  "'");
    if (!a.input_shapes.empty())
      throw std::invalid_argument("--input-shapes: a job gives input_shapes per [[model]]");
    if (a.worker && (!a.reports.empty() || !a.previous_report.empty()))
      throw std::invalid_argument("--worker writes no report: the job's main run does");
    return a;  // the rest is checked once the job file is read
  }
  if (a.worker) throw std::invalid_argument("--worker needs --job JOB.toml");
  if (!a.previous_report.empty())
    throw std::invalid_argument("--previous-report is for --job runs");
  if (a.reports.size() > 1) throw std::invalid_argument("one --report for a run without --job");
  if (a.models.empty()) throw std::invalid_argument(std::string("no model given\n") + kTuneUsage);
  if (a.db.empty())
    throw std::invalid_argument(std::string("--tuning-log DB is required\n") + kTuneUsage);
  if (a.tuner != "xgb" && a.tuner != "random" && a.tuner != "grid" && a.tuner != "ga")
    throw std::invalid_argument("--tuner must be xgb, random, grid or ga, not '" + a.tuner + "'");
  return a;
}

std::string fmt_duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  return buf;
}

// One live line per task: on a terminal it is redrawn after every
// measurement and a new line starts when the scheduler moves to another
// task; in a log (not a terminal) one line per round.
class ProgressLine : public tuner::TuneObserver {
 public:
  ProgressLine(const TuneArgs& a, bool tty) : a_(a), per_task_(a.trials), tty_(tty) {}

  void on_start(const std::vector<tuner::Task>& tasks, const std::string& target_key,
                size_t warm) override {
    tasks_ = &tasks;
    std::printf("kiln tune: %zu tasks, %s tuner, %lld trials per task, records in %s\n",
                tasks.size(), a_.tuner.c_str(), static_cast<long long>(a_.trials), a_.db.c_str());
    if (warm)
      std::printf("cost model warm-started from %zu records of other workloads in %s\n", warm,
                  a_.db.c_str());
    start_ = std::chrono::steady_clock::now();
  }
  void on_result(size_t ti, int64_t trials, double cur, double best, int64_t left) override {
    ++measured_;
    if (!tty_) return;
    if (open_ && ti != task_) std::printf("\n");
    print(ti, (*tasks_)[ti], trials, cur, best, left);
  }
  void on_round(size_t ti, int64_t trials, const std::vector<double>& gflops, double best,
                int64_t left) override {
    const tuner::Task& task = (*tasks_)[ti];
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
  void on_store_waiting(size_t records, double waited_s, const std::string& error) override {
    if (tty_ && open_) std::printf("\n");
    open_ = false;
    if (records)
      std::printf(
          "records database locked for %.1f s (%s): keeping the round's %zu records, retrying\n",
          waited_s, error.c_str(), records);
    else
      std::printf("records database locked for %.1f s (%s): waiting to claim the next batch\n",
                  waited_s, error.c_str());
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
        tty_ ? "\r" : "", ti + 1, tasks_->size(), task.template_name.c_str(),
        static_cast<long long>(trials), static_cast<long long>(per_task_), cur, best,
        fmt_duration(elapsed()).c_str(),
        fmt_duration(per_trial * static_cast<double>(std::max<int64_t>(0, left))).c_str(),
        tty_ ? "\x1b[K" : "");
    std::fflush(stdout);
    task_ = ti;
    open_ = tty_;
  }

  const TuneArgs& a_;
  const std::vector<tuner::Task>* tasks_ = nullptr;
  int64_t per_task_;
  bool tty_;
  size_t task_ = 0;
  bool open_ = false;
  int64_t measured_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// --report's file must be writable before hours of tuning, not after: it
// resolves to a file (or a device/FIFO written through) whose folder takes a
// new file (probed: /proc or a read-only mount fail here, not after tuning),
// and it is none of the inputs: the job file, the models, the tuning logs and
// the files sqlite keeps beside them (-wal, -shm), existing or to be created.
void check_report_path(const TuneArgs& a, const std::vector<std::string>& more_logs = {}) {
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("cannot write report '" + a.report + "': " + why);
  };
  std::vector<std::pair<std::string, std::string>> inputs;
  if (!a.job.empty()) inputs.push_back({"the job file", a.job});
  for (const std::string& m : a.models) inputs.push_back({"the model", m});
  try {
    for (const auto& [what, path] : inputs)
      if (support::same_path(a.report, path))
        throw std::runtime_error("it is " + what + " '" + path +
                                 "': refusing to overwrite it (choose another report path)");
    std::vector<std::string> logs = more_logs;
    logs.insert(logs.begin(), a.db);
    for (const std::string& db : logs)
      support::refuse_output_over_database(a.report, "the tuning log", db);
    support::refuse_read_only_output(a.report);
    support::check_output_writable(a.report);
  } catch (const support::OutputError& e) {
    fail(e.why);
  } catch (const std::runtime_error& e) {
    fail(e.what());
  }
}

// The summary table.
void print_summary(const TuneArgs& a, const tuner::TuneSummary& sum) {
  std::printf("\n%-4s %-28s %6s %9s %14s  %s\n", "task", "template", "count", "trials",
              "best GFLOP/s", "state");
  for (size_t i = 0; i < sum.tasks.size(); ++i) {
    const tuner::TaskSummary& t = sum.tasks[i];
    std::printf("%-4zu %-28s %6d %9lld %14.1f  %s\n", i + 1, t.task.template_name.c_str(),
                t.task.count, static_cast<long long>(t.trials), t.best_gflops,
                tuner::task_state_name(t.state));
  }
  const std::string& stop = sum.stop_reason;
  std::printf("%lld trials in %s (%s); records in %s\n", static_cast<long long>(sum.run_trials),
              fmt_duration(sum.elapsed_s).c_str(), stop.empty() ? "done" : stop.c_str(),
              tuner::redact_url(a.db).c_str());
}

// ---- how isolated measurements meet the weights ------------------------------

// The weight bytes one run of the model reads: its initializers, or its
// kernels' weights in their layouts where those are larger (Winograd's
// transformed weights; tuner::kernel_weight_bytes).
int64_t model_weight_bytes(const graph::Graph& g, const tuner::ModelNodes& nodes,
                           const codegen::Target& target) {
  return std::max(graph::initializer_bytes(g), tuner::kernel_weight_bytes(nodes, target.isa()));
}

// Sets a.measure.cold_weights: as asked (--cold-weights, --warm-weights),
// else tuner::cold_weights_by_default, and says so when that chose cold.
void choose_weight_measurement(TuneArgs& a, int64_t largest_weights) {
  if (!a.weights.empty()) {
    a.measure.cold_weights = a.weights == "cold";
    return;
  }
  int64_t llc = codegen::cache_sizes(codegen::Target::host()).l3;
  a.measure.cold_weights = tuner::cold_weights_by_default(largest_weights, llc, a.measure);
  if (a.measure.cold_weights)
    std::printf(
        "kiln tune: timing candidates with cold weights: the weights its kernels read (%.1f MB, "
        "Winograd's transformed ones counted) exceed half of this machine's last-level cache "
        "(%.0f MB) (--warm-weights: time them warm)\n",
        double(largest_weights) / 1e6, double(llc) / 1e6);
}

// ---- the steps that build the model (autotune/model_steps.h) ----------------

void print_line(const std::string& line) { std::printf("%s\n", line.c_str()); }

autotune::ModelStepOptions model_step_options(const TuneArgs& a, const codegen::Target& target,
                                              const std::string& input_shapes) {
  autotune::ModelStepOptions o;
  o.target = target;
  o.tuning_log = a.db;
  o.input_shapes = input_shapes;
  o.precision = a.graph_precision();
  o.cold_weights = a.measure.cold_weights;
  o.in_graph = a.in_graph;
  o.print = print_line;
  return o;
}

// Whether the run re-measures in the model after the search: not with
// --runner (the model would run on this machine, not the device).
bool runs_in_graph_step(const TuneArgs& a) { return a.in_graph > 0 && a.measure.runner.empty(); }

// The in-graph step over `models`, in what is left of the run's time budget
// (counted from run_start).
std::vector<autotune::ModelInGraph> in_graph_step(
    const TuneArgs& a, const codegen::Target& target, tuner::RecordDB& db,
    const std::vector<std::pair<std::string, std::string>>& models,
    std::chrono::steady_clock::time_point run_start) {
  std::vector<autotune::ModelInGraph> steps;
  for (const auto& [path, shapes] : models) steps.push_back({path, shapes, std::nullopt, false});
  autotune::in_graph_step(model_step_options(a, target, ""), db, steps,
                          autotune::budget_deadline(run_start, a.time_budget));
  return steps;
}

// The search's share of --time-budget (autotune::search_budget_s), said
// when the in-graph step takes part of it.
double search_budget(const TuneArgs& a, bool in_graph_step) {
  double search = autotune::search_budget_s(a.time_budget, in_graph_step);
  if (search != a.time_budget)
    std::printf(
        "kiln tune: the search gets %.0f s of the %.0f s budget, the in-graph step the rest\n",
        search, a.time_budget);
  return search;
}

bool any_skipped(const std::vector<autotune::ModelInGraph>& steps) {
  for (const autotune::ModelInGraph& s : steps)
    if (s.skipped) return true;
  return false;
}

// ---- kiln tune --job ---------------------------------------------------------

// Before the database is created: this machine, or the runner's device, must
// be able to run the target's code.
// The tuner's options from the command line (a job overrides the trials).
tuner::TuneOptions tune_options(const TuneArgs& a, const codegen::Target& target) {
  tuner::TuneOptions options;
  options.tuner = a.tuner;
  options.trials = a.trials;
  options.early_stopping = a.early_stopping;
  options.batch = a.batch;
  options.time_budget_s = a.time_budget;
  options.free_layout = a.free_layout;
  options.target = target;
  options.measure = a.measure;
  options.should_stop = [] { return g_interrupted.load(); };
  return options;
}

void check_measurement(tuner::TuneOptions& options) {
  if (options.measure.runner.empty()) {
    tuner::check_host_runs(options.target);
    return;
  }
  options.measure.runner_session = tuner::runner_for(options.measure);
  tuner::check_runner_runs(*options.measure.runner_session, options.target);
  const tuner::RemoteRunner::Hello& h = options.measure.runner_session->hello();
  std::printf("measuring through the runner: an %s device, %d threads, %s\n", h.arch.c_str(),
              h.num_threads,
              h.isolation == "fork" ? "a child process per candidate"
                                    : "candidates in the worker (restarted after a crash)");
}

bool is_html(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == ".html" || ext == ".htm";
}

// Writes a report whole or not at all (support/output_file.h: a temporary
// beside it renamed into place; a device or FIFO written through, a symlink's
// target replaced); a failure says why.
void write_whole(const std::string& path, const std::string& text) {
  try {
    support::write_output_file(path, text);
  } catch (const support::OutputError& e) {
    throw std::runtime_error("cannot write report '" + path + "': " + e.why);
  }
}

// The report to compare with: --previous-report (must be readable JSON), else
// the JSON --report as the last run left it (ignored, with a warning, when it
// is not a report).
nlohmann::json read_previous_report(const TuneArgs& a, std::string& from) {
  auto parse = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read previous report '" + path + "'");
    try {
      nlohmann::json j = nlohmann::json::parse(in);
      if (!j.is_object() || !j.contains("tasks")) throw std::runtime_error("it has no \"tasks\"");
      return j;
    } catch (const std::exception& e) {
      throw std::runtime_error("previous report '" + path +
                               "' is not a kiln tune report: " + e.what());
    }
  };
  if (!a.previous_report.empty()) {
    from = a.previous_report;
    return parse(from);
  }
  for (const std::string& r : a.reports) {
    if (is_html(r) || !std::filesystem::exists(r)) continue;
    try {
      from = r;
      return parse(r);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln tune: warning: no comparison with the previous report: %s\n",
                   e.what());
      from.clear();
      return nullptr;
    }
  }
  return nullptr;
}

int run_tune_job(TuneArgs a) {
  // input_shapes are checked as the job is read: a typo is FILE:LINE, before
  // any model is imported or the database created.
  tuner::Job job = tuner::parse_job_file(
      a.job, [](const std::string& text) { (void)frontend::parse_input_shapes(text); });
  // Options on the command line override the job file's.
  if (!a.set.count("--tuning-log")) a.db = job.tuning_log;
  if (a.db.empty())
    throw std::invalid_argument("job file '" + a.job +
                                "' names no tuning_log; give one there or --tuning-log DB");
  if (!a.set.count("--target")) a.target = job.target;
  if (!a.set.count("--tuner")) a.tuner = job.tuner;
  if (a.tuner != "xgb" && a.tuner != "random" && a.tuner != "grid" && a.tuner != "ga")
    throw std::invalid_argument("--tuner must be xgb, random, grid or ga, not '" + a.tuner + "'");
  if (!a.set.count("--batch")) a.batch = job.batch;
  if (!a.set.count("--early-stopping")) a.early_stopping = job.early_stopping;
  // A worker helps until the trials are done; the job's budget is the main run's.
  if (!a.set.count("--time-budget")) a.time_budget = a.worker ? 0 : job.time_budget_s;
  if (a.set.count("--trials"))
    for (tuner::JobModel& m : job.models) m.trials = a.trials;
  if (a.reports.empty() && !a.worker) a.reports = job.reports;

  // Every report must be writable before hours of tuning.
  TuneArgs check = a;
  check.models.clear();
  for (const tuner::JobModel& m : job.models) check.models.push_back(m.path);
  for (const std::string& r : a.reports) {
    check.report = r;
    check_report_path(check, {job.tuning_log});
  }
  std::string previous_from;
  nlohmann::json previous = a.worker ? nlohmann::json() : read_previous_report(a, previous_from);
  const int64_t started_unix = static_cast<int64_t>(std::time(nullptr));

  support::sweep_stale_temps();
  codegen::Target target =
      a.target.empty() ? codegen::Target::host() : codegen::Target::parse(a.target);
  // A model that fails to import is named and left out; the job goes on.
  std::vector<tuner::JobModelWorkloads> models;
  int failed = 0;
  int64_t largest_weights = 0;
  for (const tuner::JobModel& m : job.models) {
    tuner::JobModelWorkloads w;
    w.model = &m;
    try {
      graph::Graph g = frontend::import_onnx(m.path, frontend::parse_input_shapes(m.input_shapes));
      w.kernels = driver::template_workload_sets(g, target.isa());
      largest_weights = std::max(largest_weights, model_weight_bytes(g, w.kernels, target));
      for (const auto& implementations : w.kernels)
        w.workload_keys.insert(w.workload_keys.end(), implementations.begin(),
                               implementations.end());
    } catch (const std::exception& e) {
      w.error = e.what();
      ++failed;
      std::fprintf(stderr, "kiln tune: model '%s' (%s) failed to import, left out of the job: %s\n",
                   m.name.c_str(), m.path.c_str(), e.what());
    }
    models.push_back(std::move(w));
  }
  tuner::JobTasks jt = tuner::make_job_tasks(job, models);
  size_t kernels = 0, shared = 0;
  for (size_t i = 0; i < jt.tasks.size(); ++i) {
    kernels += static_cast<size_t>(jt.tasks[i].count);
    shared += jt.models_of[i].size() > 1;
  }
  std::printf(
      "kiln tune --job %s%s: %zu models (%d failed to import), %zu kernels, %zu tasks (%zu shared "
      "by several models)\n",
      a.job.c_str(), a.worker ? " (worker)" : "", job.models.size(), failed, kernels,
      jt.tasks.size(), shared);

  choose_weight_measurement(a, largest_weights);
  tuner::TuneOptions options = tune_options(a, target);
  {
    std::vector<tuner::ModelNodes> nodes;
    for (const auto& w : models) nodes.push_back(w.kernels);
    options.implementation_sets = tuner::alternative_sets(nodes);
  }
  options.trials =
      jt.trials.empty() ? a.trials : *std::max_element(jt.trials.begin(), jt.trials.end());
  options.task_trials = jt.trials;
  const bool in_graph = !a.worker && runs_in_graph_step(a);  // a worker leaves it to the main run
  options.time_budget_s = search_budget(a, in_graph);
  if (!jt.tasks.empty()) check_measurement(options);
  tuner::RecordDB db = tuner::RecordDB::open(a.db);
  tuner::RecordDBSink sink(db);

  tuner::TuneSummary summary;
  auto run_start = std::chrono::steady_clock::now();
  if (!jt.tasks.empty()) {
    struct sigaction on_int = {}, prev = {};
    on_int.sa_handler = on_sigint;
    sigemptyset(&on_int.sa_mask);
    on_int.sa_flags = SA_RESTART;
    sigaction(SIGINT, &on_int, &prev);
    a.trials = options.trials;  // the progress line's "of N"
    ProgressLine progress(a, isatty(fileno(stdout)));
    run_start = std::chrono::steady_clock::now();
    summary = tuner::tune(jt.sched_tasks, db, sink, options, &progress);
    progress.finish();
    sigaction(SIGINT, &prev, nullptr);
    // The table shows the models' true kernel counts, not the priority-weighted ones.
    for (size_t i = 0; i < summary.tasks.size(); ++i) summary.tasks[i].task = jt.tasks[i];
    print_summary(a, summary);
  } else {
    std::printf("kiln tune: no tunable workload in the job's models\n");
    summary.stop_reason = "every task finished";
    summary.target_key = tuner::TargetKey::for_target(target, kiln_get_num_threads()).key();
  }

  // The models' in-graph step and layout transforms, as kiln tune runs them.
  // in_graph_results[i]: models[i]'s step (nullopt: failed to import, skipped
  // or nothing to measure).
  std::vector<std::optional<autotune::InGraphStepResult>> in_graph_results(models.size());
  bool complete = true;
  if (!jt.tasks.empty() && !summary.interrupted) {
    std::vector<std::pair<std::string, std::string>> imported;
    std::vector<size_t> index;  // imported[k] is models[index[k]]
    for (size_t i = 0; i < models.size(); ++i)
      if (models[i].error.empty()) {
        imported.emplace_back(models[i].model->path, models[i].model->input_shapes);
        index.push_back(i);
      }
    if (in_graph) {
      std::vector<autotune::ModelInGraph> steps = in_graph_step(a, target, db, imported, run_start);
      complete = !any_skipped(steps);
      for (size_t k = 0; k < steps.size(); ++k) in_graph_results[index[k]] = steps[k].result;
    }
    if (a.free_layout && !a.worker && a.measure.runner.empty())
      for (const auto& [path, shapes] : imported)
        autotune::measure_layout_transforms(model_step_options(a, target, shapes), db, path);
  }

  int status = 0;
  if (summary.interrupted)
    status = 130;
  else if (failed)
    status = 4;  // something is broken: more urgent than a short budget
  else if ((summary.budget_spent() || !complete) && !a.worker)
    status = 3;
  if (failed)
    std::fprintf(stderr, "kiln tune: %d of %zu models failed to import (named above)\n", failed,
                 job.models.size());

  if (!a.reports.empty()) {
    tuner::JobReport report = tuner::make_job_report(job, models, jt, summary, db, target, previous,
                                                     previous_from, started_unix);
    report.exit_status = status;
    for (size_t i = 0; i < models.size(); ++i)
      if (in_graph_results[i] && in_graph_results[i]->estimate.nodes > 0) {
        report.models[i].in_graph = in_graph_results[i]->estimate;
        report.models[i].in_graph_rounds = in_graph_results[i]->rounds;
        report.models[i].in_graph_rounds_planned = in_graph_results[i]->rounds_planned;
      }
    for (const std::string& r : a.reports) {
      write_whole(
          r, is_html(r) ? tuner::job_report_html(report) : tuner::job_report_json(report) + "\n");
      std::printf("report: %s\n", r.c_str());
    }
  }
  return status;
}

}  // namespace

int run_tune(const std::vector<std::string>& args) {
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(kTuneUsage, stdout);
      return 0;
    }
  TuneArgs a = parse_args(args);
  if (!a.job.empty()) return run_tune_job(a);
  if (!a.report.empty()) check_report_path(a);
  support::sweep_stale_temps();  // what killed tunes and builds left in TMPDIR
  // The target first: the strategy rows that pick the tasks' templates may depend on its ISA.
  codegen::Target target =
      a.target.empty() ? codegen::Target::host() : codegen::Target::parse(a.target);
  driver::check_precision(a.graph_precision(), target);
  std::vector<tuner::ModelNodes> nodes;
  int64_t largest_weights = 0;
  for (const std::string& m : a.models) {
    graph::Graph g = frontend::import_onnx(m, frontend::parse_input_shapes(a.input_shapes));
    nodes.push_back(driver::template_workload_sets(g, target.isa(), a.graph_precision()));
    largest_weights = std::max(largest_weights, model_weight_bytes(g, nodes.back(), target));
  }
  std::vector<tuner::Task> tasks = tuner::make_tasks(tuner::node_workloads(nodes));
  if (tasks.empty()) {
    std::printf("kiln tune: no tunable workload in the model(s)\n");
    return 0;
  }
  choose_weight_measurement(a, largest_weights);
  tuner::TuneOptions options = tune_options(a, target);
  options.implementation_sets = tuner::alternative_sets(nodes);
  options.time_budget_s = search_budget(a, runs_in_graph_step(a));
  // Before the database is created: this machine, or the runner's device, must be able
  // to run the target's code.
  check_measurement(options);
  tuner::RecordDB db = tuner::RecordDB::open(a.db);
  tuner::RecordDBSink sink(db);

  // Ctrl-C: stop after the measurement in flight (the temporaries then go by normal
  // unwinding); kiln's cleanup handler (support/temp_files.h) is back afterwards, and
  // keeps SIGTERM and SIGHUP throughout.
  struct sigaction on_int = {}, previous = {};
  on_int.sa_handler = on_sigint;
  sigemptyset(&on_int.sa_mask);
  on_int.sa_flags = SA_RESTART;
  sigaction(SIGINT, &on_int, &previous);
  ProgressLine progress(a, isatty(fileno(stdout)));
  const auto run_start = std::chrono::steady_clock::now();
  tuner::TuneSummary summary = tuner::tune(tasks, db, sink, options, &progress);
  progress.finish();
  sigaction(SIGINT, &previous, nullptr);

  print_summary(a, summary);
  // The in-graph step, in the budget's share kept for it; not after Ctrl-C.
  std::vector<autotune::ModelInGraph> in_graph;
  if (runs_in_graph_step(a)) {
    if (summary.interrupted) {
      std::printf("kiln tune: in-graph re-measurement skipped (interrupted)\n");
    } else {
      std::vector<std::pair<std::string, std::string>> models;
      for (const std::string& m : a.models) models.emplace_back(m, a.input_shapes);
      in_graph = in_graph_step(a, target, db, models, run_start);
    }
  }
  // Layout transforms: a few small builds, so also past the time budget
  // (without them kiln build estimates them from bytes moved).
  if (a.free_layout && a.measure.runner.empty() && !summary.interrupted)
    for (const std::string& m : a.models)
      autotune::measure_layout_transforms(model_step_options(a, target, a.input_shapes), db, m);
  if (!a.report.empty()) {
    std::ofstream out(a.report);
    nlohmann::json report =
        nlohmann::json::parse(tuner::tune_report_json(summary, tuner::redact_url(a.db)));
    report["in_graph"] = autotune::in_graph_json(in_graph);
    out << report.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write report '" + a.report + "'");
  }
  if (summary.interrupted) return 130;
  // A nightly job learns from the status whether the budget sufficed.
  return summary.budget_spent() || any_skipped(in_graph) ? 3 : 0;
}

}  // namespace kiln::cli
