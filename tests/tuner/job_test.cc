// Tuning jobs (tuner/job.h, tuner/report.h): the TOML job file and its
// errors, the job's tasks deduplicated across models with their trial caps
// and priorities, and the report computed from a records database filled by
// hand (so that every number has a value to compare with).
#include "tuner/job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "codegen/target.h"
#include "driver/build.h"
#include "graph/graph_builder.h"
#include "ops/op_template.h"
#include "tuner/report.h"
#include "tuner/target_key.h"
#include "tuner/task_scheduler.h"

namespace kiln::tuner {
namespace {

namespace fs = std::filesystem;
using test::GraphBuilder;

// The message parse_job throws for `text`, or "" when it parses.
std::string job_error(const std::string& text) {
  try {
    parse_job(text, "/jobs/nightly.toml");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(JobFile, ParsesEveryKey) {
  Job job = parse_job(R"(# nightly
tuning_log = "logs/tuning.db"
target = "llvm -mcpu=znver4"
tuner = "random"
trials = 20
time_budget = 1.5
batch = 4
early_stopping = 8
report = ["out/report.html", "/abs/report.json"]

[[model]]
path = "models/resnet18.onnx"
input_shapes = "input:[1,3,224,224]"

[[model]]
name = "bert"
path = "/m/bert.onnx"
trials = 50
priority = 3
)",
                      "/jobs/nightly.toml");
  EXPECT_EQ(job.tuning_log, "/jobs/logs/tuning.db");  // relative to the job file
  EXPECT_EQ(job.target, "llvm -mcpu=znver4");
  EXPECT_EQ(job.tuner, "random");
  EXPECT_EQ(job.trials, 20);
  EXPECT_DOUBLE_EQ(job.time_budget_s, 1.5);
  EXPECT_EQ(job.batch, 4);
  EXPECT_EQ(job.early_stopping, 8);
  EXPECT_EQ(job.reports, (std::vector<std::string>{"/jobs/out/report.html", "/abs/report.json"}));
  ASSERT_EQ(job.models.size(), 2u);
  EXPECT_EQ(job.models[0].name, "resnet18");  // the file's stem
  EXPECT_EQ(job.models[0].path, "/jobs/models/resnet18.onnx");
  EXPECT_EQ(job.models[0].input_shapes, "input:[1,3,224,224]");
  EXPECT_EQ(job.models[0].trials, 20);  // the job's
  EXPECT_EQ(job.models[0].priority, 1);
  EXPECT_EQ(job.models[1].name, "bert");
  EXPECT_EQ(job.models[1].trials, 50);
  EXPECT_EQ(job.models[1].priority, 3);
}

// A shared PostgreSQL store is a URL, not a path relative to the job file.
TEST(JobFile, APostgresTuningLogIsKeptAsGiven) {
  for (const char* url : {"postgresql://kiln@db.example:5432/records", "postgres://db/records"}) {
    Job job = parse_job(std::string("tuning_log = \"") + url + "\"\n[[model]]\npath = \"m.onnx\"\n",
                        "/jobs/nightly.toml");
    EXPECT_EQ(job.tuning_log, url);
    EXPECT_EQ(job.models.at(0).path, "/jobs/m.onnx");
  }
}

TEST(JobFile, MalformedFilesNameTheFileAndLine) {
  const std::string model = "\n[[model]]\npath = \"a.onnx\"\n";
  struct Case {
    std::string text, where, what;
  };
  for (const Case& c : std::vector<Case>{
           {"tuning_log = \"x.db\"\ntrials = = 3\n" + model, "nightly.toml:2:", ""},
           {"trials = 3\ntrails = 4\n" + model, "nightly.toml:2:1: ", "unknown key 'trails'"},
           {"trials = \"many\"\n" + model, "nightly.toml:1:", "'trials' must be an integer"},
           {"trials = 0\n" + model, "nightly.toml:1:", "at least 1"},
           {"tuner = \"best\"\n" + model, "nightly.toml:1:", "xgb, random, grid or ga"},
           {"trials = 3\n\n[[model]]\nname = \"a\"\n", "nightly.toml:3:", "needs a 'path'"},
           {"[[model]]\npath = \"a.onnx\"\n[[model]]\npath = \"b/a.onnx\"\n",
            "nightly.toml:3:", "two models are named 'a'"},
           {"[[model]]\npath = \"a.onnx\"\npriorty = 2\n",
            "nightly.toml:3:1: ", "unknown key 'priorty' in [[model]]"},
           {"trials = 3\n", "nightly.toml: ", "no [[model]]"},
       }) {
    SCOPED_TRACE(c.text);
    std::string e = job_error(c.text);
    EXPECT_EQ(e.rfind("/jobs/" + c.where, 0), 0u) << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << e;
  }
  try {
    parse_job_file("/nonexistent/job.toml");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/job.toml"), std::string::npos);
  }
}

// Issue 65 #14: values the docs do not allow are refused where they are
// written, and a folder is named as one.
TEST(JobFile, OutOfRangeValuesAndFoldersAreRefused) {
  const std::string model = "\n[[model]]\npath = \"a.onnx\"\n";
  struct Case {
    std::string text, where, what;
  };
  for (const Case& c : std::vector<Case>{
           {"[[model]]\npath = \"a.onnx\"\npriority = 1001\n",
            "nightly.toml:3:", "'priority' must be at most 1000, not 1001"},
           {"[[model]]\npath = \"a.onnx\"\npriority = 0\n", "nightly.toml:3:", "at least 1"},
           {"time_budget = nan\n" + model,
            "nightly.toml:1:", "'time_budget' must be a finite number"},
           {"time_budget = inf\n" + model,
            "nightly.toml:1:", "'time_budget' must be a finite number"},
           {"time_budget = -1\n" + model, "nightly.toml:1:", "must not be negative"},
       }) {
    SCOPED_TRACE(c.text);
    std::string e = job_error(c.text);
    EXPECT_EQ(e.rfind("/jobs/" + c.where, 0), 0u) << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << e;
  }
  EXPECT_EQ(
      parse_job("[[model]]\npath = \"a.onnx\"\npriority = 1000\n", "/j.toml").models[0].priority,
      1000);
  // `--job .`: a folder, not a job without models.
  std::string dir = ::testing::TempDir();
  try {
    parse_job_file(dir);
    ADD_FAILURE() << "no error for a folder";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'" + dir + "': it is a directory"), std::string::npos) << what;
    EXPECT_EQ(what.find("no [[model]]"), std::string::npos) << what;
  }
}

// Issue 65 #14: input_shapes are checked as the job is read (the CLI passes
// the frontend's parser), so that a typo is FILE:LINE:COL, not a model that
// fails to import after the database was created.
TEST(JobFile, InputShapesAreCheckedWhereWritten) {
  const std::string text =
      "[[model]]\npath = \"a.onnx\"\n\n[[model]]\npath = \"b.onnx\"\n"
      "input_shapes = \"x[1,3\"\n";
  auto check = [](const std::string& shapes) {
    if (!shapes.empty() && shapes.find(":[") == std::string::npos)
      throw std::runtime_error("--input-shapes \"" + shapes + "\": missing ':' before '['");
  };
  try {
    parse_job(text, "/jobs/nightly.toml", check);
    ADD_FAILURE() << "no error for bad input_shapes";
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    EXPECT_EQ(what.rfind("/jobs/nightly.toml:6:", 0), 0u) << what;
    EXPECT_NE(what.find("bad 'input_shapes' \"x[1,3\": missing ':' before '['"), std::string::npos)
        << what;
  }
  // Good text passes the check; no check: kept as written.
  EXPECT_EQ(parse_job("[[model]]\npath = \"a.onnx\"\ninput_shapes = \"x:[1]\"\n", "/j.toml", check)
                .models[0]
                .input_shapes,
            "x:[1]");
  EXPECT_EQ(parse_job(text, "/j.toml").models[1].input_shapes, "x[1,3");
}

// Conv 3x3 (pad 1, c -> c) twice at [1, c, hw, hw], then a Gemm to `classes`:
// models with the same c and hw share the convolution's workload.
std::vector<std::string> conv_conv_dense(int64_t c, int64_t hw, int64_t classes) {
  GraphBuilder b(1);
  std::string x = b.input("x", {1, c, hw, hw});
  const std::map<std::string, graph::Attribute> pad1{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  std::string y = b.node("Conv", {x, b.random_constant("w1", {c, c, 3, 3})}, pad1);
  y = b.node("Relu", {y});
  y = b.node("Conv", {y, b.random_constant("w2", {c, c, 3, 3})}, pad1);
  y = b.node("Relu", {y});
  y = b.node("Reshape", {y, b.ints("flat", {1, -1})});
  y = b.node("Gemm", {y, b.random_constant("fc", {c * hw * hw, classes})});
  b.output(y);
  return driver::template_workloads(b.graph(), codegen::Target::host().isa());
}

struct TwoModels {
  Job job;
  std::vector<JobModelWorkloads> models;
  JobTasks tasks;
  TwoModels() {
    job = parse_job(
        "trials = 5\n[[model]]\nname = \"a\"\npath = \"a.onnx\"\n"
        "[[model]]\nname = \"b\"\npath = \"b.onnx\"\ntrials = 9\npriority = 3\n"
        "[[model]]\nname = \"broken\"\npath = \"c.onnx\"\n",
        "/jobs/j.toml");
    models = {{&job.models[0], conv_conv_dense(8, 10, 5), ""},
              {&job.models[1], conv_conv_dense(8, 10, 3), ""},
              {&job.models[2], {}, "c.onnx: not an ONNX model"}};
    tasks = make_job_tasks(job, models);
  }
};

TEST(JobTasks, OneTaskPerWorkloadAcrossModels) {
  TwoModels m;
  const JobTasks& jt = m.tasks;
  // The convolution is one task for both models; the dense layers differ.
  ASSERT_EQ(jt.tasks.size(), 3u);
  ASSERT_EQ(jt.sched_tasks.size(), 3u);
  EXPECT_EQ(jt.tasks[0].template_name, "conv2d_NCHWc.x86");
  EXPECT_EQ(jt.tasks[0].count, 4);  // two kernels in each model
  EXPECT_EQ(jt.models_of[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(jt.models_of[1], (std::vector<size_t>{0}));
  EXPECT_EQ(jt.models_of[2], (std::vector<size_t>{1}));
  EXPECT_EQ(jt.tasks[1].count, 1);
  EXPECT_EQ(jt.tasks[2].count, 1);
  // Trial caps: the largest of the models using the task.
  EXPECT_EQ(jt.trials, (std::vector<int64_t>{9, 5, 9}));
  // Priority 3 for b: its kernels count three times for the scheduler only.
  EXPECT_EQ(jt.sched_tasks[0].count, 2 + 3 * 2);
  EXPECT_EQ(jt.sched_tasks[1].count, 1);
  EXPECT_EQ(jt.sched_tasks[2].count, 3);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(jt.sched_tasks[i].workload_key, jt.tasks[i].workload_key);
  double w = 0, ws = 0;
  for (size_t i = 0; i < 3; ++i) w += jt.tasks[i].weight, ws += jt.sched_tasks[i].weight;
  EXPECT_NEAR(w, 1, 1e-9);
  EXPECT_NEAR(ws, 1, 1e-9);
  EXPECT_GT(jt.sched_tasks[2].weight, jt.tasks[2].weight);  // b's dense gained weight
}

// The job's per-task trial totals reach the scheduler: each task stops at its own cap.
TEST(JobTasks, TheSchedulerHonoursPerTaskCaps) {
  TwoModels m;
  SchedulerOptions o;
  o.round_trials = 2;
  o.max_trials_per_task = 100;  // replaced by the per-task caps
  o.max_trials_of_task = m.tasks.trials;
  TaskScheduler sched(m.tasks.sched_tasks, o);
  sched.resume(0, 4, 10.0);  // an earlier run measured 4 of the conv's 9
  std::vector<int64_t> given(3, 0);
  double g = 1;
  while (std::optional<size_t> t = sched.next_task()) {
    int n = sched.round_size(*t);
    ASSERT_GT(n, 0);
    given[*t] += n;
    sched.record(*t, std::vector<double>(static_cast<size_t>(n), g += 1));
  }
  EXPECT_EQ(sched.stop_reason(), "every task finished");
  EXPECT_EQ(given, (std::vector<int64_t>{9 - 4, 5, 9}));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sched.trials(i), m.tasks.trials[i]);
  o.max_trials_of_task = {1, 2};  // not one per task
  EXPECT_THROW(TaskScheduler(m.tasks.sched_tasks, o), std::invalid_argument);
}

TEST(JobReport, NumbersFromTheRecords) {
  TwoModels m;
  fs::path dir = fs::temp_directory_path() / ("kiln-job-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  codegen::Target target = codegen::Target::host();
  const std::string tkey = TargetKey::for_target(target, 1).key();
  {
    RecordDB db = RecordDB::open((dir / "t.db").string());
    const std::string conv = m.tasks.tasks[0].workload_key;
    const std::string dense_a = m.tasks.tasks[1].workload_key;
    ops::Workload w = ops::Workload::parse(conv);
    std::string fallback = ops::get_template(w.template_name).fallback(w, target.isa()).to_json();
    auto rec = [&](const std::string& key, const std::string& cfg, double ms, ErrorClass e,
                   int64_t ts) {
      Record r;
      r.workload_key = key;
      r.target_key = tkey;
      r.config_json = cfg;
      if (e == ErrorClass::kOk) r.times_ms = {ms};
      r.error = e;
      r.timestamp_unix = ts;
      r.kiln_version = "test";
      r.gflops = e == ErrorClass::kOk ? ops::get_template(ops::Workload::parse(key).template_name)
                                                .flops(ops::Workload::parse(key)) /
                                            (ms * 1e6)
                                      : 0;
      db.add(r);
    };
    // conv: fallback 2 ms (earlier run), a timeout and 1 ms in this run (from t=1000).
    rec(conv, fallback, 2.0, ErrorClass::kOk, 900);
    rec(conv, R"({"x":1})", 0, ErrorClass::kTimeout, 1000);
    rec(conv, R"({"x":2})", 1.0, ErrorClass::kOk, 1010);
    rec(conv, R"({"x":3})", 1.5, ErrorClass::kOk, 1020);
    // A night later: worse, and the pause is not tuning time.
    rec(conv, R"({"x":4})", 1.2, ErrorClass::kOk, 1020 + 86400);
    // a's dense: only a wrong result; b's dense: nothing.
    rec(dense_a, R"({"x":1})", 0, ErrorClass::kWrongResult, 1005);

    TuneSummary sum;
    sum.target_key = tkey;
    sum.stop_reason = "every task finished";
    sum.run_trials = 4;
    for (const Task& t : m.tasks.tasks) sum.tasks.push_back({t, 0, 0, TaskState::Capped});
    double conv_gflops_prev = 1e-3;  // the previous report: conv was slower, model a 9 ms
    nlohmann::json prev = {{"tasks", {{{"workload", conv}, {"best_gflops", conv_gflops_prev}}}},
                           {"models", {{{"name", "a"}, {"estimated_ms", 9.0}}}}};
    JobReport r =
        make_job_report(m.job, m.models, m.tasks, sum, db, target, prev, "old.json", 1000);

    ASSERT_EQ(r.tasks.size(), 3u);
    const JobReportTask& tc = r.tasks[0];
    EXPECT_EQ(tc.trials, 5);
    EXPECT_DOUBLE_EQ(tc.fallback_ms, 2.0);
    EXPECT_DOUBLE_EQ(tc.best_ms, 1.0);
    EXPECT_EQ(tc.models, (std::vector<std::string>{"a", "b"}));
    // Curve: improvements at trials 1 and 3, then the last trial.
    ASSERT_EQ(tc.curve.size(), 3u);
    EXPECT_EQ(tc.curve[0].trial, 1);
    EXPECT_EQ(tc.curve[1].trial, 3);
    EXPECT_DOUBLE_EQ(tc.curve[1].seconds, 110);
    EXPECT_EQ(tc.curve[2].trial, 5);
    EXPECT_DOUBLE_EQ(tc.curve[2].seconds, 120);
    EXPECT_DOUBLE_EQ(tc.curve[2].best_gflops, tc.curve[1].best_gflops);
    EXPECT_NEAR(tc.curve[1].best_gflops, 2 * tc.curve[0].best_gflops, 1e-9);
    EXPECT_TRUE(r.tasks[1].curve.empty());
    EXPECT_EQ(r.tasks[1].trials, 1);

    // Models: conv twice in each at 1 ms (2 ms fallback); the dense layers are untuned.
    ASSERT_EQ(r.models.size(), 3u);
    EXPECT_DOUBLE_EQ(r.models[0].now_ms, 2.0);
    EXPECT_DOUBLE_EQ(r.models[0].fallback_ms, 4.0);
    EXPECT_EQ(r.models[0].untuned, 1);
    EXPECT_EQ(r.models[0].no_fallback, 1);
    EXPECT_DOUBLE_EQ(r.models[0].previous_ms, 9.0);
    EXPECT_DOUBLE_EQ(r.models[1].previous_ms, -1);
    EXPECT_EQ(r.models[2].error, "c.onnx: not an ONNX model");

    // Failures: this run's records are those from started_unix on.
    EXPECT_EQ(r.failures_all, (std::map<std::string, int64_t>{
                                  {"timeout", 1}, {"wrong_result", 1}, {"import_error", 1}}));
    EXPECT_EQ(r.failures_run, r.failures_all);

    nlohmann::json j = nlohmann::json::parse(job_report_json(r));
    EXPECT_EQ(j["tasks"].size(), 3u);
    EXPECT_EQ(j["tasks"][0]["curve"].size(), 3u);
    EXPECT_DOUBLE_EQ(j["models"][0]["estimated_ms"].get<double>(), 2.0);
    EXPECT_EQ(j["models"][2]["error"], "c.onnx: not an ONNX model");

    std::string html = job_report_html(r);
    auto count = [&](const std::string& s) {
      size_t n = 0;
      for (size_t p = html.find(s); p != std::string::npos; p = html.find(s, p + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("<polyline class=\"curve\""), 2u);  // conv: by trial and by time
    EXPECT_EQ(count("<svg class=\"chart\""), 6u);       // two charts per task
    EXPECT_EQ(count(">no correct measurement</text>"), 4u);
    EXPECT_NE(html.find("id=\"improved\""), std::string::npos);  // conv beat the previous report
    EXPECT_NE(html.find("failed to import: c.onnx: not an ONNX model"), std::string::npos);
    EXPECT_NE(html.find("<td>2.000 ms</td>"), std::string::npos);  // a and b now
    EXPECT_NE(html.find("<td>9.000 ms</td>"), std::string::npos);  // a's previous report
    EXPECT_EQ(html.find("<script"), std::string::npos);
    EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no external URL

    // The in-graph column: a model whose step the time budget cut says so.
    InGraphEstimate g;
    g.nodes = 3, g.tuned_nodes = 2, g.tuned_ms = 1.5, g.untuned_ms = 2.0;
    r.models[0].in_graph = r.models[1].in_graph = g;
    r.models[0].in_graph_rounds = 2, r.models[0].in_graph_rounds_planned = 5;
    r.models[1].in_graph_rounds = r.models[1].in_graph_rounds_planned = 4;
    html = job_report_html(r);
    EXPECT_EQ(count("1.500 ms / 2.000 ms (0.75x), 2 of 3 tuned"), 2u) << html;
    EXPECT_EQ(count("2 of 3 tuned (2 of 5 rounds: time budget)"), 1u) << html;
    EXPECT_EQ(count("rounds: time budget"), 1u) << html;
    // Where the step timed fewer kernels than the model has, the cell says so.
    r.models[1].kernels = 7;
    html = job_report_html(r);
    EXPECT_EQ(count("2 of 3 tuned, 3 of 7 kernels timed"), 1u) << html;
    j = nlohmann::json::parse(job_report_json(r));
    EXPECT_EQ(j["models"][0]["in_graph"]["rounds"], 2);
    EXPECT_EQ(j["models"][0]["in_graph"]["rounds_planned"], 5);
  }
  fs::remove_all(dir);
}

}  // namespace
// A 3x3 convolution's two implementations are two tasks but one kernel: the
// model's estimate counts the faster measured one once, and its fallback is
// the untuned build's implementation (Winograd, listed first).
TEST(JobReport, AKernelWithTwoImplementationsCountsTheFasterOnce) {
  Job job = parse_job("trials = 4\n[[model]]\nname = \"m\"\npath = \"m.onnx\"\n", "/j.toml");
  ops::Workload direct{"conv2d_NCHWc.x86",
                       {{"data", {1, 16, 8, 8}},
                        {"kernel", {16, 16, 3, 3}},
                        {"strides", {1, 1}},
                        {"pads", {1, 1, 1, 1}},
                        {"dilation", {1, 1}}}};
  ops::Workload wino = direct;
  wino.template_name = "conv2d_winograd_NCHWc.x86";
  std::vector<JobModelWorkloads> models = {
      {&job.models[0], {direct.key(), wino.key()}, "", {{wino.key(), direct.key()}}}};
  JobTasks tasks = make_job_tasks(job, models);
  ASSERT_EQ(tasks.tasks.size(), 2u);
  fs::path dir = fs::temp_directory_path() / ("kiln-job-alt-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  codegen::Target target = codegen::Target::host();
  const std::string tkey = TargetKey::for_target(target, 1).key();
  RecordDB db = RecordDB::open((dir / "t.db").string());
  auto rec = [&](const ops::Workload& w, const std::string& cfg, double ms) {
    Record r;
    r.workload_key = w.key();
    r.target_key = tkey;
    r.config_json = cfg;
    r.times_ms = {ms};
    r.timestamp_unix = 1000;
    r.kiln_version = "test";
    r.gflops = ops::get_template(w.template_name).flops(w) / (ms * 1e6);
    db.add(r);
  };
  auto fallback = [&](const ops::Workload& w) {
    return ops::get_template(w.template_name).fallback(w, target.isa()).to_json();
  };
  rec(direct, fallback(direct), 2.0);
  rec(direct, R"({"x":1})", 1.5);
  rec(wino, fallback(wino), 1.0);
  rec(wino, R"({"x":1})", 0.8);
  TuneSummary sum;
  sum.target_key = tkey;
  for (const Task& t : tasks.tasks) sum.tasks.push_back({t, 0, 0, TaskState::Capped});
  JobReport r = make_job_report(job, models, tasks, sum, db, target, nullptr, "", 1000);
  ASSERT_EQ(r.models.size(), 1u);
  EXPECT_EQ(r.models[0].kernels, 1);
  EXPECT_DOUBLE_EQ(r.models[0].now_ms, 0.8);
  EXPECT_DOUBLE_EQ(r.models[0].fallback_ms, 1.0);
  EXPECT_EQ(r.models[0].untuned, 0);
  fs::remove_all(dir);
}

}  // namespace kiln::tuner
