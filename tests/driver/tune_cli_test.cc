// `kiln tune`, `kiln records` and `kiln build --tuning-log` as a user runs
// them: records are stored as measured, a re-run resumes without measuring a
// config twice, --trials counts the total per task, and --require-tuned
// turns an untuned workload into an error that writes nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>

#include "driver_harness.h"

namespace kiln::test {
namespace {

// x[1, 8, 6, 6] -> Conv 3x3 (8 -> 16) -> Relu -> y: one conv2d_NCHWc task.
OnnxBuilder tiny_conv_model() {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {"1", "8", "6", "6"});
  b.output("y", {"1", "16", "6", "6"});
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
  CommandResult kiln(const std::string& args) { return run_kiln(args, tmp_, capture_); }
  // Quick measurements: the point is the bookkeeping, not the timing.
  std::string tune(const std::string& db, int trials) {
    return "tune " + quote(model_) + " --tuning-log " + quote(db) + " --trials " +
           std::to_string(trials) + " --batch 3 --repeat 1 --min-repeat-ms 0 --tuner random";
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
  ScratchDir work_, tmp_, capture_;
  std::string model_;
};

TEST_F(KilnTune, ResumesAndBuildsWithTheLog) {
  std::string db = work_.file("tuning.db");
  CommandResult first = kiln(tune(db, 4));
  ASSERT_EQ(first.status, 0) << first.err << first.out;
  EXPECT_NE(first.out.find("conv2d_NCHWc.x86"), std::string::npos) << first.out;
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

}  // namespace
}  // namespace kiln::test
