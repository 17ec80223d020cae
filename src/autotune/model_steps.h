// The steps of a tuning run that build and run the model itself, after the
// isolated search (tuner::tune) has measured each kernel alone:
//
//   1. the in-graph step: each task's fastest configs re-timed inside the
//      compiled model (driver/measure_in_graph.h), stored as in-graph
//      records, which `kiln build` prefers;
//   2. with free layouts, the layout transforms the candidates may need,
//      timed once each (tuner/layout_records.h) for the build's layout choice.
//
// `kiln tune`, `kiln tune --job` and Python's kiln.tune all run them, so that
// what one of them tunes builds the same way. They sit in their own layer
// because they need both the driver (builds) and the tuner (records).
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "graph/passes/strategy.h"
#include "tuner/in_graph_records.h"
#include "tuner/records.h"

namespace kiln::autotune {

struct ModelStepOptions {
  codegen::Target target;
  std::string tuning_log;    // the records database's path: the build's config chooser reads it
  std::string input_shapes;  // as `kiln tune --input-shapes`
  graph::Precision precision = graph::Precision::kFp32;
  bool cold_weights = false;  // the search's isolated records were timed with cold weights
  int in_graph = 3;           // configs per task re-measured in the model
  // Receives each line of progress and results; may be empty.
  std::function<void(const std::string&)> print;
  // When refine_in_graph should end: it measures the rounds that fit
  // (driver::InGraphOptions::deadline). in_graph_step sets it per model.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// What the in-graph step did for one model.
struct InGraphStepResult {
  size_t records = 0;    // in-graph records stored
  size_t workloads = 0;  // workloads with candidates
  // Workloads where another candidate ran clearly faster in the model than
  // the isolated search's best.
  size_t changed = 0;
  double seconds = 0;
  size_t rounds = 0, rounds_planned = 0;  // fewer measured than planned: the deadline cut them
  // The template kernels timed (those whose tasks had records), tuned and untuned.
  tuner::InGraphEstimate estimate;
  size_t model_kernels = 0;  // all the model's template kernels: the estimate covers some
};

// Re-measures each of the model's tasks' best `options.in_graph` configs
// (and their untuned config) inside the compiled model and stores the times
// in `db` as in-graph records. Concurrent runs (tuner::InGraphClaims): each
// workload's candidates are claimed first, and a workload another live run
// holds or timed is left to it; the builds and runs wait for this host's
// timing turn, and no run is timed while another tuner of this host measures. `claims`: the run's
// (in_graph_step's), or nullptr for claims of this call only. nullopt when no
// task of the model has a correct isolated record, another run holds all its
// candidates, or the deadline passed waiting for the turn. The estimate
// counts every in-graph record of the model's workloads stored since this
// process started (a concurrent run's too). Throws what build() and
// import_onnx() throw.
std::optional<InGraphStepResult> refine_in_graph(const ModelStepOptions& options,
                                                 tuner::RecordDB& db, const std::string& model,
                                                 tuner::InGraphClaims* claims = nullptr);

// One model of a run's in-graph step.
struct ModelInGraph {
  std::string model, input_shapes;
  std::optional<InGraphStepResult> result;  // nullopt: skipped, or no task had a record
  bool skipped = false;                     // the time budget was spent before its turn
};

// The in-graph step over `models` (each ModelInGraph's model and
// input_shapes set; `base.input_shapes` is ignored). Without a deadline it
// goes in order. With a `deadline` it goes cheapest model first
// (in_graph_cost), and each model gets a part of the time left when its turn
// comes in proportion to its cost, so that what a cheap model leaves passes
// to the costlier ones; each measures the rounds that fit in its part, at
// least two. A model whose turn comes after the deadline is marked skipped,
// and one line names those. Fills each result, in `models`' order.
void in_graph_step(const ModelStepOptions& base, tuner::RecordDB& db,
                   std::vector<ModelInGraph>& models,
                   std::optional<std::chrono::steady_clock::time_point> deadline);

// What the model's in-graph step costs against another model's: its template
// kernels times the rounds it plans (driver::in_graph_rounds over the
// candidates `db` holds for it, at least 1). A round builds the whole model
// and the build's time grows with its kernels (of the six zoo models' 161 s on
// a Zen 5, ResNet-50, the most kernels, took 77 s); a node with Winograd and
// direct alternates them, so such a model plans twice the rounds. Weighing
// kernels alone, ResNet-18 (8 rounds) got 35 s of a 360 s step and measured 4
// of them, while the other five models left 208 s unused (AVX2 code on a
// Zen 5, 2026-11-30). 1 for a model that does not import: refine_in_graph
// then says why.
double in_graph_cost(const ModelStepOptions& options, const tuner::RecordDB& db,
                     const std::string& model);

// The order of models of these costs in a budgeted in-graph step: cheapest
// first, ties in the given order.
std::vector<size_t> in_graph_order(const std::vector<double>& costs);

// When the part of the time left before `deadline`, from `now`, of a model
// of cost `cost` ends, the models still to do (it counted) costing
// `cost_left` in all.
std::chrono::steady_clock::time_point model_deadline(std::chrono::steady_clock::time_point now,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     double cost, double cost_left);

// The step as kiln tune's --report and kiln.tune's summary show it: per
// model {model, skipped, records, workloads, changed, seconds, rounds,
// rounds_planned, model_kernels, kernels, tuned_kernels, tuned_ms,
// untuned_ms} (the last four where it measured; kernels of model_kernels
// were timed).
nlohmann::json in_graph_json(const std::vector<ModelInGraph>& models);

// Times the layout transforms the model's candidates (records with any
// channel blocks) may need and stores them; those already stored are not
// measured again. Returns how many it stored.
size_t measure_layout_transforms(const ModelStepOptions& options, tuner::RecordDB& db,
                                 const std::string& model);

// The share of a run's time budget kept for the in-graph step: the search
// stops at the rest. On a 2-core Zen 5 the whole step took 161 s for the six
// zoo models (9 % of a 30-minute budget), ResNet-50 alone 77 s; in a smaller
// share each model measures fewer rounds (in_graph_step).
constexpr double kInGraphBudgetShare = 0.15;

// When a run that started at `start` with a budget of `budget_s` seconds
// (0: none) must stop; nullopt without a budget.
std::optional<std::chrono::steady_clock::time_point> budget_deadline(
    std::chrono::steady_clock::time_point start, double budget_s);

// The search's time budget when a run of `budget_s` seconds (0: none) will
// also run the in-graph step.
double search_budget_s(double budget_s, bool in_graph_step);

}  // namespace kiln::autotune
