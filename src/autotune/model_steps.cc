#include "autotune/model_steps.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "driver/build.h"
#include "driver/measure_in_graph.h"
#include "driver/measure_transforms.h"
#include "frontend/onnx_import.h"
#include "runtime/c_runtime_api.h"
#include "tuner/layout_records.h"
#include "tuner/target_key.h"
#include "tuner/tuned_configs.h"

namespace kiln::autotune {
namespace {

template <typename... Args>
void say(const ModelStepOptions& o, const char* format, Args... args) {
  if (!o.print) return;
  std::string line(std::snprintf(nullptr, 0, format, args...), '\0');
  std::snprintf(line.data(), line.size() + 1, format, args...);
  o.print(line);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

graph::Graph import_model(const ModelStepOptions& o, const std::string& model) {
  return frontend::import_onnx(model, frontend::parse_input_shapes(o.input_shapes));
}

// Workloads where another candidate ran clearly faster in the model than the
// isolated best (each candidate list's first config); ties are noise.
size_t count_changed(const std::map<std::string, std::vector<std::string>>& candidates,
                     const std::vector<tuner::Record>& records) {
  size_t changed = 0;
  for (const auto& [w, cfgs] : candidates) {
    const tuner::Record *best = nullptr, *isolated_best = nullptr;
    size_t others = 0;
    for (const tuner::Record& r : records) {
      if (r.workload_key != w) continue;
      ++others;
      if (!best || r.mean_ms() < best->mean_ms()) best = &r;
      if (r.config_json == cfgs.front()) isolated_best = &r;
    }
    if (best && isolated_best && best != isolated_best &&
        tuner::clearly_faster(*best, *isolated_best, others - 1))
      ++changed;
  }
  return changed;
}

// Waits for this host's in-graph timing turn (tuner::InGraphClaims); false
// when the deadline passed first.
bool take_turn(const ModelStepOptions& o, tuner::InGraphClaims& claims, const std::string& model) {
  bool said = false;
  auto last_renew = std::chrono::steady_clock::now();
  for (;;) {
    int64_t holder = -1;
    try {
      holder = claims.try_take_turn();
      if (holder != 0 && seconds_since(last_renew) > 60) {
        last_renew = std::chrono::steady_clock::now();
        claims.renew();  // the candidates claimed meanwhile stay this run's
      }
    } catch (const tuner::RecordDBBusy&) {
      // Locked for the busy timeout: ask again.
    }
    if (holder == 0) return true;
    if (o.deadline && std::chrono::steady_clock::now() >= *o.deadline) {
      say(o,
          "kiln tune: in-graph re-measurement of %s skipped: another tuner's in-graph step "
          "held this host until the deadline",
          model.c_str());
      return false;
    }
    if (!said)
      say(o, "kiln tune: waiting for another tuner's in-graph step on this host%s to finish",
          holder > 0 ? (" (pid " + std::to_string(holder) + ")").c_str() : "");
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

// Says which models' turn came after the deadline, and marks them skipped.
void skip_models(const ModelStepOptions& o, std::vector<ModelInGraph>& models,
                 const std::vector<size_t>& order, size_t from) {
  std::string skipped;
  for (size_t k = from; k < order.size(); ++k) {
    models[order[k]].skipped = true;
    skipped += (k > from ? ", " : "") + models[order[k]].model;
  }
  say(o, "kiln tune: in-graph re-measurement skipped for %s (time budget spent)", skipped.c_str());
}

}  // namespace

double in_graph_cost(const ModelStepOptions& o, const tuner::RecordDB& db,
                     const std::string& model) {
  try {
    const Isa isa = o.target.isa();
    const std::vector<std::vector<std::string>> sets =
        driver::template_workload_sets(import_model(o, model), isa, o.precision);
    std::vector<std::string> workloads;
    for (const std::vector<std::string>& keys : sets)
      workloads.insert(workloads.end(), keys.begin(), keys.end());
    const tuner::TargetKey key = tuner::TargetKey::for_target(o.target, kiln_get_num_threads());
    const size_t rounds = driver::in_graph_rounds(sets, tuner::in_graph_candidates(
                                                            db, key.isolated(o.cold_weights).key(),
                                                            workloads, o.in_graph, &isa))
                              .size();
    return static_cast<double>(std::max<size_t>(1, sets.size()) * std::max<size_t>(1, rounds));
  } catch (const std::exception&) {
    return 1;
  }
}

std::vector<size_t> in_graph_order(const std::vector<double>& costs) {
  std::vector<size_t> order(costs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return costs[a] < costs[b]; });
  return order;
}

std::chrono::steady_clock::time_point model_deadline(std::chrono::steady_clock::time_point now,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     double cost, double cost_left) {
  if (deadline <= now || cost_left <= 0 || cost >= cost_left) return deadline;
  auto left = std::chrono::duration<double>(deadline - now);
  return now +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(left * (cost / cost_left));
}

double search_budget_s(double budget_s, bool in_graph_step) {
  if (budget_s <= 0 || !in_graph_step) return budget_s;
  return budget_s * (1 - kInGraphBudgetShare);
}

std::optional<std::chrono::steady_clock::time_point> budget_deadline(
    std::chrono::steady_clock::time_point start, double budget_s) {
  if (budget_s <= 0) return std::nullopt;
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(budget_s));
}

std::optional<InGraphStepResult> refine_in_graph(const ModelStepOptions& o, tuner::RecordDB& db,
                                                 const std::string& model,
                                                 tuner::InGraphClaims* claims) {
  tuner::TargetKey key = tuner::TargetKey::for_target(o.target, kiln_get_num_threads());
  const graph::Graph g = import_model(o, model);
  const Isa isa = o.target.isa();
  std::vector<std::string> workloads = driver::template_workloads(g, isa, o.precision);
  auto all = tuner::in_graph_candidates(db, key.isolated(o.cold_weights).key(), workloads,
                                        o.in_graph, &isa);
  if (all.empty()) {
    say(o, "kiln tune: no in-graph re-measurement for %s: none of its tasks has a correct record",
        model.c_str());
    return std::nullopt;
  }
  std::optional<tuner::InGraphClaims> own;
  if (!claims) claims = &own.emplace(db);
  auto candidates = claims->claim(all, key.in_graph().key());
  if (candidates.empty()) {
    say(o,
        "kiln tune: no in-graph re-measurement for %s: another run on %s timed (or is timing) "
        "its candidates",
        model.c_str(), db.path().c_str());
    return std::nullopt;
  }
  if (!take_turn(o, *claims, model)) return std::nullopt;
  struct TurnRelease {
    tuner::InGraphClaims& c;
    ~TurnRelease() {
      try {
        c.release_turn();
      } catch (...) {
        // It expires by itself.
      }
    }
  } turn{*claims};

  driver::InGraphOptions in_graph;
  in_graph.build.target = o.target;
  in_graph.build.input_shapes = o.input_shapes;
  in_graph.build.precision = o.precision;
  tuner::BuildRecordOptions records;
  records.tuning_log = o.tuning_log;
  in_graph.build.choose_configs = [&](const std::vector<std::vector<std::string>>& sets) {
    std::map<std::string, driver::ChosenConfig> configs;
    for (const auto& [k, c] : tuner::configs_for_build(records, o.target, sets))
      configs[k] = {c.config_json, c.gflops};
    return configs;
  };
  in_graph.deadline = o.deadline;
  auto last_renew = std::chrono::steady_clock::now();
  in_graph.others_measuring = [&] {
    try {
      if (seconds_since(last_renew) > 60) {
        last_renew = std::chrono::steady_clock::now();
        claims->renew();  // a long step's claims must not expire under it
      }
      return claims->other_local_measurer() != 0;
    } catch (const std::exception&) {
      return false;  // a locked database: the next visit asks again
    }
  };
  if (o.print) in_graph.progress = [&](const std::string& line) { o.print("  in-graph: " + line); };
  say(o, "kiln tune: re-measuring up to %d configs per task inside %s", o.in_graph, model.c_str());

  auto start = std::chrono::steady_clock::now();
  std::vector<tuner::Record> recs;
  driver::InGraphResult measured = driver::measure_in_graph(model, candidates, in_graph);
  for (const driver::InGraphTime& t : measured.times)
    recs.push_back(
        tuner::in_graph_record(t.workload, key.in_graph().key(), t.config_json, t.per_call_ms));
  db.add_batch(recs);

  InGraphStepResult r;
  r.records = recs.size();
  r.workloads = candidates.size();
  r.changed = count_changed(candidates, recs);
  r.seconds = seconds_since(start);
  r.rounds = measured.rounds, r.rounds_planned = measured.rounds_planned;
  say(o,
      "kiln tune: %zu in-graph records for %zu workloads in %.0f s; another candidate ran "
      "clearly faster in the model than the isolated best for %zu",
      r.records, r.workloads, r.seconds, r.changed);
  // Whether tuning paid in this model: its kernels with the in-graph bests
  // against the untuned defaults, both as measured in this step.
  const std::vector<std::vector<std::string>> sets =
      driver::template_workload_sets(g, isa, o.precision);
  std::vector<tuner::Record> timed;  // by this run or a concurrent one
  std::set<std::string> seen;
  for (const std::vector<std::string>& set : sets)
    for (const std::string& w : set)
      if (seen.insert(w).second)
        for (tuner::Record& rec : db.records(w, key.in_graph().key()))
          if (rec.timestamp_unix >= tuner::process_start_unix()) timed.push_back(std::move(rec));
  r.estimate = tuner::estimate_in_graph(sets, timed, isa);
  r.model_kernels = sets.size();
  const tuner::InGraphEstimate& e = r.estimate;
  // "(7 of its 26)" where only some kernels' tasks had records: the times cover those.
  const std::string counted = e.nodes < r.model_kernels ? std::to_string(e.nodes) + " of its " +
                                                              std::to_string(r.model_kernels)
                                                        : std::to_string(e.nodes);
  if (e.nodes > 0)
    say(o,
        "kiln tune: inside the model the template kernels (%s) take %.3f ms a run with the "
        "in-graph best configs, %.3f ms untuned (%.2fx); %zu run a tuned config",
        counted.c_str(), e.tuned_ms, e.untuned_ms, e.tuned_ms / e.untuned_ms, e.tuned_nodes);
  return r;
}

void in_graph_step(const ModelStepOptions& base, tuner::RecordDB& db,
                   std::vector<ModelInGraph>& models,
                   std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::vector<double> costs(models.size(), 1.0);
  if (deadline)
    for (size_t i = 0; i < models.size(); ++i) {
      ModelStepOptions o = base;
      o.input_shapes = models[i].input_shapes;
      costs[i] = in_graph_cost(o, db, models[i].model);
    }
  const std::vector<size_t> order = in_graph_order(costs);
  double cost_left = 0;
  for (double c : costs) cost_left += c;
  tuner::InGraphClaims claims(db);  // held until every model is done
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    auto now = std::chrono::steady_clock::now();
    if (deadline && now >= *deadline) return skip_models(base, models, order, k);
    ModelStepOptions o = base;
    o.input_shapes = models[i].input_shapes;
    if (deadline) o.deadline = model_deadline(now, *deadline, costs[i], cost_left);
    cost_left -= costs[i];
    models[i].result = refine_in_graph(o, db, models[i].model, &claims);
  }
}

nlohmann::json in_graph_json(const std::vector<ModelInGraph>& models) {
  nlohmann::json out = nlohmann::json::array();
  for (const ModelInGraph& m : models) {
    nlohmann::json j = {{"model", m.model}, {"skipped", m.skipped}};
    if (m.result) {
      const InGraphStepResult& r = *m.result;
      j["records"] = r.records, j["workloads"] = r.workloads, j["changed"] = r.changed;
      j["seconds"] = r.seconds;
      j["rounds"] = r.rounds, j["rounds_planned"] = r.rounds_planned;
      j["model_kernels"] = r.model_kernels;
      if (r.estimate.nodes > 0) {
        j["kernels"] = r.estimate.nodes, j["tuned_kernels"] = r.estimate.tuned_nodes;
        j["tuned_ms"] = r.estimate.tuned_ms, j["untuned_ms"] = r.estimate.untuned_ms;
      }
    }
    out.push_back(j);
  }
  return out;
}

size_t measure_layout_transforms(const ModelStepOptions& o, tuner::RecordDB& db,
                                 const std::string& model) {
  int threads = kiln_get_num_threads();
  std::vector<std::string> workloads =
      driver::template_workloads(import_model(o, model), o.target.isa(), o.precision);
  auto candidates = tuner::layout_candidates(db, o.target, threads, workloads);
  std::map<std::string, double> known = tuner::load_transform_times(db, o.target, threads);
  std::vector<tuner::TransformNeed> todo;
  std::vector<driver::TransformSpec> specs;
  for (const tuner::TransformNeed& t : tuner::needed_transforms(candidates)) {
    if (known.count(tuner::transform_workload_key(t.shape, t.from, t.to))) continue;
    todo.push_back(t);
    specs.push_back({t.shape, t.from, t.to});
  }
  if (todo.empty()) return 0;
  say(o, "kiln tune: timing %zu layout transforms for %s", todo.size(), model.c_str());
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<double>> times = driver::measure_transforms(specs, o.target, 20);
  std::string key = tuner::transform_target_key(o.target, threads);
  std::vector<tuner::Record> recs;
  for (size_t i = 0; i < todo.size(); ++i)
    recs.push_back(tuner::transform_record(todo[i], key, times[i]));
  db.add_batch(recs);
  say(o, "kiln tune: %zu layout transform records in %.0f s", recs.size(), seconds_since(start));
  return recs.size();
}

}  // namespace kiln::autotune
