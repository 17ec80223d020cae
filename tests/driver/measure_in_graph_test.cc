// In-graph measurement (driver/measure_in_graph.h): the rounds it builds,
// and a real run on a small model that times every candidate it is given,
// both implementations of a 3x3 stride-1 conv included.
#include "driver/measure_in_graph.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <set>

#include "codegen/target.h"
#include "driver_harness.h"
#include "frontend/onnx_import.h"
#include "ops/op_template.h"

namespace kiln::test {
namespace {

using Rounds = std::vector<std::map<std::string, std::string>>;

TEST(InGraphRounds, ImplementationsTakeTurnsAndShortListsStartOver) {
  Rounds r = driver::in_graph_rounds(
      {{"A"}, {"D", "W"}, {"X"}}, {{"A", {"a1", "a2", "a3"}}, {"D", {"d1", "d2"}}, {"W", {"w1"}}});
  Rounds want = {
      {{"A", "a1"}, {"D", "d1"}}, {{"A", "a2"}, {"W", "w1"}}, {{"A", "a3"}, {"D", "d2"}}};
  EXPECT_EQ(r, want);
  // Four rounds: the single-candidate set repeats its config.
  r = driver::in_graph_rounds({{"A"}, {"B"}}, {{"A", {"a1", "a2", "a3", "a4"}}, {"B", {"b1"}}});
  ASSERT_EQ(r.size(), 4u);
  for (const auto& round : r) EXPECT_EQ(round.at("B"), "b1");
  EXPECT_EQ(r[3].at("A"), "a4");
  EXPECT_TRUE(driver::in_graph_rounds({{"A"}}, {{"Z", {"z1"}}}).empty());
}

// x -> Conv 3x3 s2 (8 -> 16) -> Relu -> Conv 3x3 s1 (16 -> 16) -> y
OnnxBuilder two_conv_model() {
  std::mt19937 rng(5);
  OnnxBuilder b;
  b.input("x", {"1", "8", "16", "16"});
  b.output("y", {"1", "16", "8", "8"});
  conv(b, "c1", "x", "a", {8, 16, 3, 3, 2, 1}, rng);
  b.node("Relu", "r1", {"a"}, {"b"});
  conv(b, "c2", "b", "y", {16, 16}, rng);
  return b;
}

// Up to n configs of w's space with the fallback's channel blocks, the fallback first.
std::vector<std::string> configs_of(const std::string& key, size_t n, std::mt19937_64& rng) {
  ops::Workload w = ops::Workload::parse(key);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::Config fb = t.fallback(w, codegen::Target::host().isa());
  std::vector<std::string> out = {fb.to_json()};
  for (int i = 0; i < 2000 && out.size() < n; ++i) {
    schedule::Config c = t.space(w).random(rng);
    if (ops::layout_blocks(t, w, c) != ops::layout_blocks(t, w, fb)) continue;
    if (!t.fits(w, c, codegen::Target::host().isa())) continue;
    if (std::find(out.begin(), out.end(), c.to_json()) == out.end()) out.push_back(c.to_json());
  }
  return out;
}

// two_conv_model() written to `path`; returns its nodes' implementation sets.
std::vector<std::vector<std::string>> write_two_conv_model(const std::string& path) {
  write_bytes(path, two_conv_model().bytes());
  return driver::template_workload_sets(frontend::import_onnx(path, {}),
                                        codegen::Target::host().isa());
}

TEST(MeasureInGraph, TimesEveryCandidateOfEveryImplementation) {
  ScratchDir work;
  std::string model = work.file("m.onnx");
  auto sets = write_two_conv_model(model);
  ASSERT_EQ(sets.size(), 2u);
  ASSERT_EQ(sets[1].size(), 2u) << "the 3x3 stride-1 conv has a Winograd implementation";
  std::mt19937_64 rng(1);
  std::map<std::string, std::vector<std::string>> cands;
  cands[sets[0][0]] = configs_of(sets[0][0], 3, rng);
  cands[sets[1][0]] = configs_of(sets[1][0], 2, rng);
  cands[sets[1][1]] = configs_of(sets[1][1], 2, rng);
  cands["conv2d_NCHWc.x86(not,in,this,model)"] = {"{}"};

  driver::InGraphOptions o;
  o.repeats = 4;
  int progress = 0;
  o.progress = [&](const std::string&) { ++progress; };
  driver::InGraphResult result = driver::measure_in_graph(model, cands, o);
  const std::vector<driver::InGraphTime>& times = result.times;
  EXPECT_EQ(progress, 4);  // rounds: max(3, 2 + 2)
  EXPECT_EQ(result.rounds, 4u);
  EXPECT_EQ(result.rounds_planned, 4u);
  size_t want = 0;
  for (const auto& s : sets)
    for (const std::string& k : s) want += cands[k].size();
  ASSERT_EQ(times.size(), want);
  for (const driver::InGraphTime& t : times) {
    const auto& list = cands.at(t.workload);
    EXPECT_NE(std::find(list.begin(), list.end(), t.config_json), list.end()) << t.config_json;
    // The first conv's first candidate runs in rounds 1 and 4: twice the repeats.
    EXPECT_GE(t.per_call_ms.size(), 4u);
    for (double ms : t.per_call_ms) EXPECT_GT(ms, 0);
  }
}

// A deadline already past keeps the first two rounds: each node's first two
// candidates (the isolated best and, from the tuner, the untuned config).
TEST(MeasureInGraph, ADeadlineKeepsTheRoundsThatFitAndAtLeastTwo) {
  ScratchDir work;
  std::string model = work.file("m.onnx");
  auto sets = write_two_conv_model(model);
  ASSERT_EQ(sets.size(), 2u);
  std::mt19937_64 rng(2);
  std::map<std::string, std::vector<std::string>> cands;
  cands[sets[0][0]] = configs_of(sets[0][0], 4, rng);
  cands[sets[1][0]] = configs_of(sets[1][0], 3, rng);
  driver::InGraphOptions o;
  o.repeats = 3;
  o.deadline = std::chrono::steady_clock::now();
  std::vector<std::string> lines;
  o.progress = [&](const std::string& line) { lines.push_back(line); };
  driver::InGraphResult result = driver::measure_in_graph(model, cands, o);
  EXPECT_EQ(result.rounds_planned, 4u);
  EXPECT_EQ(result.rounds, 2u);
  std::set<std::pair<std::string, std::string>> measured;
  for (const driver::InGraphTime& t : result.times) measured.insert({t.workload, t.config_json});
  std::set<std::pair<std::string, std::string>> want = {{sets[0][0], cands[sets[0][0]][0]},
                                                        {sets[0][0], cands[sets[0][0]][1]},
                                                        {sets[1][0], cands[sets[1][0]][0]},
                                                        {sets[1][0], cands[sets[1][0]][1]}};
  EXPECT_EQ(measured, want);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[1].find("fits 2 of the 4 rounds"), std::string::npos) << lines[1];
}

TEST(MeasureInGraph, RoundsThatFitCountOneBuildLessThanRounds) {
  // 6 planned; a build 2 s; 30 repeats are 10 visits of 4 runs, at 0.05 s: 2 s.
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 1000, 2, 0.05, 30), 6u);
  // n rounds: (n - 1) * 2 + n * 2 <= 10  ->  n = 3.
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 10, 2, 0.05, 30), 3u);
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 9.9, 2, 0.05, 30), 2u);
  // Never below two, nor above what is planned.
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 0, 2, 0.05, 30), 2u);
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, -5, 2, 0.05, 30), 2u);
  EXPECT_EQ(driver::in_graph_rounds_that_fit(1, 0, 2, 0.05, 30), 1u);
  EXPECT_EQ(driver::in_graph_rounds_that_fit(3, 1e9, 2, 0.05, 30), 3u);
  // Fewer repeats, more rounds: (8 + 2) / 4 s with 30 repeats; 4 repeats are
  // 2 visits (8 runs, 0.4 s), (8 + 2) / 2.4 s.
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 8, 2, 0.05, 30), 2u);
  EXPECT_EQ(driver::in_graph_rounds_that_fit(6, 8, 2, 0.05, 4), 4u);
}

}  // namespace
}  // namespace kiln::test
