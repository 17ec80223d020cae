// Tasks: extraction of the distinct template workloads of models built in
// C++ (driver::template_workloads, then tuner::make_tasks: counts, FLOPs,
// weights, merging across models), and the task scheduler's allocation of
// trials on simulated tuning curves.
#include "tuner/tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "driver/build.h"
#include "graph/graph_builder.h"
#include "tuner/task_scheduler.h"

namespace kiln::tuner {
namespace {

using test::GraphBuilder;

// What kiln tune does with the models it is given.
std::vector<Task> extract_tasks(const std::vector<graph::Graph>& models) {
  std::vector<std::vector<std::string>> workloads;
  for (const graph::Graph& g : models) workloads.push_back(driver::template_workloads(g));
  return make_tasks(workloads);
}

// Conv 3x3 (pad 1) keeps [n, c, hw, hw], so the two convolutions of
// conv_conv_dense share one workload; then a Gemm to `classes`.
graph::Graph conv_conv_dense(uint64_t seed, int64_t c, int64_t hw, int64_t classes) {
  GraphBuilder b(seed);
  std::string x = b.input("x", {1, c, hw, hw});
  const std::map<std::string, graph::Attribute> pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  std::string y = b.node("Conv", {x, b.random_constant("w1", {c, c, 3, 3})}, pad1);
  y = b.node("Relu", {y});
  y = b.node("Conv", {y, b.random_constant("w2", {c, c, 3, 3}), b.random_constant("b2", {c})},
             pad1);
  y = b.node("Reshape", {y, b.ints("flat", {1, -1})});
  y = b.node("Gemm", {y, b.random_constant("fc", {c * hw * hw, classes})});
  b.output(y);
  return b.graph();
}

double conv_flops(int64_t c, int64_t hw) { return 2.0 * c * hw * hw * c * 3 * 3; }
double dense_flops(int64_t k, int64_t n) { return 2.0 * k * n; }

const Task* find_task(const std::vector<Task>& tasks, const std::string& template_name) {
  for (const Task& t : tasks)
    if (t.template_name == template_name) return &t;
  return nullptr;
}

TEST(Tasks, TwoIdenticalConvsAndADense) {
  for (auto [c, hw, classes] : {std::tuple<int64_t, int64_t, int64_t>{8, 10, 5}, {6, 7, 3}}) {
    SCOPED_TRACE("c " + std::to_string(c) + " hw " + std::to_string(hw));
    std::vector<Task> tasks = extract_tasks({conv_conv_dense(1, c, hw, classes)});
    ASSERT_EQ(tasks.size(), 2u);
    const Task* conv = find_task(tasks, "conv2d_NCHWc.x86");
    const Task* dense = find_task(tasks, "dense_pack.x86");
    ASSERT_TRUE(conv && dense);
    EXPECT_EQ(&tasks[0], conv) << "first-use order";
    EXPECT_EQ(conv->count, 2);
    EXPECT_EQ(dense->count, 1);
    EXPECT_EQ(conv->workload_key.rfind("conv2d_NCHWc.x86(", 0), 0u) << conv->workload_key;
    EXPECT_NE(conv->workload_key.find("data=[1," + std::to_string(c) + "," + std::to_string(hw)),
              std::string::npos)
        << conv->workload_key;
    EXPECT_DOUBLE_EQ(conv->flops, conv_flops(c, hw));
    EXPECT_DOUBLE_EQ(dense->flops, dense_flops(c * hw * hw, classes));
    const double total = 2 * conv_flops(c, hw) + dense_flops(c * hw * hw, classes);
    EXPECT_NEAR(conv->weight, 2 * conv_flops(c, hw) / total, 1e-12);
    EXPECT_NEAR(dense->weight, dense_flops(c * hw * hw, classes) / total, 1e-12);
    EXPECT_NEAR(conv->weight + dense->weight, 1.0, 1e-12);
  }
}

TEST(Tasks, IdenticalWorkloadsMergeAcrossModels) {
  graph::Graph a = conv_conv_dense(1, 8, 10, 5);
  graph::Graph b = conv_conv_dense(2, 8, 10, 7);  // same convs, another dense
  graph::Graph c = conv_conv_dense(3, 4, 10, 5);  // other convs, other dense
  std::vector<Task> tasks = extract_tasks({a, b, c});
  ASSERT_EQ(tasks.size(), 5u);
  std::map<std::string, int> count_by_key;
  double weights = 0;
  for (const Task& t : tasks) {
    EXPECT_EQ(count_by_key[t.workload_key]++, 0) << "key listed twice: " << t.workload_key;
    weights += t.weight;
  }
  EXPECT_NEAR(weights, 1.0, 1e-12);
  // First-use order: a's conv (x4: two per model of a and b), a's dense, b's dense, c's...
  EXPECT_EQ(tasks[0].template_name, "conv2d_NCHWc.x86");
  EXPECT_EQ(tasks[0].count, 4);
  EXPECT_EQ(tasks[1].template_name, "dense_pack.x86");
  EXPECT_EQ(tasks[1].count, 1);
  EXPECT_EQ(tasks[2].count, 1);
  EXPECT_NE(tasks[1].workload_key, tasks[2].workload_key);
  EXPECT_EQ(tasks[3].template_name, "conv2d_NCHWc.x86");
  EXPECT_EQ(tasks[3].count, 2);
  EXPECT_EQ(tasks[4].count, 1);
  // The same model twice doubles every count and leaves the weights alone.
  std::vector<Task> once = extract_tasks({a});
  std::vector<Task> twice = extract_tasks({a, a});
  ASSERT_EQ(once.size(), twice.size());
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_EQ(twice[i].workload_key, once[i].workload_key);
    EXPECT_EQ(twice[i].count, 2 * once[i].count);
    EXPECT_NEAR(twice[i].weight, once[i].weight, 1e-12);
  }
  // The input graphs are not changed.
  EXPECT_EQ(test::count_op(a, "Conv"), 2);
}

TEST(Tasks, ModelRankIsATasksBestPlaceInOneModel) {
  // a and b share their convs (count 4, each model's heaviest); b's dense is
  // bigger than a's. c's convs are small, its dense its heaviest task.
  graph::Graph a = conv_conv_dense(1, 8, 10, 5);
  graph::Graph b = conv_conv_dense(2, 8, 10, 40);
  graph::Graph c = conv_conv_dense(3, 2, 10, 40);
  ASSERT_GT(2 * conv_flops(8, 10), dense_flops(800, 40));
  ASSERT_LT(2 * conv_flops(2, 10), dense_flops(200, 40));
  std::vector<Task> tasks = extract_tasks({a, b, c});
  ASSERT_EQ(tasks.size(), 5u);
  std::vector<int> ranks;
  for (const Task& t : tasks) ranks.push_back(t.model_rank);
  // a's conv, a's dense, b's dense, c's conv, c's dense.
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 1, 1, 0}));
  // The warm-up: each model's heaviest first (a's and b's conv, c's dense),
  // then the next of each, in task order.
  SchedulerOptions o;
  o.eps_greedy = 0;
  TaskScheduler s(tasks, o);
  std::vector<size_t> order;
  for (int k = 0; k < 5; ++k) {
    std::optional<size_t> i = s.next_task();
    ASSERT_TRUE(i);
    order.push_back(*i);
    s.record(*i, {10.0});
  }
  EXPECT_EQ(order, (std::vector<size_t>{0, 4, 1, 2, 3}));
}

TEST(Tasks, NodeSetsFlattenAndAlternativesAreListedOnce) {
  std::vector<ModelNodes> models = {{{"d1", "w1"}, {"a"}, {"d1", "w1"}},
                                    {{"b"}, {"d1", "w1"}, {"d2", "w2"}}};
  EXPECT_EQ(node_workloads(models),
            (std::vector<std::vector<std::string>>{{"d1", "w1", "a", "d1", "w1"},
                                                   {"b", "d1", "w1", "d2", "w2"}}));
  EXPECT_EQ(alternative_sets(models),
            (std::vector<std::vector<std::string>>{{"d1", "w1"}, {"d2", "w2"}}));
  EXPECT_TRUE(alternative_sets({{{"a"}, {"b"}}}).empty());
}

// The weights a run reads, as cold-weight measurement's default counts them:
// a dense layer's are its initializer's bytes; a 3x3 conv counts its largest
// implementation, the Winograd one's transformed weights (16 or 36 per 9 ONNX
// ones), so the kernels read more than the ONNX file holds.
TEST(Tasks, KernelWeightBytesCountWinogradsTransformedWeights) {
  GraphBuilder d(2);
  std::string x = d.input("x", {1, 256});
  d.output(d.node("Gemm", {x, d.random_constant("fc", {256, 64})}));
  graph::Graph dense = d.graph();
  EXPECT_EQ(kernel_weight_bytes(driver::template_workload_sets(dense), Isa{}),
            graph::initializer_bytes(dense));

  const int64_t c = 64, hw = 14;
  graph::Graph g = conv_conv_dense(3, c, hw, 10);
  ModelNodes nodes = driver::template_workload_sets(g);
  ASSERT_EQ(nodes.size(), 3u);
  ASSERT_EQ(nodes[0].size(), 2u);  // direct and Winograd
  const int64_t conv_onnx = 9 * c * c * 4;
  const int64_t fc = c * hw * hw * 10 * 4;
  int64_t bytes = kernel_weight_bytes(nodes, Isa{});
  EXPECT_GE(bytes, 2 * conv_onnx * 16 / 9 + fc);
  EXPECT_LE(bytes, 2 * conv_onnx * 36 / 9 + c * 4 + fc + 4096);  // plus the bias, padding
  EXPECT_GT(bytes, graph::initializer_bytes(g));
  EXPECT_EQ(kernel_weight_bytes({}, Isa{}), 0);
}

TEST(Tasks, AModelWithoutTemplatesHasNoTasks) {
  GraphBuilder b(1);
  b.output(b.node("Relu", {b.input("x", {2, 3})}));
  EXPECT_TRUE(extract_tasks({b.graph()}).empty());
  EXPECT_TRUE(extract_tasks({}).empty());
}

// ---- the task scheduler -----------------------------------------------------------

Task task(const std::string& name, int count, double flops, const std::string& tmpl = "") {
  return {name, tmpl.empty() ? name : tmpl, count, flops, 0.0};
}

// A simulated tuning curve per task: the GFLOP/s of its n-th trial.
using Curve = std::function<double(int64_t trial)>;

// Runs the scheduler to its end; returns the trials each task got.
std::vector<int64_t> simulate(TaskScheduler& s, const std::vector<Curve>& curves) {
  for (int guard = 0; guard < 100000; ++guard) {
    std::optional<size_t> i = s.next_task();
    if (!i) break;
    std::vector<double> results;
    for (int k = 0; k < s.round_size(*i); ++k) results.push_back(curves[*i](s.trials(*i) + k));
    s.record(*i, results);
  }
  std::vector<int64_t> trials;
  for (size_t i = 0; i < s.tasks().size(); ++i) trials.push_back(s.trials(i));
  return trials;
}

// Speed rising from `from` toward `to` with the trials spent.
Curve rising(double from, double to, double scale) {
  return [=](int64_t t) { return to - (to - from) * std::exp(-double(t) / scale); };
}
Curve flat(double g) {
  return [=](int64_t) { return g; };
}

SchedulerOptions budget(int64_t total, int round = 16) {
  SchedulerOptions o;
  o.round_trials = round;
  o.total_trials = total;
  o.eps_greedy = 0;
  return o;
}

TEST(TaskScheduler, WarmUpGivesEveryTaskARoundInTaskOrderWhenSharesTie) {
  TaskScheduler s({task("a", 1, 1e9), task("b", 1, 1e9), task("c", 1, 1e9)}, budget(1000));
  for (size_t want = 0; want < 3; ++want) {
    std::optional<size_t> i = s.next_task();
    ASSERT_TRUE(i);
    EXPECT_EQ(*i, want);
    s.record(*i, std::vector<double>(s.round_size(*i), 10.0));
  }
}

TEST(TaskScheduler, WarmUpTakesEachModelsHeaviestTasksInTurn) {
  // Two models of three tasks each, in first-use order; model 2 is ten times
  // model 1's FLOPs, so by weight alone all its tasks would come first.
  std::vector<Task> tasks = {task("1a", 1, 1e8), task("1b", 1, 6e8), task("1c", 1, 3e8),
                             task("2a", 1, 2e9), task("2b", 1, 1e9), task("2c", 1, 7e9)};
  const std::vector<int> ranks = {2, 0, 1, 1, 2, 0};  // by flops within each model
  for (size_t i = 0; i < tasks.size(); ++i) tasks[i].model_rank = ranks[i];
  TaskScheduler s(tasks, budget(1000));
  std::vector<std::string> order;
  for (int k = 0; k < 6; ++k) {
    std::optional<size_t> i = s.next_task();
    ASSERT_TRUE(i);
    order.push_back(tasks[*i].workload_key);
    s.record(*i, std::vector<double>(s.round_size(*i), 10.0));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"1b", "2c", "1c", "2a", "1a", "2b"}));
  // A time budget spent after two rounds has tuned each model's heaviest task.
  double now = 0;
  SchedulerOptions o = budget(0);
  o.time_budget_s = 2;
  o.clock = [&] { return now; };
  TaskScheduler timed(tasks, o);
  std::vector<std::string> tuned;
  while (std::optional<size_t> i = timed.next_task()) {
    tuned.push_back(tasks[*i].workload_key);
    timed.record(*i, std::vector<double>(timed.round_size(*i), 10.0));
    now += 1;
  }
  EXPECT_EQ(tuned, (std::vector<std::string>{"1b", "2c"}));
  EXPECT_EQ(timed.stop_reason(), "time budget spent");
}

TEST(TaskScheduler, MoreTrialsForTheTaskWithMoreWeight) {
  // Same FLOPs and the same tuning curve; a runs 4 times per inference.
  TaskScheduler s({task("a", 4, 1e9), task("b", 1, 1e9)}, budget(1600));
  std::vector<int64_t> trials = simulate(s, {rising(5, 100, 300), rising(5, 100, 300)});
  EXPECT_EQ(trials[0] + trials[1], 1600);
  EXPECT_GT(trials[0], 2 * trials[1]) << trials[0] << " vs " << trials[1];
  EXPECT_EQ(s.stop_reason(), "trial budget spent");
  // Estimated latency: 4 + 1 calls of 1 GFLOP at the best speeds reached.
  EXPECT_NEAR(s.estimated_latency_s(), 4 / s.best_gflops(0) + 1 / s.best_gflops(1), 1e-12);
}

TEST(TaskScheduler, MoreTrialsForTheTaskThatStillGains) {
  // Equal weight; a is tuned out (and fast) from its first trial, b keeps
  // improving toward the same speed, so b's latency is never below a's.
  auto run = [](double alpha) {
    SchedulerOptions o = budget(1600);
    o.alpha = alpha;
    TaskScheduler s({task("a", 1, 1e9), task("b", 1, 1e9)}, o);
    return simulate(s, {flat(100), rising(5, 100, 400)});
  };
  std::vector<int64_t> trials = run(0.2);
  EXPECT_GT(trials[1], trials[0]);
  // The backward term (observed gain) is what moves trials to b: more with
  // more weight on it.
  EXPECT_GT(run(0.8)[1], trials[1]);
  EXPECT_GT(trials[1], run(0.0)[1]);

  // At the same latency, rounds and weight, recent gain decides.
  TaskScheduler s({task("stuck", 1, 1e9), task("gaining", 1, 1e9)}, budget(0));
  for (int r = 0; r < 6; ++r) {
    s.record(0, std::vector<double>(16, 50.0));
    s.record(1, std::vector<double>(16, 10.0 + 8 * r));  // 10, 18, ..., 50
  }
  EXPECT_DOUBLE_EQ(s.best_gflops(0), s.best_gflops(1));
  EXPECT_LT(s.gradient(1), s.gradient(0));
  EXPECT_EQ(s.next_task(), std::optional<size_t>(1));
}

TEST(TaskScheduler, AlternativesCountOnceAndTheLosingImplementationGetsFewRounds) {
  // One node with two implementations (w1 = direct, w2 = Winograd, twice as
  // fast) and another node (d). All three improve alike.
  auto run = [](bool grouped) {
    SchedulerOptions o = budget(2400);
    if (grouped) o.implementation_sets = {{"w1", "w2"}, {"unknown", "d"}};
    TaskScheduler s({task("w1", 1, 1e9, "t"), task("w2", 1, 1e9, "u"), task("d", 1, 1e9, "v")}, o);
    std::vector<int64_t> trials =
        simulate(s, {rising(5, 50, 300), rising(10, 100, 300), rising(10, 100, 300)});
    return std::make_pair(trials, s.estimated_latency_s());
  };
  auto [apart, latency_apart] = run(false);
  auto [grouped, latency_grouped] = run(true);
  // Apart, the slow implementation looks like the most to gain; grouped, it
  // can never overtake after its first rounds and gets far fewer trials.
  EXPECT_LT(grouped[0] * 2, apart[0]) << grouped[0] << " vs " << apart[0];
  EXPECT_GT(grouped[1], apart[1]);
  EXPECT_GT(grouped[2], apart[2]);
  // The node counts once, at its faster implementation.
  TaskScheduler s({task("w1", 1, 1e9, "t"), task("w2", 1, 1e9, "u")}, [] {
    SchedulerOptions o = budget(0);
    o.implementation_sets = {{"w1", "w2"}};
    return o;
  }());
  s.record(0, {20.0});
  s.record(1, {40.0});
  EXPECT_NEAR(s.estimated_latency_s(), 1 / 40.0, 1e-12);
  // w1 at 20 cannot beat 40 even halving its time: no gain; w2's gain is real.
  s.record(0, {20.0});
  s.record(1, {40.0});
  EXPECT_EQ(s.gradient(0), 0.0);
  EXPECT_LT(s.gradient(1), 0.0);
  (void)latency_apart;
  (void)latency_grouped;
}

TEST(TaskScheduler, ATaskLaggingBehindItsTemplateSiblingLooksMorePromising) {
  // The same history twice; only in `same` are both tasks of one template,
  // whose best speed (100) promises the slow one up to 1/beta of it.
  auto run = [](const std::string& tmpl_a, const std::string& tmpl_b) {
    TaskScheduler s({task("slow", 1, 1e9, tmpl_a), task("fast", 1, 1e9, tmpl_b)}, budget(0));
    for (int r = 0; r < 10; ++r) {
      s.record(0, std::vector<double>(16, 10.0));
      s.record(1, std::vector<double>(16, 100.0));
    }
    return s.gradient(0);
  };
  double same = run("conv", "conv"), apart = run("conv", "dense");
  EXPECT_LT(same, apart);
  // Forward term with 10 rounds: c / 10 apart; c - beta * flops / best = c - c / 5 together.
  const double c = 1e9 / 10e9;
  EXPECT_NEAR(apart, (1 - 0.2) * -(c / 10), 1e-12);
  EXPECT_NEAR(same, (1 - 0.2) * -(c - 2 * 1e9 / 100e9), 1e-12);
}

TEST(TaskScheduler, PerTaskCapAndEarlyStopping) {
  SchedulerOptions o = budget(0, 16);
  o.max_trials_per_task = 50;
  o.early_stopping = 20;
  TaskScheduler s({task("capped", 1, 1e9), task("stalls", 1, 1e9)}, o);
  std::vector<int> sizes;
  for (int guard = 0; guard < 100; ++guard) {
    std::optional<size_t> i = s.next_task();
    if (!i) break;
    if (*i == 0) sizes.push_back(s.round_size(0));
    std::vector<double> r;
    for (int k = 0; k < s.round_size(*i); ++k)
      r.push_back(*i == 0 ? 1.0 + s.trials(0) + k : 7.0);  // improves every trial / never
    s.record(*i, r);
  }
  EXPECT_EQ(s.trials(0), 50);
  EXPECT_EQ(s.state(0), TaskState::Capped);
  EXPECT_EQ(sizes, (std::vector<int>{16, 16, 16, 2}));
  // One trial sets the best, then 20 without gain: 21 trials, in rounds of 16.
  EXPECT_EQ(s.state(1), TaskState::EarlyStopped);
  EXPECT_EQ(s.trials(1), 32);
  EXPECT_EQ(s.stop_reason(), "every task finished");
  EXPECT_EQ(s.run_trials(), 82);
}

TEST(TaskScheduler, ExhaustedTasksAreSkipped) {
  TaskScheduler s({task("a", 10, 1e9), task("b", 1, 1e9)}, budget(0));
  s.mark_exhausted(0);
  for (int round = 0; round < 5; ++round) {
    std::optional<size_t> i = s.next_task();
    ASSERT_TRUE(i);
    EXPECT_EQ(*i, 1u);
    s.record(1, {1.0 + round});
  }
  s.mark_exhausted(1);
  EXPECT_FALSE(s.next_task());
  EXPECT_EQ(std::string(task_state_name(s.state(0))), "exhausted");
}

TEST(TaskScheduler, TimeBudgetEndsTheRun) {
  double now = 100;
  SchedulerOptions o = budget(0);
  o.time_budget_s = 30;
  o.clock = [&] { return now; };
  TaskScheduler s({task("a", 1, 1e9), task("b", 1, 1e9)}, o);
  EXPECT_DOUBLE_EQ(s.remaining_s(), 30);
  int rounds = 0;
  while (std::optional<size_t> i = s.next_task()) {
    s.record(*i, std::vector<double>(s.round_size(*i), 1.0 + rounds));
    now += 7;  // each round takes 7 s
    ++rounds;
  }
  EXPECT_EQ(rounds, 5);  // starts at 0, 7, 14, 21, 28 s
  EXPECT_EQ(s.stop_reason(), "time budget spent");
  EXPECT_DOUBLE_EQ(s.elapsed_s(), 35);
  EXPECT_EQ(s.remaining_s(), 0);
  EXPECT_TRUE(std::isinf(TaskScheduler({task("a", 1, 1e9)}, budget(0)).remaining_s()));
}

TEST(TaskScheduler, TotalTrialBudgetClipsTheLastRound) {
  TaskScheduler s({task("a", 1, 1e9)}, budget(40, 16));
  std::vector<int64_t> trials = simulate(s, {rising(1, 10, 50)});
  EXPECT_EQ(trials[0], 40);
  EXPECT_EQ(s.rounds(0), 3);
}

TEST(TaskScheduler, ResumedTrialsCountTowardTheCapAndSetTheBar) {
  SchedulerOptions o = budget(0, 16);
  o.max_trials_per_task = 100;
  o.early_stopping = 10;
  TaskScheduler s({task("done", 1, 1e9), task("half", 1, 1e9), task("new", 1, 1e9)}, o);
  s.resume(0, 100, 40.0);
  s.resume(1, 60, 40.0);
  EXPECT_EQ(s.state(0), TaskState::Capped);
  EXPECT_EQ(s.rounds(1), 4);
  EXPECT_EQ(s.best_gflops(1), 40.0);
  // Results below the resumed best are no improvement: "half" stops after 10.
  std::vector<int64_t> trials = simulate(s, {flat(99), flat(30), rising(1, 10, 50)});
  EXPECT_EQ(trials[0], 100);
  EXPECT_EQ(s.state(1), TaskState::EarlyStopped);
  EXPECT_EQ(trials[1], 60 + 16);
  EXPECT_EQ(s.best_gflops(1), 40.0);
  EXPECT_EQ(trials[2], 100);
  EXPECT_EQ(s.run_trials(), 16 + 100);
}

TEST(TaskScheduler, GradientIsNeverPositive) {
  TaskScheduler s({task("a", 3, 2e9, "t"), task("b", 1, 1e9, "t"), task("c", 2, 5e8)}, budget(800));
  std::vector<Curve> curves{rising(5, 60, 100), flat(20), rising(1, 200, 300)};
  for (int guard = 0; guard < 200; ++guard) {
    std::optional<size_t> i = s.next_task();
    if (!i) break;
    for (size_t j = 0; j < 3; ++j) EXPECT_LE(s.gradient(j), 0.0);
    std::vector<double> r;
    for (int k = 0; k < s.round_size(*i); ++k) r.push_back(curves[*i](s.trials(*i) + k));
    s.record(*i, r);
  }
  for (size_t j = 0; j < 3; ++j) EXPECT_GT(s.trials(j), 0);
}

}  // namespace
}  // namespace kiln::tuner
