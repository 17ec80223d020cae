// Measuring through a runner (MeasureOptions::runner, tuner/remote_runner.h)
// on this machine alone: the runner is the host's own kiln-measure-worker in
// serve mode, started by /bin/sh -c, so no device or qemu is needed. Good
// candidates are verified and timed; planted faults come back classified
// while the one server keeps going; runners that misbehave (print garbage,
// exit, go silent, never say hello) cost one candidate each and are
// restarted, or, when they cannot start at all, are one clear exception.
#include "tuner/remote_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ops/dense.h"
#include "ops/op_template.h"
#include "ops/workload.h"
#include "tuner/measure.h"
#include "tuner/measure_worker.h"
#include "tuner/record_sink.h"
#include "tuner/records.h"
#include "tuner/tasks.h"
#include "tuner/tune_loop.h"

#ifndef KILN_MEASURE_WORKER_PATH
#error "CMake passes the path of kiln-measure-worker as KILN_MEASURE_WORKER_PATH"
#endif

namespace kiln::tuner {
namespace {

using Clock = std::chrono::steady_clock;

const codegen::Target& host() {
  static const codegen::Target t = codegen::Target::host();
  return t;
}

std::string serve_command() { return std::string("'") + KILN_MEASURE_WORKER_PATH + "' --serve"; }

MeasureOptions runner_options() {
  MeasureOptions o;
  o.runner = serve_command();
  o.worker_path = "/nonexistent/kiln-measure-worker";  // never used with a runner
  o.number = 2;
  o.repeat = 2;
  o.timeout_s = 5;  // generous: CI machines are loaded; the hangs cost it twice
  return o;
}

ops::Workload dense_w() { return ops::dense_workload("dense_nopack.x86", {5, 24, 19}); }
ops::Workload conv_w() {
  return ops::Workload{"conv2d_NCHWc.x86",
                       {{"data", {1, 8, 9, 7}},
                        {"kernel", {16, 8, 3, 3}},
                        {"strides", {1, 1}},
                        {"pads", {1, 1, 1, 1}},
                        {"dilation", {1, 1}}}};
}

MeasureInput fallback_input(const ops::Workload& w) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  return {w.key(), t.fallback(w, host().isa()).to_json()};
}

void expect_good(const MeasureResult& r, const MeasureOptions& o, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(r.error, ErrorClass::kOk) << to_string(r.error) << ": " << r.message;
  ASSERT_EQ(r.times_ms.size(), size_t(o.repeat));
  for (double t : r.times_ms) EXPECT_GT(t, 0);
  EXPECT_GT(r.gflops, 0);
  EXPECT_GE(r.max_rel_err, 0);
  EXPECT_LE(r.max_rel_err, o.rtol);
  EXPECT_EQ(r.number_used, o.number);
  EXPECT_GT(r.run_s, 0);
}

void expect_error(const MeasureResult& r, ErrorClass e, const std::string& needle,
                  const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(r.error, e) << "got " << to_string(r.error) << ": " << r.message;
  EXPECT_NE(r.message.find(needle), std::string::npos)
      << "message '" << r.message << "' lacks '" << needle << "'";
  EXPECT_TRUE(r.times_ms.empty());
  EXPECT_EQ(r.gflops, 0);
}

TEST(RemoteRunner, MeasuresAndClassifiesPlantedFaultsThroughOneServer) {
  MeasureOptions o = runner_options();
  o.runner_session = runner_for(o);
  std::vector<MeasureInput> in = {fallback_input(dense_w()), fallback_input(conv_w()),
                                  fallback_input(conv_w()),  fallback_input(dense_w()),
                                  fallback_input(dense_w()), fallback_input(conv_w()),
                                  fallback_input(dense_w()), fallback_input(conv_w())};
  o.fault_injection = {{2, "crash"}, {4, "hang"}, {5, "garbage"}, {6, "exit"}};
  auto t0 = Clock::now();
  std::vector<MeasureResult> rs = measure_batch(in, host(), o);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(rs.size(), in.size());
  expect_good(rs[0], o, "dense");
  expect_good(rs[1], o, "conv");
  expect_error(rs[2], ErrorClass::kRuntimeError, "SIGSEGV", "crash");
  expect_good(rs[3], o, "after the crash");
  expect_error(rs[4], ErrorClass::kTimeout, "timeout", "hang");
  EXPECT_GE(rs[4].run_s, o.timeout_s);
  EXPECT_LT(rs[4].run_s, o.timeout_s + 1.5);
  expect_error(rs[5], ErrorClass::kWrongResult, "relative error", "garbage");
  EXPECT_GT(rs[5].max_rel_err, o.rtol);
  expect_error(rs[6], ErrorClass::kRuntimeError, "without a result", "exit");
  expect_good(rs[7], o, "last");
  // The server forked a child per candidate and outlived every fault.
  EXPECT_EQ(o.runner_session->starts(), 1);
  EXPECT_EQ(o.runner_session->hello().isolation, "fork");
  EXPECT_LT(wall, 30);

  // The session lives on for the next batch (tune() keeps one per run).
  rs = measure_batch({fallback_input(dense_w())}, host(), o);
  expect_good(rs.at(0), o, "next batch");
  EXPECT_EQ(o.runner_session->starts(), 1);
}

TEST(RemoteRunner, WithoutForkTheServerEndsOnAFaultAndIsRestarted) {
  // `--serve --no-fork` (what a server does where fork() hangs, as under
  // qemu-user here): candidates run in the server; a crash or a hang ends it
  // after its result line, and the host starts it again for the next one.
  MeasureOptions o = runner_options();
  o.runner = serve_command() + " --no-fork";
  o.runner_session = runner_for(o);
  EXPECT_EQ(o.runner_session->hello().isolation, "none");
  std::vector<MeasureInput> in = {fallback_input(dense_w()), fallback_input(conv_w()),
                                  fallback_input(dense_w()), fallback_input(dense_w()),
                                  fallback_input(conv_w()),  fallback_input(dense_w()),
                                  fallback_input(conv_w()),  fallback_input(dense_w())};
  o.fault_injection = {{1, "crash"}, {3, "hang"}, {4, "garbage"}, {5, "abort"}, {6, "exit"}};
  std::vector<MeasureResult> rs = measure_batch(in, host(), o);
  ASSERT_EQ(rs.size(), in.size());
  expect_good(rs[0], o, "dense");
  expect_error(rs[1], ErrorClass::kRuntimeError, "SIGSEGV", "crash");
  expect_good(rs[2], o, "after the crash");
  expect_error(rs[3], ErrorClass::kTimeout, "timeout", "hang");
  EXPECT_LT(rs[3].run_s, o.timeout_s + 1.5);
  expect_error(rs[4], ErrorClass::kWrongResult, "relative error", "garbage");
  expect_error(rs[5], ErrorClass::kRuntimeError, "SIGABRT", "abort");
  expect_error(rs[6], ErrorClass::kRuntimeError, "without a result", "exit");
  expect_good(rs[7], o, "last");
  EXPECT_EQ(o.runner_session->starts(), 5);  // the first, and after crash, hang, abort, exit
}

TEST(RemoteRunner, ADeviceLostMidBatchKeepsWhatWasMeasured) {
  // The runner starts once; after the crash ends the (fork-less) server it
  // cannot start again. The batch returns the two results before that, for the
  // tuner to store; the next batch is the error.
  std::filesystem::path marker =
      std::filesystem::temp_directory_path() / ("kiln_runner_once_" + std::to_string(getpid()));
  std::filesystem::remove(marker);
  MeasureOptions o = runner_options();
  o.runner = "if [ -e '" + marker.string() +
             "' ]; then echo 'device gone' >&2; exit 1; fi; touch '" + marker.string() +
             "'; exec " + serve_command() + " --no-fork";
  o.runner_session = runner_for(o);
  o.fault_injection = {{1, "crash"}};
  std::vector<MeasureInput> in = {fallback_input(dense_w()), fallback_input(dense_w()),
                                  fallback_input(dense_w()), fallback_input(dense_w())};
  std::vector<MeasureResult> rs = measure_batch(in, host(), o);
  ASSERT_EQ(rs.size(), 2u);
  expect_good(rs[0], o, "before the crash");
  expect_error(rs[1], ErrorClass::kRuntimeError, "SIGSEGV", "crash");
  o.fault_injection.clear();
  try {
    measure_batch(in, host(), o);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("device gone"), std::string::npos) << e.what();
  }
  std::filesystem::remove(marker);
}

TEST(RemoteRunner, HelloDescribesTheDevice) {
  RemoteRunner r(serve_command());
  const RemoteRunner::Hello& h = r.hello();
  EXPECT_EQ(h.arch, codegen::Target::host().arch());
  EXPECT_GE(h.num_threads, 1);
  check_runner_runs(r, host());  // this machine runs its own code
  EXPECT_THROW(check_runner_runs(
                   r, codegen::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")),
               std::runtime_error);
}

// A fake runner: says hello, then does `then` after reading the first request line.
std::string fake_runner(const std::string& then) {
  return "echo '{\"kiln_measure_worker\": \"serve\", \"protocol\": 1, \"arch\": \"" +
         codegen::Target::host().arch() + "\", \"features\": [], \"num_threads\": 1}'; read l; " +
         then;
}

std::string header() {
  WorkerArgs a;
  a.workload_key = dense_w().key();
  a.config_json = fallback_input(dense_w()).config_json;
  a.symbol = "f";
  return serve_request_header(a, 1, 3);
}

TEST(RemoteRunner, GarbageExitAndSilenceCostOneRequestAndRestart) {
  {
    RemoteRunner r(fake_runner("echo 'hello world'; sleep 5"));
    auto reply = r.request(header(), "abc", 5);
    EXPECT_NE(reply.error.find("printed 'hello world' instead of a result"), std::string::npos)
        << reply.error;
    EXPECT_FALSE(reply.timed_out);
    reply = r.request(header(), "abc", 5);  // started again
    EXPECT_FALSE(reply.error.empty());
    EXPECT_EQ(r.starts(), 2);
  }
  {
    RemoteRunner r(fake_runner("echo 'device on fire' >&2; exit 4"));
    auto reply = r.request(header(), "abc", 5);
    EXPECT_NE(reply.error.find("exited with status 4"), std::string::npos) << reply.error;
    EXPECT_NE(reply.error.find("device on fire"), std::string::npos) << reply.error;
  }
  {
    RemoteRunner r(fake_runner("sleep 100"));
    auto t0 = Clock::now();
    auto reply = r.request(header(), "abc", 0.5);
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_TRUE(reply.timed_out);
    EXPECT_NE(reply.error.find("no result within"), std::string::npos) << reply.error;
    EXPECT_LT(wall, 3);  // the runner was killed, not waited for
  }
}

TEST(RemoteRunner, ARunnerThatCannotStartIsAnErrorNotAResult) {
  MeasureOptions o = runner_options();
  o.runner = "echo 'ssh: connect to host pi port 22: No route to host' >&2; exit 255";
  try {
    measure_batch({fallback_input(dense_w())}, host(), o);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("No route to host"), std::string::npos) << m;
    EXPECT_NE(m.find("exited with status 255"), std::string::npos) << m;
  }
  RemoteRunner quiet("echo 'not a worker'; sleep 100", 0.5);
  EXPECT_THROW(quiet.hello(), std::runtime_error);
}

TEST(RemoteRunner, TuneStoresVerifiedRecords) {
  // tune() with a runner: the runner's hello gives the thread count the records
  // are keyed by; every record stored is verified and timed.
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_runner_tune_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  {
    RecordDB db = RecordDB::open((dir / "tuning.db").string());
    RecordDBSink sink(db);
    TuneOptions t;
    t.tuner = "random";
    t.trials = 3;
    t.batch = 3;
    t.measure = runner_options();
    t.measure.repeat = 1;
    std::vector<Task> tasks = make_tasks({{dense_w().key()}});
    TuneSummary s = tune(tasks, db, sink, t);
    EXPECT_EQ(s.run_trials, 3);
    auto records = db.records(dense_w().key(), s.target_key);
    ASSERT_EQ(records.size(), 3u);
    for (const Record& r : records) {
      EXPECT_EQ(r.error, ErrorClass::kOk) << r.error_message;
      EXPECT_GT(r.gflops, 0);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::tuner
