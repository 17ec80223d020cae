// The tuning engine (tuner/tune_loop.h) without the CLI: records go through
// the sink, the fallback is measured first, resuming measures nothing twice,
// a stop request ends the run after the measurement in flight, and the
// observer sees every measurement.
#include "tuner/tune_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "codegen/target.h"
#include "ops/dense.h"
#include "ops/op_template.h"

#ifndef KILN_MEASURE_WORKER_PATH
#error "CMake passes the path of kiln-measure-worker as KILN_MEASURE_WORKER_PATH"
#endif

namespace kiln::tuner {
namespace {

// Keeps what the loop stores, and stores it in a database too.
class RecordingSink : public RecordSink {
 public:
  explicit RecordingSink(RecordDB& db) : db_(db) {}
  void add_batch(const std::vector<Record>& records) override {
    ++batches;
    all.insert(all.end(), records.begin(), records.end());
    db_.add_batch(records);
  }
  std::vector<Record> all;
  int batches = 0;

 private:
  RecordDB& db_;
};

class CountingObserver : public TuneObserver {
 public:
  void on_start(const std::vector<Task>& tasks, const std::string&, size_t) override {
    started = tasks.size();
  }
  void on_result(size_t, int64_t, double, double, int64_t) override { ++results; }
  void on_round(size_t, int64_t, const std::vector<double>&, double, int64_t) override { ++rounds; }
  size_t started = 0;
  int results = 0, rounds = 0;
};

struct TempDb {
  std::string path;
  TempDb() {
    path = (std::filesystem::temp_directory_path() /
            ("kiln-tune-loop-" + std::to_string(getpid()) + ".db"))
               .string();
    std::filesystem::remove(path);
  }
  ~TempDb() {
    for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(path + ext);
  }
};

// A small dense workload (odd sizes), one task.
std::vector<Task> dense_tasks() {
  ops::Workload w = ops::dense_workload("dense_nopack.x86", {5, 24, 19});
  return make_tasks({{w.key()}});
}

TuneOptions small_run(const std::string& tuner, int64_t trials) {
  TuneOptions o;
  o.tuner = tuner;
  o.trials = trials;
  o.batch = 3;
  o.measure.worker_path = KILN_MEASURE_WORKER_PATH;
  o.measure.number = 1;
  o.measure.repeat = 1;
  o.measure.timeout_s = 5;
  return o;
}

TEST(TuneLoop, RecordsGoThroughTheSinkFallbackFirstAndResumeMeasuresNothingTwice) {
  TempDb tmp;
  RecordDB db = RecordDB::open(tmp.path);
  std::vector<Task> tasks = dense_tasks();
  ASSERT_EQ(tasks.size(), 1u);
  const ops::OpTemplate& tmpl = ops::get_template(tasks[0].template_name);
  const ops::Workload w = ops::Workload::parse(tasks[0].workload_key);
  schedule::ConfigSpace space = tmpl.space(w);

  RecordingSink sink(db);
  CountingObserver obs;
  TuneSummary first = tune(tasks, db, sink, small_run("random", 5), &obs);
  ASSERT_EQ(sink.all.size(), 5u);
  EXPECT_EQ(sink.batches, 2);  // 3 + 2: the last round is cut to the trial cap
  EXPECT_EQ(obs.started, 1u);
  EXPECT_EQ(obs.results, 5);
  EXPECT_EQ(obs.rounds, 2);
  EXPECT_EQ(first.run_trials, 5);
  EXPECT_EQ(first.tasks.at(0).trials, 5);
  EXPECT_EQ(first.stop_reason, "every task finished");
  EXPECT_FALSE(first.interrupted);
  EXPECT_FALSE(first.budget_spent());
  // The build's default is measured first: the baseline a record must beat.
  EXPECT_EQ(schedule::Config::from_json(space, sink.all[0].config_json).index(),
            tmpl.fallback(w, codegen::Target::host().isa()).index());
  std::set<int64_t> seen;
  double best = 0;
  for (const Record& r : sink.all) {
    EXPECT_EQ(r.workload_key, tasks[0].workload_key);
    EXPECT_EQ(r.target_key, first.target_key);
    EXPECT_EQ(r.error, ErrorClass::kOk) << r.error_message;
    EXPECT_GT(r.gflops, 0);
    best = std::max(best, r.gflops);
    EXPECT_TRUE(seen.insert(schedule::Config::from_json(space, r.config_json).index()).second)
        << "a config was measured twice";
  }
  EXPECT_DOUBLE_EQ(first.tasks[0].best_gflops, best);

  // Resuming with a larger cap measures only new configs, none again.
  RecordingSink more(db);
  TuneSummary second = tune(tasks, db, more, small_run("xgb", 8));
  EXPECT_EQ(more.all.size(), 3u);
  EXPECT_EQ(second.run_trials, 3);
  EXPECT_EQ(second.tasks[0].trials, 8);
  for (const Record& r : more.all)
    EXPECT_TRUE(seen.insert(schedule::Config::from_json(space, r.config_json).index()).second)
        << "resuming measured a stored config again";

  // The cap reached: nothing is measured.
  RecordingSink none(db);
  TuneSummary third = tune(tasks, db, none, small_run("grid", 8));
  EXPECT_TRUE(none.all.empty());
  EXPECT_EQ(third.run_trials, 0);
}

TEST(TuneLoop, AStopRequestEndsTheRunAfterTheMeasurementInFlight) {
  TempDb tmp;
  RecordDB db = RecordDB::open(tmp.path);
  RecordingSink sink(db);
  TuneOptions o = small_run("random", 50);
  int asked = 0;
  o.should_stop = [&] { return ++asked > 2; };  // two measurements, then stop
  TuneSummary s = tune(dense_tasks(), db, sink, o);
  EXPECT_TRUE(s.interrupted);
  EXPECT_EQ(s.stop_reason, "interrupted");
  EXPECT_GE(sink.all.size(), 1u);
  EXPECT_LT(sink.all.size(), 50u);
  EXPECT_EQ(db.count(), sink.all.size());  // everything measured is stored
}

TEST(TuneLoop, MakeTasksMergesKeysAcrossModelsAndWeighsByFlops) {
  ops::Workload small = ops::dense_workload("dense_nopack.x86", {1, 8, 8});
  ops::Workload big = ops::dense_workload("dense_nopack.x86", {1, 64, 64});
  std::vector<Task> tasks = make_tasks({{small.key(), big.key()}, {big.key()}});
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].workload_key, small.key());
  EXPECT_EQ(tasks[1].count, 2);
  EXPECT_NEAR(tasks[0].weight + tasks[1].weight, 1.0, 1e-12);
  EXPECT_GT(tasks[1].weight, tasks[0].weight);
  EXPECT_THROW(make_tasks({{"no_such_template(x=[1])"}}), std::exception);
}

}  // namespace
}  // namespace kiln::tuner
