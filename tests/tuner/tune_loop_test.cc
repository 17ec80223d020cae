// The tuning engine (tuner/tune_loop.h) without the CLI: records go through
// the sink, the fallback is measured first, resuming measures nothing twice,
// a stop request ends the run after the measurement in flight, and the
// observer sees every measurement.
#include "tuner/tune_loop.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

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

// ---- concurrent tuners, locked databases (issue 13, items 6 and 7)
// -------------------------------

int64_t config_index(const Task& task, const std::string& config_json) {
  const ops::OpTemplate& tmpl = ops::get_template(task.template_name);
  return schedule::Config::from_json(tmpl.space(ops::Workload::parse(task.workload_key)),
                                     config_json)
      .index();
}

TEST(TuneLoop, TwoConcurrentRunsMeasureNoConfigTwiceAndShareTheTrialCap) {
  TempDb tmp;
  std::vector<Task> tasks = dense_tasks();
  RecordDB::open(tmp.path);  // created before the runs start
  // Both random tuners have the same seed: they propose the same configs in the
  // same order, so every round collides unless the claims keep them apart.
  auto run = [&](TuneSummary* out) {
    RecordDB db = RecordDB::open(tmp.path);
    RecordDBSink sink(db);
    *out = tune(tasks, db, sink, small_run("random", 8));
  };
  TuneSummary a, b;
  std::thread ta(run, &a), tb(run, &b);
  ta.join();
  tb.join();
  RecordDB db = RecordDB::open(tmp.path);
  std::vector<Record> all = db.records(tasks[0].workload_key, a.target_key);
  std::set<int64_t> distinct;
  for (const Record& r : all) distinct.insert(config_index(tasks[0], r.config_json));
  EXPECT_EQ(distinct.size(), all.size()) << "a config was measured twice";
  // The cap is checked in the claim transaction against records + live claims
  // of both runs: no overshoot at all.
  EXPECT_LE(all.size(), 8u);
  EXPECT_GE(all.size(), 6u);  // both stop at the cap, not early
  EXPECT_EQ(a.run_trials + b.run_trials, static_cast<int64_t>(all.size()));
  // Both ran at once (each measured some): with one seed, their proposals collided.
  EXPECT_GT(a.run_trials, 0);
  EXPECT_GT(b.run_trials, 0);
  EXPECT_EQ(db.live_claims(tasks[0].workload_key, a.target_key), 0);  // none left behind
}

// Takes an exclusive lock on the database from another connection the first
// time a round is stored, holds it for longer than the busy timeout, then
// stores.
class LockedOnceSink : public RecordDBSink {
 public:
  LockedOnceSink(RecordDB& db, std::string path) : RecordDBSink(db), path_(std::move(path)) {}
  ~LockedOnceSink() override {
    if (locker_.joinable()) locker_.join();
  }
  void add_batch(const std::vector<Record>& records) override {
    ++attempts;
    if (!locker_.joinable()) {
      std::promise<void> locked;
      std::future<void> is_locked = locked.get_future();
      locker_ = std::thread([this, &locked] {
        sqlite3* other = nullptr;
        sqlite3_open(path_.c_str(), &other);
        sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr);
        locked.set_value();
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
        sqlite3_close(other);
      });
      is_locked.wait();
    }
    RecordDBSink::add_batch(records);
    stored += records.size();
  }
  int attempts = 0;
  size_t stored = 0;

 private:
  std::string path_;
  std::thread locker_;
};

class WaitingObserver : public CountingObserver {
 public:
  void on_store_waiting(size_t records, double waited_s, const std::string& error) override {
    ++waits;
    waited = waited_s;
    last_error = error;
    kept = records;
  }
  int waits = 0;
  double waited = 0;
  size_t kept = 0;
  std::string last_error;
};

TEST(TuneLoop, ARoundIsStoredAfterALockHeldPastTheBusyTimeoutIsReleased) {
  TempDb tmp;
  RecordDB db = RecordDB::open(tmp.path);
  db.set_busy_timeout_ms(200);
  LockedOnceSink sink(db, tmp.path);
  WaitingObserver obs;
  auto start = std::chrono::steady_clock::now();
  TuneSummary s = tune(dense_tasks(), db, sink, small_run("random", 6), &obs);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(sink.attempts, 2);  // failed with SQLITE_BUSY, retried
  EXPECT_GE(obs.waits, 2);
  EXPECT_EQ(obs.kept, 3u);
  EXPECT_NE(obs.last_error.find("locked"), std::string::npos) << obs.last_error;
  EXPECT_GT(took, 2.4);
  // Nothing lost: every measurement is stored, and the run went on to its cap.
  EXPECT_EQ(s.run_trials, 6);
  EXPECT_EQ(obs.rounds, 2);
  EXPECT_EQ(sink.stored, 6u);
  EXPECT_EQ(db.count(), 6u);
  EXPECT_EQ(s.stop_reason, "every task finished");
}

// A store that fails with something other than a lock (disk full).
class BrokenSink : public RecordDBSink {
 public:
  using RecordDBSink::RecordDBSink;
  void add_batch(const std::vector<Record>&) override {
    throw std::runtime_error("records database: database or disk is full");
  }
};

TEST(TuneLoop, ANonBusyStoreErrorEndsTheRunWithTheRoundInAJsonLinesFile) {
  TempDb tmp;
  RecordDB db = RecordDB::open(tmp.path);
  BrokenSink sink(db);
  std::string unsaved = sink.unsaved_path();
  EXPECT_EQ(unsaved, tmp.path + ".unsaved-" + std::to_string(getpid()) + ".jsonl");
  std::filesystem::remove(unsaved);
  try {
    tune(dense_tasks(), db, sink, small_run("random", 6));
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("disk is full"), std::string::npos) << msg;
    EXPECT_NE(msg.find(unsaved), std::string::npos) << msg;
    EXPECT_NE(msg.find("kiln records import " + tmp.path + " " + unsaved), std::string::npos)
        << msg;
  }
  // The round is in the file and imports.
  EXPECT_EQ(db.count(), 0u);
  EXPECT_EQ(db.import_jsonl(unsaved), 3u);
  std::filesystem::remove(unsaved);
}

// Hardening (issue 13): a config that timed out is measured again by a run
// whose --timeout is longer than the one it was killed at, and only then.
TEST(TuneLoop, TimeoutsAtAShorterLimitAreRetriedWhenTheTimeoutIsRaised) {
  TempDb tmp;
  std::vector<Task> tasks = dense_tasks();
  std::set<int64_t> first_configs;
  {
    RecordDB db = RecordDB::open(tmp.path);
    RecordDBSink sink(db);
    tune(tasks, db, sink, small_run("random", 3));
  }
  // Those three measurements become timeouts at 0.5 s, the measure worker's
  // message included (what a run with --timeout 0.5 would have stored).
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(tmp.path.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw,
                         "UPDATE records SET error = 'timeout', times_ms = '[]', mean_ms = NULL, "
                         "gflops = 0, error_message = 'killed after the timeout of 0.5 s'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  std::string tkey;
  {
    RecordDB db = RecordDB::open(tmp.path);
    tkey = db.targets().at(0);
    for (const Record& r : db.records(tasks[0].workload_key, tkey)) {
      ASSERT_EQ(r.error, ErrorClass::kTimeout);
      ASSERT_EQ(record_timeout_s(r), 0.5);
      first_configs.insert(config_index(tasks[0], r.config_json));
    }
  }
  ASSERT_EQ(first_configs.size(), 3u);

  // A shorter timeout than 0.5 s: the timeouts stand, the cap is reached.
  {
    RecordDB db = RecordDB::open(tmp.path);
    RecordDBSink sink(db);
    TuneOptions o = small_run("random", 3);
    o.measure.timeout_s = 0.4;
    EXPECT_EQ(tune(tasks, db, sink, o).run_trials, 0);
  }
  // The same limit: a timeout at 0.5 s is final too.
  {
    RecordDB db = RecordDB::open(tmp.path);
    RecordDBSink sink(db);
    TuneOptions o = small_run("random", 3);
    o.measure.timeout_s = 0.5;
    EXPECT_EQ(tune(tasks, db, sink, o).run_trials, 0);
  }
  // Raised to 5 s: exactly the timed-out configs are measured again (they
  // are not trials any more, so the cap of 3 leaves room for them alone).
  RecordDB db = RecordDB::open(tmp.path);
  RecordDBSink sink(db);
  TuneSummary retry = tune(tasks, db, sink, small_run("xgb", 3));
  EXPECT_EQ(retry.run_trials, 3);
  EXPECT_EQ(retry.tasks.at(0).trials, 3);
  std::set<int64_t> retried;
  for (const Record& r : db.records(tasks[0].workload_key, tkey)) {
    if (r.error == ErrorClass::kTimeout) continue;
    EXPECT_EQ(r.error, ErrorClass::kOk) << r.error_message;
    retried.insert(config_index(tasks[0], r.config_json));
  }
  EXPECT_EQ(retried, first_configs);
  // Once measured within the limit, nothing is retried again.
  RecordDBSink again(db);
  EXPECT_EQ(tune(tasks, db, again, small_run("random", 3)).run_trials, 0);
}

}  // namespace
}  // namespace kiln::tuner
