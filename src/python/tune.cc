// kiln.tune: the same run as `kiln tune` (src/cli/tune_command.cc): tasks of
// the models' template workloads, tuner::tune() into the records database,
// the same options, defaults and report. Python gets a callback per round
// (instead of the progress line), and Ctrl-C stops the run after the
// measurement in flight with everything measured stored, as in the CLI.
#include <pybind11/stl.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autotune/model_steps.h"
#include "codegen/target.h"
#include "driver/build.h"
#include "frontend/onnx_import.h"
#include "python/bindings.h"
#include "support/stale_temps.h"
#include "tuner/measure.h"
#include "tuner/records.h"
#include "tuner/remote_runner.h"
#include "tuner/tasks.h"
#include "tuner/tune_loop.h"

namespace kiln::python {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

// SIGINT -> g_interrupted while alive (Python's own handler would only run
// once the GIL is back, i.e. after the whole run); the previous handler after.
class SigintGuard {
 public:
  explicit SigintGuard(bool active) : active_(active) {
    if (!active_) return;
    g_interrupted = false;
    struct sigaction sa = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &previous_);
  }
  ~SigintGuard() {
    if (active_) sigaction(SIGINT, &previous_, nullptr);
  }

 private:
  bool active_;
  struct sigaction previous_ = {};
};

// Calls the Python callback after each round with the GIL held. A callback
// that returns True asks the run to stop; one that raises stops it too, and
// its exception is raised once tune() has stored everything.
class CallbackObserver : public tuner::TuneObserver {
 public:
  CallbackObserver(py::object callback, int64_t trials)
      : callback_(std::move(callback)), trials_(trials) {}

  void on_start(const std::vector<tuner::Task>& tasks, const std::string&, size_t) override {
    tasks_ = &tasks;
    start_ = std::chrono::steady_clock::now();
  }
  void on_round(size_t ti, int64_t trials, const std::vector<double>& gflops, double best,
                int64_t remaining) override {
    if (callback_.is_none() || stop_) return;
    py::gil_scoped_acquire locked;
    const tuner::Task& t = (*tasks_)[ti];
    py::dict info;
    info["task"] = ti, info["tasks"] = tasks_->size(), info["workload"] = t.workload_key;
    info["template"] = t.template_name, info["trials"] = trials, info["trials_per_task"] = trials_;
    info["round_gflops"] = gflops, info["best_gflops"] = best, info["remaining"] = remaining;
    info["elapsed_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    try {
      stop_ = py::bool_(callback_(info));
    } catch (py::error_already_set& e) {
      error_ = std::make_unique<py::error_already_set>(std::move(e));
      stop_ = true;
    }
  }
  bool stop_requested() const { return stop_; }
  // Raises the callback's exception, if any (the GIL held).
  void rethrow() {
    if (error_) throw py::error_already_set(std::move(*error_));
  }

 private:
  py::object callback_;
  int64_t trials_;
  const std::vector<tuner::Task>* tasks_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<py::error_already_set> error_;
};

struct TuneArgs {
  TuneArgs() {
    measure.repeat = 3;  // kiln tune's defaults
    measure.min_repeat_ms = 20;
  }
  std::vector<std::string> models;
  std::string tuning_log, tuner = "xgb", input_shapes, target;
  int64_t trials = 64;
  int early_stopping = 0, batch = 16;
  double time_budget = 0;
  int in_graph = 3;  // configs per task re-measured inside the model (0: none)
  bool free_layout = false;
  std::string weights = "auto";  // how candidates meet their weights: auto, cold, warm
  tuner::MeasureOptions measure;
};

// The checks kiln tune's argument parser makes, with the same words.
void check_args(const TuneArgs& a) {
  if (a.models.empty()) throw std::invalid_argument("no model given");
  if (a.tuning_log.empty()) throw std::invalid_argument("a tuning_log database is required");
  if (a.trials < 1) throw std::invalid_argument("trials needs at least 1");
  if (a.tuner != "xgb" && a.tuner != "random" && a.tuner != "grid" && a.tuner != "ga")
    throw std::invalid_argument("tuner must be xgb, random, grid or ga, not '" + a.tuner + "'");
  if (a.weights != "auto" && a.weights != "cold" && a.weights != "warm")
    throw std::invalid_argument("weights must be auto, cold or warm, not '" + a.weights + "'");
  if (a.early_stopping < 0 || a.batch < 1 || a.time_budget < 0 || a.in_graph < 0 ||
      a.measure.number < 1 || a.measure.repeat < 1 || a.measure.min_repeat_ms < 0 ||
      a.measure.timeout_s < 0 || a.measure.compile_budget_s < 0)
    throw std::invalid_argument(
        "early_stopping, time_budget, in_graph, min_repeat_ms, timeout and compile_budget must be "
        ">= 0; "
        "batch, number and repeat >= 1");
}

// As kiln tune: not with a runner (the model would run on this machine).
bool runs_in_graph_step(const TuneArgs& a) { return a.in_graph > 0 && a.measure.runner.empty(); }

// The steps after the search that build the model (autotune/model_steps.h),
// as kiln tune runs them; silent (the summary reports them). Returns the
// in-graph step's per-model results.
std::vector<autotune::ModelInGraph> model_steps(const TuneArgs& a, const codegen::Target& target,
                                                bool cold_weights, tuner::RecordDB& db,
                                                std::chrono::steady_clock::time_point run_start) {
  autotune::ModelStepOptions o;
  o.target = target;
  o.tuning_log = a.tuning_log;
  o.input_shapes = a.input_shapes;
  o.cold_weights = cold_weights;
  o.in_graph = a.in_graph;
  std::vector<autotune::ModelInGraph> steps;
  if (runs_in_graph_step(a)) {
    for (const std::string& m : a.models) steps.push_back({m, a.input_shapes, std::nullopt, false});
    autotune::in_graph_step(o, db, steps, autotune::budget_deadline(run_start, a.time_budget));
  }
  if (a.free_layout && a.measure.runner.empty())
    for (const std::string& m : a.models) autotune::measure_layout_transforms(o, db, m);
  return steps;
}

tuner::TuneOptions tune_options(const TuneArgs& a, const codegen::Target& target) {
  tuner::TuneOptions o;
  o.tuner = a.tuner;
  o.trials = a.trials;
  o.early_stopping = a.early_stopping;
  o.batch = a.batch;
  o.time_budget_s = autotune::search_budget_s(a.time_budget, runs_in_graph_step(a));
  o.free_layout = a.free_layout;
  o.target = target;
  o.measure = a.measure;
  return o;
}

// The tuning tasks of the models (kiln tune's and kiln tasks' extraction:
// every template workload, identical ones merged). Called without the GIL.
// `largest_weights`, when given, gets the largest model's weight bytes (kiln tune's
// count: its initializers, or its kernels' weights in their layouts where larger).
std::vector<tuner::ModelNodes> model_nodes(const std::vector<std::string>& models,
                                           const std::string& input_shapes,
                                           const codegen::Target& target,
                                           int64_t* largest_weights = nullptr) {
  std::vector<tuner::ModelNodes> nodes;
  for (const std::string& m : models) {
    graph::Graph g = frontend::import_onnx(m, frontend::parse_input_shapes(input_shapes));
    nodes.push_back(driver::template_workload_sets(g, target.isa()));
    if (largest_weights)  // as kiln tune counts them: Winograd's transformed weights included
      *largest_weights = std::max({*largest_weights, graph::initializer_bytes(g),
                                   tuner::kernel_weight_bytes(nodes.back(), target.isa())});
  }
  return nodes;
}

std::vector<tuner::Task> model_tasks(const std::vector<std::string>& models,
                                     const std::string& input_shapes,
                                     const codegen::Target& target) {
  return tuner::make_tasks(tuner::node_workloads(model_nodes(models, input_shapes, target)));
}

// kiln.tasks: each task as (workload, template, count, flops, weight).
py::list tasks(const std::vector<std::string>& models, const std::string& input_shapes,
               const std::string& target) {
  codegen::Target t = target.empty() ? codegen::Target::host() : codegen::Target::parse(target);
  std::vector<tuner::Task> ts;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::recursive_mutex> one_at_a_time(compiler_mutex());
    ts = model_tasks(models, input_shapes, t);
  }
  py::list out;
  for (const tuner::Task& x : ts)
    out.append(py::make_tuple(x.workload_key, x.template_name, x.count, x.flops, x.weight));
  return out;
}

// {"report": tune_report_json's text, "interrupted": Ctrl-C, "stopped": a
// callback asked to stop}; python/kiln/_tune.py makes a TuneSummary of it.
py::dict tune(const TuneArgs& a, py::object callback, bool handle_sigint) {
  check_args(a);
  codegen::Target target =
      a.target.empty() ? codegen::Target::host() : codegen::Target::parse(a.target);
  tuner::TuneOptions options = tune_options(a, target);
  CallbackObserver observer(callback, a.trials);
  tuner::TuneSummary summary;
  std::vector<autotune::ModelInGraph> in_graph;
  {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::recursive_mutex> one_at_a_time(compiler_mutex());
    support::sweep_stale_temps();
    int64_t largest_weights = 0;
    std::vector<tuner::ModelNodes> nodes =
        model_nodes(a.models, a.input_shapes, target, &largest_weights);
    // As kiln tune chooses (tuner::cold_weights_by_default).
    options.measure.cold_weights =
        a.weights == "auto"
            ? tuner::cold_weights_by_default(
                  largest_weights, codegen::cache_sizes(codegen::Target::host()).l3, a.measure)
            : a.weights == "cold";
    std::vector<tuner::Task> tasks = tuner::make_tasks(tuner::node_workloads(nodes));
    options.implementation_sets = tuner::alternative_sets(nodes);
    if (!tasks.empty()) {
      // Before the database is created: this machine, or the runner's device, must run the code.
      if (a.measure.runner.empty()) {
        tuner::check_host_runs(options.target);
      } else {
        options.measure.runner_session = tuner::runner_for(options.measure);
        tuner::check_runner_runs(*options.measure.runner_session, options.target);
      }
      tuner::RecordDB db = tuner::RecordDB::open(a.tuning_log);
      tuner::RecordDBSink sink(db);
      SigintGuard sigint(handle_sigint);
      options.should_stop = [&] { return g_interrupted.load() || observer.stop_requested(); };
      const auto run_start = std::chrono::steady_clock::now();
      summary = tuner::tune(tasks, db, sink, options, &observer);
      // Not after Ctrl-C, a callback's stop or its exception (which stops too).
      if (!summary.interrupted && !observer.stop_requested())
        in_graph = model_steps(a, target, options.measure.cold_weights, db, run_start);
    }
  }
  observer.rethrow();
  py::dict out;
  nlohmann::json report = nlohmann::json::parse(tuner::tune_report_json(summary, a.tuning_log, -1));
  report["in_graph"] = autotune::in_graph_json(in_graph);
  out["report"] = report.dump();
  out["interrupted"] = summary.interrupted && handle_sigint && g_interrupted.load();
  out["stopped"] = observer.stop_requested();
  return out;
}

}  // namespace

void bind_tune(py::module_& m) {
  py::class_<TuneArgs>(m, "TuneArgs")
      .def(py::init<>())
      .def_readwrite("models", &TuneArgs::models)
      .def_readwrite("tuning_log", &TuneArgs::tuning_log)
      .def_readwrite("tuner", &TuneArgs::tuner)
      .def_readwrite("input_shapes", &TuneArgs::input_shapes)
      .def_readwrite("target", &TuneArgs::target)
      .def_readwrite("trials", &TuneArgs::trials)
      .def_readwrite("early_stopping", &TuneArgs::early_stopping)
      .def_readwrite("batch", &TuneArgs::batch)
      .def_readwrite("time_budget", &TuneArgs::time_budget)
      .def_readwrite("in_graph", &TuneArgs::in_graph)
      .def_readwrite("free_layout", &TuneArgs::free_layout)
      .def_readwrite("weights", &TuneArgs::weights)
      .def_property(
          "number", [](const TuneArgs& a) { return a.measure.number; },
          [](TuneArgs& a, int v) { a.measure.number = v; })
      .def_property(
          "repeat", [](const TuneArgs& a) { return a.measure.repeat; },
          [](TuneArgs& a, int v) { a.measure.repeat = v; })
      .def_property(
          "min_repeat_ms", [](const TuneArgs& a) { return a.measure.min_repeat_ms; },
          [](TuneArgs& a, double v) { a.measure.min_repeat_ms = v; })
      .def_property(
          "timeout", [](const TuneArgs& a) { return a.measure.timeout_s; },
          [](TuneArgs& a, double v) { a.measure.timeout_s = v; })
      .def_property(
          "compile_budget", [](const TuneArgs& a) { return a.measure.compile_budget_s; },
          [](TuneArgs& a, double v) { a.measure.compile_budget_s = v; })
      .def_property(
          "runner", [](const TuneArgs& a) { return a.measure.runner; },
          [](TuneArgs& a, const std::string& v) { a.measure.runner = v; })
      .def_property(
          "worker_path", [](const TuneArgs& a) { return a.measure.worker_path; },
          [](TuneArgs& a, const std::string& v) { a.measure.worker_path = v; });
  m.def("tune", &tune, py::arg("args"), py::arg("callback"), py::arg("handle_sigint"));
  m.def("tasks", &tasks, py::arg("models"), py::arg("input_shapes"), py::arg("target"));
}

}  // namespace kiln::python
