// `kiln tune`, `kiln records` and `kiln build --tuning-log` as a user runs
// them: records are stored as measured, a re-run resumes without measuring a
// config twice, --trials counts the total per task, and --require-tuned
// turns an untuned workload into an error that writes nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "codegen/target.h"
#include "driver_harness.h"
#include "ops/op_template.h"
#include "tuner/records.h"
#include "tuner/tuned_configs.h"

namespace kiln::test {
namespace {

// x[1, 8, 6, 6] -> Conv 3x3 (8 -> 16) -> Relu -> y: one conv2d_NCHWc task.
// `rows` > 6: the same convolution at a nearby shape (borrowing, warm start).
OnnxBuilder tiny_conv_model(int rows = 6) {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {"1", "8", std::to_string(rows), "6"});
  b.output("y", {"1", "16", std::to_string(rows), "6"});
  conv(b, "conv1", "x", "c", {8, 16}, rng);
  b.node("Relu", "relu1", {"c"}, {"y"});
  return b;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

class KilnTune : public ::testing::Test {
 protected:
  // Builds see no shipped logs unless a test puts some in logs_.
  CommandResult kiln(const std::string& args) {
    return run_kiln(args, tmp_, capture_, "KILN_LOGS_DIR='" + logs_.path().string() + "'");
  }
  // Quick measurements: the point is the bookkeeping, not the timing (and
  // the fallback's layouts: no layout-transform records to count).
  std::string tune(const std::string& db, int trials) {
    return "tune " + quote(model_) + " --tuning-log " + quote(db) + " --trials " +
           std::to_string(trials) +
           " --batch 3 --repeat 1 --min-repeat-ms 0 --tuner random --in-graph 0 --keep-layouts";
  }
  size_t records_in(const std::string& db) {
    std::string out = work_.file("export.jsonl");
    CommandResult r = kiln("records export " + quote(db) + " -o " + quote(out));
    EXPECT_EQ(r.status, 0) << r.err;
    return count_lines(out);
  }
  void SetUp() override {
    model_ = work_.file("tiny.onnx");
    write_bytes(model_, tiny_conv_model().bytes());
  }
  ScratchDir work_, tmp_, capture_, logs_;
  std::string model_;
};

TEST_F(KilnTune, ResumesAndBuildsWithTheLog) {
  std::string db = work_.file("tuning.db");
  CommandResult first = kiln(tune(db, 4));
  ASSERT_EQ(first.status, 0) << first.err << first.out;
  EXPECT_NE(first.out.find("conv2d_NCHWc.x86"), std::string::npos) << first.out;
  // The progress line (one per round when stdout is not a terminal).
  for (const char* part : {"[task 1/1]", "trials 3/4", "best", "GFLOP/s", "elapsed", "remaining ~"})
    EXPECT_NE(first.out.find(part), std::string::npos) << part << "\n" << first.out;
  EXPECT_EQ(records_in(db), 4u);

  // The same total again: nothing left to measure.
  CommandResult again = kiln(tune(db, 4));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 trials"), std::string::npos) << again.out;
  EXPECT_EQ(records_in(db), 4u);

  // A larger total measures only the difference, never a config twice.
  ASSERT_EQ(kiln(tune(db, 7)).status, 0);
  EXPECT_EQ(records_in(db), 7u);
  std::ifstream in(work_.file("export.jsonl"));
  std::set<std::string> configs;
  for (std::string line; std::getline(in, line);)
    configs.insert(nlohmann::json::parse(line).at("config").dump());
  EXPECT_EQ(configs.size(), 7u);

  std::string pkg = work_.file("tiny.tar");
  CommandResult build = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                             quote(db) + " --require-tuned");
  ASSERT_EQ(build.status, 0) << build.err;
  EXPECT_NE(build.out.find("tuned: 1 of 1 workloads"), std::string::npos) << build.out;
  EXPECT_TRUE(fs::exists(pkg));
}

// The in-graph step: after the search, each task's best configs are timed
// inside the compiled model and stored under the in-graph target key; the
// build takes its config from those records and says so.
TEST_F(KilnTune, InGraphStepStoresInGraphRecordsThatTheBuildPrefers) {
  std::string db = work_.file("tuning.db");
  CommandResult r = kiln("tune " + quote(model_) + " --tuning-log " + quote(db) +
                         " --trials 5 --batch 5 --repeat 1 --min-repeat-ms 0 --tuner random "
                         "--in-graph 2 --keep-layouts");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const size_t total = records_in(db);  // writes export.jsonl
  std::ifstream in(work_.file("export.jsonl"));
  std::set<std::string> isolated, in_graph;
  std::string fallback;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    bool g = j.at("target").get<std::string>().find("; measured=in-graph") != std::string::npos;
    (g ? in_graph : isolated).insert(j.at("config").dump());
    ops::Workload w = ops::Workload::parse(j.at("workload").get<std::string>());
    fallback =
        nlohmann::json::parse(
            ops::get_template(w.template_name).fallback(w, codegen::Target::host().isa()).to_json())
            .dump();
    if (g) {
      EXPECT_EQ(j.at("error"), "ok");
      EXPECT_EQ(j.at("times_ms").size(), 6u);  // 30 repeats in medians of 5
      EXPECT_GT(j.at("gflops").get<double>(), 0);
    }
  }
  // The 2 fastest isolated configs, and the fallback when it is not one of
  // them (the in-graph step keeps it if the tuned ones run slower).
  EXPECT_EQ(isolated.size(), 5u);
  ASSERT_TRUE(in_graph.size() == 2u || in_graph.size() == 3u) << in_graph.size();
  EXPECT_TRUE(in_graph.count(fallback)) << fallback;
  for (const std::string& c : in_graph) EXPECT_TRUE(isolated.count(c) || c == fallback) << c;
  // The closing estimate counts the model's one template kernel.
  EXPECT_NE(r.out.find("kiln tune: inside the model the template kernels (1) take "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(total, 5u + in_graph.size());
  EXPECT_NE(r.out.find(std::to_string(in_graph.size()) + " in-graph records for 1 workloads"),
            std::string::npos)
      << r.out;

  // The in-graph records count no trial: the same total measures nothing new.
  CommandResult again = kiln(tune(db, 5));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 trials"), std::string::npos) << again.out;

  std::string pkg = work_.file("tiny.tar");
  CommandResult build = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                             quote(db) + " --require-tuned");
  ASSERT_EQ(build.status, 0) << build.err;
  EXPECT_NE(build.out.find("(in-graph)"), std::string::npos) << build.out;
  CommandResult off =
      kiln("tune " + quote(model_) + " --tuning-log " + quote(db) + " --in-graph -1");
  EXPECT_NE(off.status, 0);
}

// --cold-weights: the candidates' weights come from memory on every call,
// and their records go under the target key's "measured=cold-weights", apart
// from warm ones: trials and resuming count each kind alone, and a build
// prefers the cold ones. A tiny model's weights fit the cache: warm by default.
TEST_F(KilnTune, ColdWeightRecordsKeepTheirOwnKey) {
  std::string db = work_.file("tuning.db");
  auto keys = [&] {
    records_in(db);
    std::map<std::string, int> n;
    std::ifstream in(work_.file("export.jsonl"));
    for (std::string line; std::getline(in, line);) {
      std::string t = nlohmann::json::parse(line).at("target");
      ++n[t.ends_with("; measured=cold-weights") ? "cold"
          : t.find("measured=") == t.npos        ? "warm"
                                                 : t];
    }
    return n;
  };
  CommandResult cold = kiln(tune(db, 3) + " --cold-weights");
  ASSERT_EQ(cold.status, 0) << cold.err << cold.out;
  EXPECT_EQ(keys(), (std::map<std::string, int>{{"cold", 3}}));
  CommandResult again = kiln(tune(db, 3) + " --cold-weights");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 trials"), std::string::npos) << again.out;
  CommandResult tasks = kiln("tasks " + quote(model_) + " --tuning-log " + quote(db));
  ASSERT_EQ(tasks.status, 0) << tasks.err;
  EXPECT_TRUE(std::regex_search(tasks.out, std::regex(R"(yes +3 )"))) << tasks.out;

  CommandResult warm = kiln(tune(db, 2));  // the default for a tiny model
  ASSERT_EQ(warm.status, 0) << warm.err;
  EXPECT_EQ(warm.out.find("cold weights"), std::string::npos) << warm.out;
  EXPECT_EQ(keys(), (std::map<std::string, int>{{"cold", 3}, {"warm", 2}}));

  std::string pkg = work_.file("tiny.tar");
  CommandResult build = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                             quote(db) + " --require-tuned");
  ASSERT_EQ(build.status, 0) << build.err;
  EXPECT_NE(build.out.find("(cold weights)"), std::string::npos) << build.out;
}

TEST_F(KilnTune, TwoProcessesOnOneDatabaseMeasureNoConfigTwice) {
  // Two `kiln tune` at once on one model and database (issue 13, item 6):
  // configs are claimed in the database before they are measured, and the
  // trial cap counts both runs' records and live claims.
  std::string db = work_.file("shared.db");
  tuner::RecordDB::open(db);
  ScratchDir capture_a, capture_b;
  std::string env = "KILN_LOGS_DIR='" + logs_.path().string() + "'";
  CommandResult ra, rb;
  std::thread ta([&] { ra = run_kiln(tune(db, 8), tmp_, capture_a, env); });
  std::thread tb([&] { rb = run_kiln(tune(db, 8), tmp_, capture_b, env); });
  ta.join();
  tb.join();
  ASSERT_EQ(ra.status, 0) << ra.err << ra.out;
  ASSERT_EQ(rb.status, 0) << rb.err << rb.out;
  size_t n = records_in(db);
  std::ifstream in(work_.file("export.jsonl"));
  std::set<std::string> configs;
  for (std::string line; std::getline(in, line);)
    configs.insert(nlohmann::json::parse(line).at("config").dump());
  EXPECT_EQ(configs.size(), n) << "a config was measured twice";
  EXPECT_LE(n, 8u);  // no overshoot: the cap is checked where the claims are taken
  EXPECT_GE(n, 6u);
  tuner::RecordDB rdb = tuner::RecordDB::open(db);
  for (const std::string& target : rdb.targets())
    for (const std::string& w : rdb.workloads(target)) EXPECT_EQ(rdb.live_claims(w, target), 0);
}

// x[4, 32] -> MatMul (32 -> 64) + bias -> Relu -> MatMul (64 -> 16) -> y:
// two dense tasks.
OnnxBuilder tiny_mlp_model() {
  std::mt19937 rng(10);
  OnnxBuilder b;
  b.input("x", {"4", "32"});
  b.output("y", {"4", "16"});
  init_random(b, "w1", {32, 64}, rng);
  init_random(b, "b1", {64}, rng);
  init_random(b, "w2", {64, 16}, rng);
  b.node("MatMul", "fc1", {"x", "w1"}, {"h"});
  b.node("Add", "bias1", {"h", "b1"}, {"hb"});
  b.node("Relu", "relu1", {"hb"}, {"r"});
  b.node("MatMul", "fc2", {"r", "w2"}, {"y"});
  return b;
}

TEST_F(KilnTune, TwoProcessesTimeNoConfigInGraphTwice) {
  // Two `kiln tune` at once on one model and database, both running the
  // in-graph step (issue 65, item 10): each claims its candidates before
  // timing them, and a config the other run holds or stored is left to it,
  // so no (workload, config) has two in-graph records; the runs take turns
  // on the host, and no claim is left behind.
  std::string mlp = work_.file("mlp.onnx");
  write_bytes(mlp, tiny_mlp_model().bytes());
  std::string db = work_.file("shared.db");
  tuner::RecordDB::open(db);
  ScratchDir capture_a, capture_b;
  std::string env = "KILN_LOGS_DIR='" + logs_.path().string() + "'";
  const std::string cmd = "tune " + quote(mlp) + " --tuning-log " + quote(db) +
                          " --trials 6 --batch 3 --repeat 1 --min-repeat-ms 0 --tuner random "
                          "--in-graph 3 --keep-layouts";
  CommandResult ra, rb;
  std::thread ta([&] { ra = run_kiln(cmd, tmp_, capture_a, env); });
  std::thread tb([&] { rb = run_kiln(cmd, tmp_, capture_b, env); });
  ta.join();
  tb.join();
  ASSERT_EQ(ra.status, 0) << ra.err << ra.out;
  ASSERT_EQ(rb.status, 0) << rb.err << rb.out;
  records_in(db);
  std::ifstream in(work_.file("export.jsonl"));
  std::map<std::pair<std::string, std::string>, int> in_graph;
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("target").get<std::string>().find("; measured=in-graph") == std::string::npos)
      continue;
    ++n;
    ++in_graph[{j.at("workload").get<std::string>(), j.at("config").dump()}];
  }
  EXPECT_GT(n, 0u) << ra.out << rb.out;
  for (const auto& [wc, count] : in_graph)
    EXPECT_EQ(count, 1) << wc.first << " " << wc.second << " timed in-graph " << count << " times\n"
                        << ra.out << rb.out;
  tuner::RecordDB rdb = tuner::RecordDB::open(db);
  EXPECT_TRUE(rdb.live_claim_holders().empty());
}

TEST_F(KilnTune, RunnerMeasuresThroughACommandAndStoresVerifiedRecords) {
  // --runner: this machine's own worker in serve mode stands in for a device
  // (the aarch64 one under qemu is tests/e2e/run_arm_qemu_tune.sh).
  std::string worker = (fs::path(KILN_BINARY).parent_path() / "kiln-measure-worker").string();
  std::string db = work_.file("runner.db");
  CommandResult r = kiln(tune(db, 3) + " --runner " + quote(worker + " --serve"));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("[task 1/1]"), std::string::npos) << r.out;
  tuner::RecordDB rdb = tuner::RecordDB::open(db);
  ASSERT_EQ(rdb.count(), 3u);
  for (const std::string& target : rdb.targets())
    for (const std::string& w : rdb.workloads(target))
      for (const tuner::Record& rec : rdb.records(w, target)) {
        EXPECT_EQ(rec.error, tuner::ErrorClass::kOk) << rec.error_message;
        EXPECT_GT(rec.gflops, 0);
      }

  // A device that cannot run the target's code is one clear error, before any database.
  std::string other = work_.file("other.db");
  r = kiln(tune(other, 3) + " --runner " + quote(worker + " --serve") +
           " --target 'llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find("its device is " + codegen::Target::host().arch()), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(other));
  // A runner that cannot start stores nothing either.
  r = kiln(tune(other, 3) + " --runner 'echo no route to host >&2; exit 255'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find("no route to host"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(other));
}

// --trials 0 used to be accepted and never finish: now one error, and no
// database; so is a --report that could not be written after tuning. Every
// subcommand's --help goes to stdout with exit 0.
TEST_F(KilnTune, ZeroTrialsIsAnErrorAndHelpExitsZero) {
  std::string db = work_.file("zero.db");
  CommandResult r = kiln(tune(db, 0));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--trials needs at least 1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
  // --report into a missing folder, or onto the model: refused before any tuning.
  for (const std::string& report : {work_.file("no/such/dir/r.json"), model_}) {
    r = kiln(tune(db, 4) + " --report " + quote(report));
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("report"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(db));
  }
  for (const char* cmd : {"build", "run", "tune", "tasks", "target", "records"}) {
    SCOPED_TRACE(cmd);
    r = kiln(std::string(cmd) + " --help");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("usage"), std::string::npos) << r.out;
  }
}

TEST_F(KilnTune, RequireTunedWithoutRecordsWritesNothing) {
  std::string db = work_.file("empty.db");
  std::string none = work_.file("none.jsonl");
  write_bytes(none, "");
  ASSERT_EQ(kiln("records import " + quote(db) + " " + quote(none)).status, 0);
  std::string pkg = work_.file("tiny.tar");
  CommandResult r = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                         quote(db) + " --require-tuned");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find("have no record"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("conv2d_NCHWc.x86(data=[1,8,6,6]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(pkg));
}

TEST_F(KilnTune, ShippedLogsServeWhenTheDatabaseHasNoRecord) {
  std::string db = work_.file("tuning.db");
  ASSERT_EQ(kiln(tune(db, 4)).status, 0);
  // What a developer ships: the record a build would pick, one line.
  std::string shipped = logs_.file(tuner::isa_class(codegen::Target::host()) + ".jsonl");
  ASSERT_FALSE(tuner::isa_class(codegen::Target::host()).empty()) << "host is not x86-64 AVX2+";
  CommandResult ex = kiln("records export " + quote(db) + " -o " + quote(shipped) + " --best");
  ASSERT_EQ(ex.status, 0) << ex.err;
  EXPECT_EQ(count_lines(shipped), 1u);

  std::string pkg = work_.file("tiny.tar"), empty_db = work_.file("empty.db");
  CommandResult b = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --require-tuned");
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("tuned: 1 of 1 workloads (1 from shipped log " + shipped), std::string::npos)
      << b.out;
  fs::remove(pkg);
  // Turned off, the same build has no record.
  CommandResult off = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                           quote(db) + " --no-shipped-logs --require-tuned");
  ASSERT_EQ(off.status, 0) << off.err;  // the database has it
  fs::remove(pkg);
  write_bytes(work_.file("none.jsonl"), "");
  ASSERT_EQ(
      kiln("records import " + quote(empty_db) + " " + quote(work_.file("none.jsonl"))).status, 0);
  off = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " + quote(empty_db) +
             " --no-shipped-logs --require-tuned");
  EXPECT_EQ(off.status, 1) << off.out;
  EXPECT_NE(off.err.find("have no record"), std::string::npos) << off.err;
  EXPECT_FALSE(fs::exists(pkg));
}

TEST_F(KilnTune, BorrowsANearbyShapeAndSaysSo) {
  std::string db = work_.file("tuning.db");
  ASSERT_EQ(kiln(tune(db, 4)).status, 0);
  std::string nearby = work_.file("nearby.onnx"), pkg = work_.file("nearby.tar");
  write_bytes(nearby, tiny_conv_model(9).bytes());
  CommandResult b =
      kiln("build " + quote(nearby) + " -o " + quote(pkg) + " --tuning-log " + quote(db));
  ASSERT_EQ(b.status, 0) << b.err;
  EXPECT_NE(b.out.find("borrowed: 1 workload uses"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("<- conv2d_NCHWc.x86(data=[1,8,6,6]"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("configs: 1 of 1 workloads configured"), std::string::npos) << b.out;
  fs::remove(pkg);
  // A borrowed config is not a record of the workload: --require-tuned refuses it.
  CommandResult strict = kiln("build " + quote(nearby) + " -o " + quote(pkg) + " --tuning-log " +
                              quote(db) + " --require-tuned");
  EXPECT_EQ(strict.status, 1) << strict.out;
  EXPECT_NE(strict.err.find("only a borrowed config"), std::string::npos) << strict.err;
  EXPECT_FALSE(fs::exists(pkg));
  // --no-borrow: the fallback, said so.
  CommandResult none = kiln("build " + quote(nearby) + " -o " + quote(pkg) + " --tuning-log " +
                            quote(db) + " --no-borrow");
  ASSERT_EQ(none.status, 0) << none.err;
  EXPECT_NE(none.out.find("fallback configs for:"), std::string::npos) << none.out;
}

TEST_F(KilnTune, CostModelWarmStartsFromOtherWorkloadsRecords) {
  std::string db = work_.file("tuning.db");
  ASSERT_EQ(kiln(tune(db, 6)).status, 0);
  std::string nearby = work_.file("nearby.onnx");
  write_bytes(nearby, tiny_conv_model(9).bytes());
  CommandResult r =
      kiln("tune " + quote(nearby) + " --tuning-log " + quote(db) +
           " --trials 2 --batch 2 --repeat 1 --min-repeat-ms 0 --tuner xgb --in-graph 0 "
           "--keep-layouts");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("cost model warm-started from"), std::string::npos) << r.out;
  // The records of the first workload are still all there, plus the new two.
  EXPECT_EQ(records_in(db), 8u);
}

TEST_F(KilnTune, TimeBudgetRunningOutExitsThreeWithRecordsKept) {
  std::string db = work_.file("tuning.db");
  std::string report = work_.file("report.json");
  CommandResult r = kiln("tune " + quote(model_) + " --tuning-log " + quote(db) +
                         " --trials 500 --batch 4 --repeat 1 --min-repeat-ms 0 --tuner random "
                         "--time-budget 3 --in-graph 0 --keep-layouts --report " +
                         quote(report));
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("time budget spent"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(read_bytes(report));
  EXPECT_GE(records_in(db), 1u);
  EXPECT_EQ(j.at("trials").get<size_t>(), records_in(db)) << "every measured trial is stored";
  // A round ends at the budget between two measurements: the run overshoots
  // by one candidate's measurement and the round's compilation, not a round.
  EXPECT_LT(j.at("elapsed_s").get<double>(), 3 + 2.5) << r.out;

  // A budget spent before the first measurement: nothing measured, exit 3.
  std::string empty = work_.file("empty.db");
  r = kiln("tune " + quote(model_) + " --tuning-log " + quote(empty) +
           " --trials 50 --batch 2 --repeat 1 --min-repeat-ms 0 --tuner random "
           "--time-budget 0.001 --in-graph 0 --keep-layouts");
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("time budget spent"), std::string::npos) << r.out;
  EXPECT_EQ(records_in(empty), 0u);
}

// With a time budget the search stops at its share (85 %) and the in-graph
// step runs in the rest, so that a budgeted run still gets the records that
// keep builds from picks that lose inside the model; a run whose search
// spent its share exits 3. (A budget of 20 s: its 3 s share leaves room
// for a search round that overruns on a loaded machine.)
TEST_F(KilnTune, TimeBudgetKeepsTheInGraphStepsShare) {
  std::string db = work_.file("tuning.db");
  std::string report = work_.file("report.json");
  auto start = std::chrono::steady_clock::now();
  CommandResult r = kiln("tune " + quote(model_) + " --tuning-log " + quote(db) +
                         " --trials 100000 --batch 2 --repeat 1 --min-repeat-ms 0 --tuner random "
                         "--time-budget 20 --in-graph 2 --keep-layouts --report " +
                         quote(report));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("the search gets 17 s of the 20 s budget"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(time budget spent)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in-graph records for 1 workloads"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(read_bytes(report));
  EXPECT_EQ(j.at("stop_reason"), "time budget spent");
  // A round that started within the share may end after it, by less than
  // the step's 3 s here (else the step would have found the budget spent).
  EXPECT_LE(j.at("elapsed_s").get<double>(), 20 * 0.85 + 3) << "the search kept to its share";
  ASSERT_EQ(j.at("in_graph").size(), 1u);
  EXPECT_EQ(j["in_graph"][0].at("skipped"), false);
  EXPECT_GE(j["in_graph"][0].at("records").get<int>(), 2);
  EXPECT_GT(j["in_graph"][0].at("tuned_ms").get<double>(), 0);
  // The rounds that fit in the share: at least the best and the untuned.
  const int rounds = j["in_graph"][0].at("rounds").get<int>();
  EXPECT_GE(rounds, 2);
  EXPECT_LE(rounds, j["in_graph"][0].at("rounds_planned").get<int>());
  EXPECT_LT(seconds, 70) << "the in-graph step of one tiny conv takes seconds";
}

// --free-layout searches any channel blocks and then times the layout
// transforms they may need, as records of their own target-key variant that
// count no trial; kiln build --layout-dp reads them. The default
// (--keep-layouts): none.
TEST_F(KilnTune, FreeLayoutStoresTransformTimes) {
  std::string db = work_.file("tuning.db");
  std::string args =
      " --trials 6 --batch 6 --repeat 1 --min-repeat-ms 0 --tuner random --in-graph 0"
      " --free-layout";
  CommandResult r = kiln("tune " + quote(model_) + " --tuning-log " + quote(db) + args);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("layout transform records"), std::string::npos) << r.out;
  size_t n = records_in(db);
  size_t transforms = 0;
  std::ifstream in(work_.file("export.jsonl"));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("target").get<std::string>().find("; measured=layout-transform") == std::string::npos)
      continue;
    ++transforms;
    EXPECT_EQ(j.at("error"), "ok");
    EXPECT_EQ(j.at("workload").get<std::string>().rfind("layout_transform(data=[1,", 0), 0u)
        << line;
  }
  EXPECT_GT(transforms, 0u);
  EXPECT_EQ(n, 6u + transforms);
  // They count no trial, and are not measured again.
  CommandResult again = kiln("tune " + quote(model_) + " --tuning-log " + quote(db) + args);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 trials"), std::string::npos) << again.out;
  EXPECT_EQ(again.out.find("layout transform records"), std::string::npos) << again.out;
  EXPECT_EQ(records_in(db), n);
  std::string pkg = work_.file("tiny.tar");
  CommandResult build = kiln("build " + quote(model_) + " -o " + quote(pkg) + " --tuning-log " +
                             quote(db) + " --require-tuned --layout-dp");
  ASSERT_EQ(build.status, 0) << build.err << build.out;
  EXPECT_TRUE(fs::exists(pkg));

  // Without --free-layout (the default, or --keep-layouts): no transform records.
  std::string plain_args =
      " --trials 6 --batch 6 --repeat 1 --min-repeat-ms 0 --tuner random --in-graph 0";
  for (const char* flag : {"", " --keep-layouts"}) {
    std::string kept = work_.file(std::string("kept") + (*flag ? "2" : "1") + ".db");
    ASSERT_EQ(
        kiln("tune " + quote(model_) + " --tuning-log " + quote(kept) + plain_args + flag).status,
        0);
    EXPECT_EQ(records_in(kept), 6u) << flag;
  }
}

// Ctrl-C while a batch is being measured: the tuner finishes the measurement
// in flight, stores what was measured, and exits 130.
TEST_F(KilnTune, InterruptStopsAfterTheMeasurementInFlight) {
  std::string db = work_.file("tuning.db");
  std::string cmd = "exec env KILN_LOGS_DIR='" + logs_.path().string() + "' '" + KILN_BINARY +
                    "' " + tune(db, 60) + " --batch 12 --min-repeat-ms 30 >/dev/null 2>&1";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the first round's records, then interrupt during the second.
  auto count = [&]() -> size_t {
    try {
      return tuner::RecordDB::open(db, tuner::RecordDB::Mode::kMustExist).count();
    } catch (const std::exception&) {
      return 0;
    }
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  size_t first_round = count();
  ASSERT_GT(first_round, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the second batch
  auto sent = std::chrono::steady_clock::now();
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  // Not the whole second round of 12 measurements of >= 30 ms x 1 repeat... only what was in
  // flight.
  EXPECT_LT(took, 5.0);
  size_t stored = count();
  EXPECT_GE(stored, first_round);
  EXPECT_LT(stored, 60u);
}

}  // namespace
}  // namespace kiln::test
