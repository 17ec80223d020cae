// The budgeted in-graph step (autotune/model_steps.h): the models' costs,
// the order they go in, and each one's part of the time left.
#include "autotune/model_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "codegen/target.h"
#include "driver/build.h"
#include "driver_harness.h"
#include "frontend/onnx_import.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "tuner/target_key.h"

namespace kiln::test {
namespace {

using Clock = std::chrono::steady_clock;

// x -> (1x1 Conv 8 -> 8, Relu) `convs` times -> y
std::string write_conv_chain(const ScratchDir& work, const std::string& name, int convs) {
  std::mt19937 rng(7);
  OnnxBuilder b;
  b.input("x", {"1", "8", "8", "8"});
  b.output("y", {"1", "8", "8", "8"});
  std::string in = "x";
  for (int i = 0; i < convs; ++i) {
    const std::string id = std::to_string(i);
    const std::string out = i + 1 == convs ? "y" : "r" + id;
    conv(b, "c" + id, in, "a" + id, {8, 8, 1, 1, 1, 0}, rng);
    b.node("Relu", "relu" + id, {"a" + id}, {out});
    in = out;
  }
  const std::string path = work.file(name + ".onnx");
  write_bytes(path, b.bytes());
  return path;
}

autotune::ModelStepOptions host_options() {
  autotune::ModelStepOptions o;
  o.target = codegen::Target::host();
  return o;
}

TEST(InGraphStep, CostIsTheModelsTemplateKernelsTimesItsRounds) {
  ScratchDir work;
  autotune::ModelStepOptions o = host_options();
  o.in_graph = 3;
  tuner::RecordDB db = tuner::RecordDB::open(work.file("t.db"));
  const std::string one = write_conv_chain(work, "one", 1);
  const std::string three = write_conv_chain(work, "three", 3);
  // No candidates yet: one round's worth, the kernels.
  EXPECT_EQ(autotune::in_graph_cost(o, db, one), 1);
  EXPECT_EQ(autotune::in_graph_cost(o, db, three), 3);
  // A model that does not import costs 1: refine_in_graph says why.
  EXPECT_EQ(autotune::in_graph_cost(o, db, work.file("missing.onnx")), 1);

  // Two isolated records of the chain's one workload, neither its fallback:
  // the step plans 3 rounds (the two and the fallback), for each kernel.
  const Isa isa = o.target.isa();
  const std::vector<std::string> keys =
      driver::template_workloads(frontend::import_onnx(one, {}), isa);
  ASSERT_EQ(keys.size(), 1u);
  const ops::Workload w = ops::Workload::parse(keys[0]);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  const schedule::Config fb = t.fallback(w, isa);
  std::mt19937_64 rng(5);
  std::vector<schedule::Config> picked;
  while (picked.size() < 2) {
    schedule::Config c = t.space(w).random(rng);
    if (c == fb || ops::layout_blocks(t, w, c) != ops::layout_blocks(t, w, fb)) continue;
    if (std::find(picked.begin(), picked.end(), c) == picked.end()) picked.push_back(c);
  }
  const tuner::TargetKey key = tuner::TargetKey::for_target(o.target, kiln_get_num_threads());
  for (size_t i = 0; i < picked.size(); ++i) {
    tuner::Record rec;
    rec.workload_key = keys[0];
    rec.target_key = key.isolated(o.cold_weights).key();
    rec.config_json = picked[i].to_json();
    rec.times_ms = {0.1 + 0.01 * static_cast<double>(i)};
    rec.error = tuner::ErrorClass::kOk;
    rec.gflops = 1;
    rec.kiln_version = "test";
    db.add(rec);
  }
  EXPECT_EQ(autotune::in_graph_cost(o, db, one), 3);
  EXPECT_EQ(autotune::in_graph_cost(o, db, three), 9);
  // --in-graph 1: the best and the fallback.
  o.in_graph = 1;
  EXPECT_EQ(autotune::in_graph_cost(o, db, three), 6);
}

TEST(InGraphStep, CheapestModelsGoFirstTiesInOrder) {
  EXPECT_EQ(autotune::in_graph_order({3, 1, 3, 2}), (std::vector<size_t>{1, 3, 0, 2}));
  EXPECT_EQ(autotune::in_graph_order({}), std::vector<size_t>{});
}

TEST(InGraphStep, EachModelGetsTheTimeLeftInProportionToItsCost) {
  const Clock::time_point now = Clock::now();
  const Clock::time_point deadline = now + std::chrono::seconds(100);
  auto seconds = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - now).count();
  };
  EXPECT_NEAR(seconds(autotune::model_deadline(now, deadline, 1, 4)), 25, 1e-6);
  EXPECT_NEAR(seconds(autotune::model_deadline(now, deadline, 3, 4)), 75, 1e-6);
  // The last model gets all that is left; a deadline past stays past.
  EXPECT_EQ(autotune::model_deadline(now, deadline, 2, 2), deadline);
  EXPECT_EQ(autotune::model_deadline(deadline + std::chrono::seconds(1), deadline, 1, 4), deadline);
}

// The order the step visits models in, seen in the line each prints: with an
// empty database each says it has no record to re-measure.
std::vector<std::string> visit_order(const std::vector<std::string>& paths,
                                     std::optional<Clock::time_point> deadline,
                                     std::vector<autotune::ModelInGraph>& models) {
  ScratchDir work;
  tuner::RecordDB db = tuner::RecordDB::open(work.file("empty.db"));
  autotune::ModelStepOptions o = host_options();
  std::vector<std::string> lines;
  o.print = [&](const std::string& line) { lines.push_back(line); };
  for (const std::string& p : paths) models.push_back({p, "", std::nullopt, false});
  autotune::in_graph_step(o, db, models, deadline);
  std::vector<std::string> order;
  for (const std::string& line : lines)
    for (const std::string& p : paths)
      if (line.find("no in-graph re-measurement for " + p + ":") != std::string::npos)
        order.push_back(p);
  return order;
}

TEST(InGraphStep, ABudgetedStepGoesCheapestModelFirst) {
  ScratchDir work;
  const std::string big = write_conv_chain(work, "big", 3);
  const std::string small = write_conv_chain(work, "small", 1);
  std::vector<autotune::ModelInGraph> models;
  EXPECT_EQ(visit_order({big, small}, Clock::now() + std::chrono::hours(1), models),
            (std::vector<std::string>{small, big}));
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].model, big) << "the results stay in the models' order";
  EXPECT_FALSE(models[0].skipped);
  // Without a budget the models go in their order.
  models.clear();
  EXPECT_EQ(visit_order({big, small}, std::nullopt, models),
            (std::vector<std::string>{big, small}));
  // A budget already spent skips every model, and says so.
  models.clear();
  EXPECT_TRUE(visit_order({big, small}, Clock::now(), models).empty());
  EXPECT_TRUE(models[0].skipped && models[1].skipped);
}

// Where only some of the model's tasks have records, the step times those
// kernels, and says how many of the model's it timed.
TEST(InGraphStep, SaysHowManyOfTheModelsKernelsItTimed) {
  ScratchDir work;
  std::mt19937 rng(3);
  OnnxBuilder b;  // x -> 1x1 Conv 8 -> 8 -> Relu -> 1x1 Conv 8 -> 16 -> y: two workloads
  b.input("x", {"1", "8", "8", "8"});
  b.output("y", {"1", "16", "8", "8"});
  conv(b, "c0", "x", "a", {8, 8, 1, 1, 1, 0}, rng);
  b.node("Relu", "relu", {"a"}, {"r"});
  conv(b, "c1", "r", "y", {8, 16, 1, 1, 1, 0}, rng);
  const std::string model = work.file("two.onnx");
  write_bytes(model, b.bytes());

  autotune::ModelStepOptions o = host_options();
  o.tuning_log = work.file("t.db");
  o.in_graph = 1;
  std::vector<std::string> lines;
  o.print = [&](const std::string& line) { lines.push_back(line); };
  const Isa isa = o.target.isa();
  auto sets = driver::template_workload_sets(frontend::import_onnx(model, {}), isa);
  ASSERT_EQ(sets.size(), 2u);
  // One isolated record, for the first conv's workload: its fallback config.
  const ops::Workload w = ops::Workload::parse(sets[0][0]);
  tuner::Record rec;
  rec.workload_key = sets[0][0];
  rec.target_key =
      tuner::TargetKey::for_target(o.target, kiln_get_num_threads()).isolated(false).key();
  rec.config_json = ops::get_template(w.template_name).fallback(w, isa).to_json();
  rec.times_ms = {0.01, 0.01};
  rec.kiln_version = "test";
  tuner::RecordDB db = tuner::RecordDB::open(o.tuning_log);
  db.add_batch({rec});

  std::optional<autotune::InGraphStepResult> r = autotune::refine_in_graph(o, db, model);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->model_kernels, 2u);
  EXPECT_EQ(r->estimate.nodes, 1u);
  bool said = false;
  for (const std::string& line : lines)
    said |= line.find("the template kernels (1 of its 2) take ") != std::string::npos;
  EXPECT_TRUE(said) << "no line names 1 of the model's 2 kernels";
  std::vector<autotune::ModelInGraph> models = {{model, "", r, false}};
  EXPECT_EQ(autotune::in_graph_json(models)[0].at("model_kernels"), 2);
}

}  // namespace
}  // namespace kiln::test
