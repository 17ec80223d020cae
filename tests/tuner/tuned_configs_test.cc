// Choosing a build's configs from records (tuner/tuned_configs.h): the
// database before the shipped logs, layout-consistent records before faster
// ones that change channel blocks, and borrowing from the nearest shape of the
// same template only when the config is legal there and the window, strides
// and pads agree.
#include "tuner/tuned_configs.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "support/version.h"
#include "tuner/config_match.h"
#include "tuner/in_graph_records.h"
#include "tuner/record_backend.h"
#include "tuner/records.h"
#include "tuner/target_key.h"

namespace kiln::tuner {
namespace {

ops::Workload conv(int64_t h, int64_t w, int64_t stride = 1) {
  return ops::Workload{"conv2d_NCHWc.x86",
                       {{"data", {1, 16, h, w}},
                        {"kernel", {32, 16, 3, 3}},
                        {"strides", {stride, stride}},
                        {"pads", {1, 1, 1, 1}},
                        {"dilation", {1, 1}}}};
}

const ops::OpTemplate& conv_template() { return ops::get_template("conv2d_NCHWc.x86"); }

Record record(const ops::Workload& w, const schedule::Config& cfg, double ms, int threads = 2) {
  TargetKey key = TargetKey::for_target(codegen::Target::host(), threads);
  Record r;
  r.workload_key = w.key();
  r.target_key = key.key();
  r.config_json = cfg.to_json();
  r.times_ms = {ms, ms};
  r.timestamp_unix = 1700000000;
  r.kiln_version = ::kiln::kiln_version();
  r.gflops = conv_template().flops(w) / (ms * 1e6);
  return r;
}

RecordSource source(const std::string& name, bool shipped, const std::vector<Record>& records) {
  RecordSource s;
  s.name = name;
  s.shipped = shipped;
  for (const Record& r : records) s.by_workload[r.workload_key].push_back(r);
  return s;
}

// A config of w's space whose channel blocks differ from the fallback's.
schedule::Config other_layout(const ops::Workload& w, std::mt19937_64& rng) {
  const ops::OpTemplate& t = conv_template();
  auto want = ops::layout_blocks(t, w, t.fallback(w, codegen::Target::host().isa()));
  for (int i = 0; i < 1000; ++i) {
    schedule::Config c = t.space(w).random(rng);
    if (ops::layout_blocks(t, w, c) != want) return c;
  }
  throw std::runtime_error("no config with other channel blocks");
}

// A config of w's space with the fallback's channel blocks, other than the fallback.
schedule::Config same_layout(const ops::Workload& w, std::mt19937_64& rng) {
  const ops::OpTemplate& t = conv_template();
  auto want = ops::layout_blocks(t, w, t.fallback(w, codegen::Target::host().isa()));
  for (int i = 0; i < 1000; ++i) {
    schedule::Config c = t.space(w).random(rng);
    if (ops::layout_blocks(t, w, c) == want && !(c == t.fallback(w, codegen::Target::host().isa())))
      return c;
  }
  throw std::runtime_error("no other config with the fallback's channel blocks");
}

// Two different such configs.
std::pair<schedule::Config, schedule::Config> two_same_layout(const ops::Workload& w,
                                                              std::mt19937_64& rng) {
  schedule::Config first = same_layout(w, rng), second = same_layout(w, rng);
  while (second == first) second = same_layout(w, rng);
  return {first, second};
}

TEST(PickBest, PrefersTheFallbacksChannelBlocksOverAFasterRelayout) {
  std::mt19937_64 rng(1);
  ops::Workload w = conv(14, 14);
  schedule::Config keep = same_layout(w, rng), relayout = other_layout(w, rng);
  std::vector<Record> records = {
      record(w, relayout, 0.5), record(w, keep, 0.9),
      record(w, conv_template().fallback(w, codegen::Target::host().isa()), 1.2)};
  std::optional<Record> best = pick_best(w.key(), records);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_json, keep.to_json());
  // With no record in the fallback's layout, the fastest of all.
  best = pick_best(w.key(), {records[0]});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->config_json, relayout.to_json());
}

TEST(PickBest, IgnoresFailuresAndConfigsOutsideTheSpace) {
  ops::Workload w = conv(14, 14);
  Record failed = record(w, conv_template().fallback(w, codegen::Target::host().isa()), 0.1);
  failed.error = ErrorClass::kWrongResult;
  failed.times_ms.clear();
  Record foreign = record(w, conv_template().fallback(w, codegen::Target::host().isa()), 0.1);
  foreign.config_json = R"({"knobs":{"tile_nothing":[1,2]}})";
  EXPECT_FALSE(pick_best(w.key(), {failed, foreign}));
}

TEST(ChooseConfigs, DatabaseBeforeShippedLogs) {
  std::mt19937_64 rng(2);
  ops::Workload a = conv(14, 14), b = conv(28, 28);
  schedule::Config ca = same_layout(a, rng), cb = same_layout(b, rng);
  RecordSource db = source("user.db", false, {record(a, ca, 1.0)});
  RecordSource shipped =
      source("logs/x.jsonl", true,
             {record(a, conv_template().fallback(a, codegen::Target::host().isa()), 0.5),
              record(b, cb, 2.0)});
  auto chosen = choose_configs({a.key(), b.key()}, {db, shipped}, false);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen.at(a.key()).origin, ConfigChoice::Origin::kDatabase);
  EXPECT_EQ(chosen.at(a.key()).config_json, ca.to_json());  // the user's, though slower
  EXPECT_EQ(chosen.at(a.key()).source, "user.db");
  EXPECT_EQ(chosen.at(b.key()).origin, ConfigChoice::Origin::kShippedLog);
  EXPECT_EQ(chosen.at(b.key()).source, "logs/x.jsonl");
}

TEST(ChooseConfigs, BorrowsTheNearestLegalShapesConfig) {
  std::mt19937_64 rng(3);
  // Donors: 16x14 (two rows more) and 56x14 (four times the rows).
  ops::Workload near = conv(16, 14), far = conv(56, 14), want = conv(14, 14);
  schedule::Config cn = same_layout(near, rng), cf = same_layout(far, rng);
  RecordSource db = source("user.db", false, {record(near, cn, 1.0), record(far, cf, 1.0)});
  auto chosen = choose_configs({want.key()}, {db}, true);
  ASSERT_EQ(chosen.count(want.key()), 1u);
  const ConfigChoice& c = chosen.at(want.key());
  EXPECT_EQ(c.origin, ConfigChoice::Origin::kBorrowed);
  EXPECT_EQ(c.borrowed_from, near.key());
  // Legal for the borrower and in its fallback's channel blocks.
  schedule::Config cfg = schedule::Config::from_json(conv_template().space(want), c.config_json);
  EXPECT_EQ(ops::layout_blocks(conv_template(), want, cfg),
            ops::layout_blocks(conv_template(), want,
                               conv_template().fallback(want, codegen::Target::host().isa())));
  // Borrowing off: nothing.
  EXPECT_TRUE(choose_configs({want.key()}, {db}, false).empty());
}

// Another ISA class's log: never used as it is, only borrowed, the same
// workload first, and only a config that fits the target's registers; the
// target's own class (a nearby shape) comes first.
TEST(ChooseConfigs, OtherIsaLogsOnlyLendConfigsThatFitTheTarget) {
  const Isa avx512 =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512").isa();
  const Isa avx2 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell").isa();
  ops::Workload w = conv(28, 28);
  const ops::OpTemplate& t = conv_template();
  std::pair<int64_t, int64_t> blocks = ops::fallback_layout_blocks(t, w);
  // Two configs in the fallback's layout: one fits AVX2's 16 ymm, one only
  // AVX-512's 32 zmm.
  std::optional<schedule::Config> small, wide;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000 && !(small && wide); ++i) {
    schedule::Config c = t.space(w).random(rng);
    if (ops::layout_blocks(t, w, c) != blocks) continue;
    bool fits2 = t.fits(w, c, avx2), fits512 = t.fits(w, c, avx512);
    if (fits2 && !small) small = c;
    if (!fits2 && fits512 && !wide) wide = c;
  }
  ASSERT_TRUE(small && wide);
  RecordSource log512 = source("logs/x86_64-avx512.jsonl", true, {record(w, *wide, 0.5)});
  log512.other_isa = true;
  log512.isa_class = "x86_64-avx512";
  // Not without the target's ISA, and not when the config does not fit.
  EXPECT_TRUE(choose_configs({w.key()}, {log512}, true).empty());
  EXPECT_TRUE(choose_configs({w.key()}, {log512}, true, &avx2).empty());
  EXPECT_TRUE(choose_configs({w.key()}, {log512}, false, &avx512).empty());  // borrowing off
  // A fitting one is borrowed, and says from which class.
  log512.by_workload[w.key()].push_back(record(w, *small, 0.6));
  auto chosen = choose_configs({w.key()}, {log512}, true, &avx2);
  ASSERT_EQ(chosen.count(w.key()), 1u);
  EXPECT_EQ(chosen.at(w.key()).origin, ConfigChoice::Origin::kBorrowed);
  EXPECT_EQ(chosen.at(w.key()).config_json, small->to_json());
  EXPECT_NE(chosen.at(w.key()).source.find("tuned for x86_64-avx512"), std::string::npos);
  // The target's own class at a nearby shape comes first.
  ops::Workload near = conv(30, 28);
  // One that w's space holds too (30 rows offer oh_reg 6, 28 rows 7).
  auto lendable = [&](const schedule::Config& c) {
    try {
      return t.fits(w, schedule::Config::from_json(t.space(w), c.to_json()), avx2);
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  schedule::Config cn = same_layout(near, rng);
  while (!lendable(cn)) cn = same_layout(near, rng);
  RecordSource own = source("logs/x86_64-avx2.jsonl", true, {record(near, cn, 1.0)});
  chosen = choose_configs({w.key()}, {own, log512}, true, &avx2);
  ASSERT_EQ(chosen.count(w.key()), 1u);
  EXPECT_EQ(chosen.at(w.key()).borrowed_from, near.key());
}

TEST(ChooseConfigs, NeverBorrowsAcrossStridesOrAnIllegalConfig) {
  std::mt19937_64 rng(4);
  ops::Workload strided = conv(14, 14, 2), want = conv(14, 14);
  RecordSource db = source("user.db", false, {record(strided, same_layout(strided, rng), 1.0)});
  EXPECT_TRUE(choose_configs({want.key()}, {db}, true).empty());

  // A donor whose output width 7 admits a width tile (7) that 6 does not.
  ops::Workload donor = conv(14, 7), small = conv(14, 6);
  const ops::OpTemplate& t = conv_template();
  schedule::ConfigSpace space = t.space(donor);
  std::optional<schedule::Config> illegal;
  for (int i = 0; i < 5000 && !illegal; ++i) {
    schedule::Config c = space.random(rng);
    bool legal = true;
    try {
      schedule::Config::from_json(t.space(small), c.to_json());
    } catch (const std::exception&) {
      legal = false;
    }
    if (!legal) illegal = c;
  }
  ASSERT_TRUE(illegal) << "every donor config fits the smaller shape";
  RecordSource only_illegal = source("user.db", false, {record(donor, *illegal, 1.0)});
  EXPECT_TRUE(choose_configs({small.key()}, {only_illegal}, true).empty());
}

TEST(LoadJsonl, KeepsTheMatchingThreadCountAndNamesBadLines) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_tc_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ops::Workload w = conv(14, 14);
  schedule::Config fb = conv_template().fallback(w, codegen::Target::host().isa());
  {
    std::ofstream out(dir / "logs.jsonl");
    out << record_to_json_line(record(w, fb, 1.0, 2)) << "\n"
        << record_to_json_line(record(w, fb, 3.0, 4)) << "\n";
  }
  RecordSource four = load_jsonl((dir / "logs.jsonl").string(), 4);
  EXPECT_TRUE(four.shipped);
  ASSERT_EQ(four.by_workload.at(w.key()).size(), 1u);
  EXPECT_EQ(four.by_workload.at(w.key())[0].times_ms[0], 3.0);
  // No record with 8 threads: all of them.
  EXPECT_EQ(load_jsonl((dir / "logs.jsonl").string(), 8).by_workload.at(w.key()).size(), 2u);
  {
    std::ofstream out(dir / "bad.jsonl");
    out << record_to_json_line(record(w, fb, 1.0)) << "\n{not json\n";
  }
  try {
    load_jsonl((dir / "bad.jsonl").string(), 2);
    ADD_FAILURE() << "a bad line was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(IsaClass, NamesTheShippedLogByVectorIsa) {
  EXPECT_EQ(
      isa_class(codegen::Target::parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512")),
      "x86_64-avx512");
  EXPECT_EQ(isa_class(codegen::Target::parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=haswell")),
            "x86_64-avx2");
  EXPECT_EQ(isa_class(codegen::Target::parse(
                "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512 -mattr=-avx512f")),
            "x86_64-avx2");
  codegen::Target arm;  // built by hand: this LLVM may lack the AArch64 backend
  arm.triple = "aarch64-unknown-linux-gnu";
  arm.cpu = "neoverse-n1";
  EXPECT_EQ(isa_class(arm), "");
}

}  // namespace
// --require-tuned asks for a record of one implementation per node: a 3x3
// conv whose direct workload is tuned passes though its Winograd alternative
// is not; a node with neither is named with both keys.
TEST(ConfigsForBuild, RequireTunedNeedsOneImplementationPerNode) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_require_impl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string db_path = (dir / "t.db").string();
  ops::Workload direct = conv(8, 8), other = conv(10, 10);
  ops::Workload winograd = direct, other_winograd = other;
  winograd.template_name = other_winograd.template_name = "conv2d_winograd_NCHWc.x86";
  {
    RecordDB db = RecordDB::open(db_path);
    db.add(record(direct, conv_template().fallback(direct, codegen::Target::host().isa()), 0.5,
                  kiln_get_num_threads()));
  }
  BuildRecordOptions o;
  o.tuning_log = db_path;
  o.shipped_logs = false;
  o.require_tuned = true;
  auto chosen =
      configs_for_build(o, codegen::Target::host(),
                        std::vector<std::vector<std::string>>{{direct.key(), winograd.key()}});
  EXPECT_EQ(chosen.count(direct.key()), 1u);
  EXPECT_EQ(chosen.count(winograd.key()), 0u);
  try {
    configs_for_build(o, codegen::Target::host(),
                      std::vector<std::vector<std::string>>{{direct.key(), winograd.key()},
                                                            {other.key(), other_winograd.key()}});
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("1 of 2 workloads"), std::string::npos) << m;
    EXPECT_NE(m.find(other.key() + " or " + other_winograd.key()), std::string::npos) << m;
    EXPECT_EQ(m.find(direct.key()), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

// A node's shipped-log (or borrowed) record of one implementation does not
// switch it away from its untuned default when its other implementation has
// none (the shipped logs predate Winograd); records for every implementation,
// or one in the user's database, still decide; --require-tuned keeps them.
TEST(ConfigsForBuild, ShippedRecordsOfOneImplementationKeepTheUntunedDefault) {
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_untuned_alt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto winograd_of = [](ops::Workload w) {
    w.template_name = "conv2d_winograd_NCHWc.x86";
    return w;
  };
  ops::Workload a = conv(8, 8), b = conv(10, 10), c = conv(12, 12);
  ops::Workload aw = winograd_of(a), bw = winograd_of(b), cw = winograd_of(c);
  const ops::OpTemplate& wt = ops::get_template("conv2d_winograd_NCHWc.x86");
  auto fallback_record = [&](const ops::Workload& w, const ops::OpTemplate& t) {
    Record r = record(a, conv_template().fallback(a, host.isa()), 0.5, threads);
    r.workload_key = w.key();
    r.config_json = t.fallback(w, host.isa()).to_json();
    r.gflops = t.flops(w) / 0.5e6;
    return r;
  };
  {
    std::ofstream log(dir / (isa_class(host) + ".jsonl"));
    for (const Record& r : {fallback_record(a, conv_template()),
                            fallback_record(b, conv_template()), fallback_record(bw, wt)})
      log << record_to_json_line(r) << "\n";
  }
  std::string db_path = (dir / "t.db").string();
  RecordDB::open(db_path).add(fallback_record(c, conv_template()));
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.tuning_log = db_path;
  o.borrow = false;
  std::vector<std::vector<std::string>> nodes{
      {a.key(), aw.key()}, {b.key(), bw.key()}, {c.key(), cw.key()}};
  auto chosen = configs_for_build(o, host, nodes);
  EXPECT_EQ(chosen.count(a.key()), 0u);  // shipped direct only: the untuned default runs
  EXPECT_EQ(chosen.count(b.key()), 1u);  // shipped records for both: they decide
  EXPECT_EQ(chosen.count(bw.key()), 1u);
  EXPECT_EQ(chosen.count(c.key()), 1u);  // the user's database: always counts
  EXPECT_EQ(chosen.count(cw.key()), 0u);
  // A node whose only implementation has a shipped record keeps it.
  EXPECT_EQ(
      configs_for_build(o, host, std::vector<std::vector<std::string>>{{a.key()}}).count(a.key()),
      1u);
  o.require_tuned = true;
  EXPECT_EQ(configs_for_build(o, host, nodes).count(a.key()), 1u);
  ::unsetenv("KILN_LOGS_DIR");
  std::filesystem::remove_all(dir);
}

// A log of the build CPU's own model (<class>.<cpu>.jsonl) comes before the
// class's log; another CPU model's log of the same class is neither used nor
// lent as another ISA class's records, and for a target of another class
// both files are that class's (borrowing only).
TEST(ConfigsForBuild, PrefersTheCpuModelsOwnShippedLog) {
  const codegen::Target host = codegen::Target::host();
  // The log's CPU name: LLVM's, or kiln's for a CPU LLVM 16 calls generic (Zen 5).
  const std::string cpu = codegen::cpu_model_name(host);
  if (isa_class(host).empty() || cpu.empty())
    GTEST_SKIP() << "no shipped log class or -mcpu for this CPU";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_cpu_log_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  std::mt19937_64 rng(5);
  ops::Workload a = conv(8, 8), b = conv(10, 10);
  auto [class_cfg, cpu_cfg] = two_same_layout(a, rng);
  const std::string cls = isa_class(host);
  auto write = [&](const std::string& name, const std::vector<Record>& records) {
    std::ofstream log(dir / name);
    for (const Record& r : records) log << record_to_json_line(r) << "\n";
  };
  // The class log's record is faster, but it was measured on another CPU.
  write(cls + ".jsonl", {record(a, class_cfg, 0.1, threads)});
  write(cls + "." + cpu + ".jsonl", {record(a, cpu_cfg, 0.5, threads)});
  write(cls + ".some-other-cpu.jsonl", {record(b, class_cfg, 0.1, threads)});
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  EXPECT_EQ(shipped_cpu_log_path(host), (dir / (cls + "." + cpu + ".jsonl")).string());
  BuildRecordOptions o;
  o.borrow = false;
  auto chosen = configs_for_build(o, host, std::vector<std::string>{a.key(), b.key()});
  ASSERT_EQ(chosen.count(a.key()), 1u);
  EXPECT_EQ(nlohmann::json::parse(chosen.at(a.key()).config_json),
            nlohmann::json::parse(cpu_cfg.to_json()));
  EXPECT_NE(chosen.at(a.key()).source.find(cpu), std::string::npos);
  EXPECT_EQ(chosen.count(b.key()), 0u);
  EXPECT_TRUE(other_isa_logs(host, threads).empty());
  // Another class's target sees both of this class's files as borrowable.
  codegen::Target other = codegen::Target::parse(
      cls == "x86_64-avx2" ? "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512"
                           : "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  std::vector<RecordSource> lent = other_isa_logs(other, threads);
  ASSERT_EQ(lent.size(), 3u);
  for (const RecordSource& s : lent) EXPECT_EQ(s.isa_class, cls) << s.name;
  EXPECT_EQ(shipped_cpu_log_path(other), "");
  ::unsetenv("KILN_LOGS_DIR");
  std::filesystem::remove_all(dir);
}

// With an ISA, the in-graph candidates hold the fallback config (once, in
// records' canonical text, second after the best), so that the in-graph step
// can keep the untuned build's choice when the tuned ones run slower in the
// model, even when a time budget cuts the step to its first two rounds.
TEST(InGraphCandidates, HoldTheFallbackConfigSecond) {
  using nlohmann::json;
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_in_graph_fb_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(12);
  ops::Workload w = conv(12, 12);
  const int threads = kiln_get_num_threads();
  TargetKey key = TargetKey::for_target(codegen::Target::host(), threads);
  const Isa isa = codegen::Target::host().isa();
  schedule::Config fb = ops::get_template(w.template_name).fallback(w, isa);
  schedule::Config a = same_layout(w, rng), b = same_layout(w, rng);
  while (a == fb) a = same_layout(w, rng);
  while (b == fb || b == a) b = same_layout(w, rng);
  std::string fallback = json::parse(fb.to_json()).dump();
  RecordDB db = RecordDB::open((dir / "t.db").string());
  db.add(record(w, a, 0.1, threads));
  db.add(record(w, b, 0.2, threads));
  EXPECT_EQ(in_graph_candidates(db, key.key(), {w.key()}, 5).at(w.key()).size(), 2u);
  std::vector<std::string> with =
      in_graph_candidates(db, key.key(), {w.key()}, 5, &isa).at(w.key());
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[1], fallback) << "second, after the best: a step cut short still times it";
  EXPECT_EQ(in_graph_candidates(db, key.key(), {w.key()}, 1, &isa).at(w.key()).size(), 2u);
  db.add(record(w, fb, 0.3, threads));  // the slowest record: moved up to second
  with = in_graph_candidates(db, key.key(), {w.key()}, 5, &isa).at(w.key());
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[1], fallback);
  db.add(record(w, fb, 0.05, threads));  // now the fastest record: first, not repeated
  with = in_graph_candidates(db, key.key(), {w.key()}, 5, &isa).at(w.key());
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[0], fallback);
  std::filesystem::remove_all(dir);
}

// Concurrent in-graph steps (issue 65, item 10): a workload with a config
// another live run claimed, or stored since this process started, is not
// granted; one step
// at a time holds the host's timing turn; another tuner of this host holding
// search claims is seen measuring, its in-graph candidate claims are not,
// and a dead one's claims are nobody's.
TEST(InGraphClaims, ShareTheCandidatesAndTakeTurns) {
  using nlohmann::json;
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln_in_graph_claims_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(13);
  ops::Workload w = conv(12, 12);
  auto [a, b] = two_same_layout(w, rng);
  schedule::Config c = same_layout(w, rng);
  while (c == a || c == b) c = same_layout(w, rng);
  const std::string ca = json::parse(a.to_json()).dump(), cb = json::parse(b.to_json()).dump(),
                    cc = json::parse(c.to_json()).dump();
  TargetKey key = TargetKey::for_target(codegen::Target::host(), kiln_get_num_threads());
  const std::string in_graph_key = key.in_graph().key();
  RecordDB db = RecordDB::open((dir / "t.db").string());
  {
    InGraphClaims first(db), second(db);
    auto mine = first.claim({{w.key(), {ca, cb}}}, in_graph_key);
    EXPECT_EQ(mine.at(w.key()), (std::vector<std::string>{ca, cb}));
    // Another model of the same run times the workload again.
    EXPECT_EQ(first.claim({{w.key(), {cb, ca}}}, in_graph_key).at(w.key()),
              (std::vector<std::string>{cb, ca}));
    // A workload goes whole to one run: the second gets none of it while
    // the first holds any of its candidates (or one of them was timed and
    // stored since this process started).
    Record timed = record(w, c, 0.1);
    timed.target_key = in_graph_key;
    timed.timestamp_unix = process_start_unix();
    db.add(timed);
    EXPECT_TRUE(second.claim({{w.key(), {ca, cb, cc}}}, in_graph_key).empty());
    EXPECT_TRUE(second.claim({{w.key(), {cc}}}, in_graph_key).empty());
    // An earlier run's in-graph record does not keep a config from being timed again.
    schedule::Config d = same_layout(w, rng);
    while (d == a || d == b || d == c) d = same_layout(w, rng);
    const std::string cd = json::parse(d.to_json()).dump();
    Record old = record(w, d, 0.2);
    old.target_key = in_graph_key;
    old.timestamp_unix = process_start_unix() - 3600;
    db.add(old);
    EXPECT_EQ(second.claim({{w.key(), {cd}}}, in_graph_key).at(w.key()),
              std::vector<std::string>{cd});
    // One turn at a time; released, the other may take it.
    EXPECT_EQ(first.try_take_turn(), 0);
    EXPECT_EQ(second.try_take_turn(), static_cast<int64_t>(::getpid()));
    first.release_turn();
    EXPECT_EQ(second.try_take_turn(), 0);
    second.release_turn();
    // Claims of this process are never "another tuner measuring".
    EXPECT_EQ(first.other_local_measurer(), 0);
  }
  EXPECT_TRUE(db.live_claim_holders().empty()) << "released with the objects";

  // Another process of this host: search claims mean it measures, its
  // in-graph candidate claims do not; once it is gone, nobody measures.
  pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  const std::string other = std::to_string(child) + "@" + this_host() + "/feedface";
  InGraphClaims claims(db);
  db.claim(w.key(), in_graph_claim_key(in_graph_key), {cc}, other);
  EXPECT_EQ(claims.other_local_measurer(), 0);
  db.claim(w.key(), key.key(), {cb}, other);
  EXPECT_EQ(claims.other_local_measurer(), static_cast<int64_t>(child));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(claims.other_local_measurer(), 0);
  std::filesystem::remove_all(dir);
}

// In-graph records (kiln tune's last step) outrank the isolated ones of the
// same workload in a build; candidates for that step keep the channel blocks.
TEST(ConfigsForBuild, PrefersInGraphRecordsAndCandidatesKeepTheLayout) {
  using nlohmann::json;
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_in_graph_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string db_path = (dir / "t.db").string();
  std::mt19937_64 rng(11);
  ops::Workload w = conv(12, 12);
  const int threads = kiln_get_num_threads();
  auto [fast_alone, fast_in_graph] = two_same_layout(w, rng);
  schedule::Config relayout = other_layout(w, rng);
  TargetKey key = TargetKey::for_target(codegen::Target::host(), threads);
  {
    RecordDB db = RecordDB::open(db_path);
    db.add(record(w, relayout, 0.1, threads));  // fastest, but other channel blocks
    db.add(record(w, fast_alone, 0.2, threads));
    db.add(record(w, fast_in_graph, 0.3, threads));
    // Candidates: distinct, fastest first, the relayout left out.
    auto cands = in_graph_candidates(db, key.key(), {w.key(), w.key()}, 5);
    ASSERT_EQ(cands.size(), 1u);
    const std::vector<std::string>& got = cands.at(w.key());
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(json::parse(got[0]), json::parse(fast_alone.to_json()));
    EXPECT_EQ(json::parse(got[1]), json::parse(fast_in_graph.to_json()));
    EXPECT_EQ(in_graph_candidates(db, key.key(), {w.key()}, 1).at(w.key()).size(), 1u);
  }
  BuildRecordOptions o;
  o.tuning_log = db_path;
  o.shipped_logs = false;
  EXPECT_EQ(
      json::parse(configs_for_build(o, codegen::Target::host(), {w.key()}).at(w.key()).config_json),
      json::parse(fast_alone.to_json()));
  {
    RecordDB db = RecordDB::open(db_path);
    // One spike among 10 repeats does not decide: medians of 5.
    db.add(in_graph_record(w.key(), key.in_graph().key(), fast_alone.to_json(),
                           {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}));
    db.add(in_graph_record(w.key(), key.in_graph().key(), fast_in_graph.to_json(),
                           {0.4, 9.0, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 9.0, 0.4}));
    // Trials and the tuner's view are unchanged.
    EXPECT_EQ(db.records(w.key(), key.key()).size(), 3u);
  }
  ConfigChoice c = configs_for_build(o, codegen::Target::host(), {w.key()}).at(w.key());
  EXPECT_EQ(json::parse(c.config_json), json::parse(fast_in_graph.to_json()));
  EXPECT_NE(c.source.find("(in-graph)"), std::string::npos) << c.source;
  EXPECT_NEAR(c.gflops, conv_template().flops(w) / (0.4 * 1e6), 1e-6);
  EXPECT_THROW(in_graph_record(w.key(), key.key(), fast_alone.to_json(), {1.0}),
               std::invalid_argument);
  EXPECT_THROW(in_graph_record(w.key(), key.in_graph().key(), fast_alone.to_json(), {}),
               std::invalid_argument);
  std::filesystem::remove_all(dir);
}

// Isolated times taken with cold weights (kiln tune --cold-weights) are kept
// apart from warm ones: a build reads them after the in-graph records and
// before the warm isolated ones, and the in-graph step's candidates come from
// the key of the run's own measurement.
TEST(ConfigsForBuild, PrefersColdWeightRecordsToWarmOnes) {
  using nlohmann::json;
  auto dir = std::filesystem::temp_directory_path() / ("kiln_cold_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string db_path = (dir / "t.db").string();
  std::mt19937_64 rng(12);
  ops::Workload w = conv(12, 12);
  const int threads = kiln_get_num_threads();
  auto [fast_warm, fast_cold] = two_same_layout(w, rng);
  TargetKey key = TargetKey::for_target(codegen::Target::host(), threads);
  std::string cold_key = key.isolated(true).key();
  EXPECT_EQ(cold_key, key.key() + "; measured=cold-weights");
  EXPECT_EQ(TargetKey::parse(cold_key), key.isolated(true));
  EXPECT_EQ(key.isolated(true).isolated(false), key);
  auto cold = [&](const schedule::Config& cfg, double ms) {
    Record r = record(w, cfg, ms, threads);
    r.target_key = cold_key;
    return r;
  };
  BuildRecordOptions o;
  o.tuning_log = db_path;
  o.shipped_logs = false;
  auto chosen = [&] {
    return configs_for_build(o, codegen::Target::host(), {w.key()}).at(w.key());
  };
  {
    RecordDB db = RecordDB::open(db_path);
    db.add(record(w, fast_warm, 0.1, threads));
    db.add(record(w, fast_cold, 0.3, threads));
    db.add(cold(fast_warm, 0.9));  // its weights from memory: slow
    db.add(cold(fast_cold, 0.5));
    EXPECT_EQ(json::parse(in_graph_candidates(db, cold_key, {w.key()}, 1).at(w.key()).at(0)),
              json::parse(fast_cold.to_json()));
    EXPECT_EQ(json::parse(in_graph_candidates(db, key.key(), {w.key()}, 1).at(w.key()).at(0)),
              json::parse(fast_warm.to_json()));
  }
  ConfigChoice c = chosen();
  EXPECT_EQ(json::parse(c.config_json), json::parse(fast_cold.to_json()));
  EXPECT_NE(c.source.find("(cold weights)"), std::string::npos) << c.source;
  {
    RecordDB db = RecordDB::open(db_path);
    db.add(in_graph_record(w.key(), key.in_graph().key(), fast_warm.to_json(), {0.2, 0.2, 0.2}));
    db.add(in_graph_record(w.key(), key.in_graph().key(), fast_cold.to_json(), {0.4, 0.4, 0.4}));
  }
  c = chosen();  // in-graph times outrank both isolated kinds
  EXPECT_EQ(json::parse(c.config_json), json::parse(fast_warm.to_json()));
  EXPECT_NE(c.source.find("(in-graph)"), std::string::npos) << c.source;
  std::filesystem::remove_all(dir);
}

// A shipped log exported from a tuned database holds both measurements; a
// build takes its in-graph records first, as it does the database's, so that
// it runs what ran fastest inside the models on the CPU the log was made on.
// Neither source mixes in the other's times, nor layout transforms' times.
TEST(ConfigsForBuild, PrefersAShippedLogsInGraphRecords) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln_shipped_in_graph_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  std::mt19937_64 rng(17);
  ops::Workload a = conv(12, 12), b = conv(10, 10), c = conv(14, 14);
  auto [fast_alone, fast_in_graph] = two_same_layout(a, rng);
  // b's record holds a config of b's own space (a's may name a tile b's lacks).
  schedule::Config b_alone = same_layout(b, rng);
  TargetKey key = TargetKey::for_target(host, threads);
  const std::string log = (dir / (isa_class(host) + ".jsonl")).string();
  {
    std::ofstream out(log);
    out << record_to_json_line(record(a, fast_alone, 0.2, threads)) << "\n"
        << record_to_json_line(record(a, fast_in_graph, 0.3, threads)) << "\n"
        << record_to_json_line(in_graph_record(a.key(), key.in_graph().key(), fast_alone.to_json(),
                                               {0.5, 0.5, 0.5}))
        << "\n"
        << record_to_json_line(in_graph_record(a.key(), key.in_graph().key(),
                                               fast_in_graph.to_json(), {0.4, 0.4, 0.4}))
        << "\n"
        // The untuned config, timed in the same step (a build on a shipped log
        // needs it: ShippedInGraphRecordsNeedTodaysUntunedConfig).
        << record_to_json_line(
               in_graph_record(a.key(), key.in_graph().key(),
                               ops::get_template(a.template_name).fallback(a, host.isa()).to_json(),
                               {0.6, 0.6, 0.6}))
        << "\n";
    // b has isolated records only; a layout transform's time is no config's.
    Record transform = record(b, b_alone, 0.01, threads);
    transform.target_key = key.key() + "; measured=" + TargetKey::kLayoutTransform;
    out << record_to_json_line(record(b, b_alone, 0.2, threads)) << "\n"
        << record_to_json_line(transform) << "\n";
    // Cold-weight isolated times: b's are not mixed with its warm one; c has
    // only those, and they stand in for warm ones.
    for (const ops::Workload& w : {b, c}) {
      Record cold = record(w, fast_in_graph, 0.05, threads);
      cold.target_key = key.isolated(true).key();
      out << record_to_json_line(cold) << "\n";
    }
  }
  RecordSource isolated = load_jsonl(log, threads);
  RecordSource in_graph = load_jsonl(log, threads, JsonlMeasurement::kInGraph);
  EXPECT_EQ(isolated.by_workload.at(a.key()).size(), 2u);
  ASSERT_EQ(isolated.by_workload.at(b.key()).size(), 1u);
  EXPECT_EQ(isolated.by_workload.at(b.key())[0].target_key, key.key());
  ASSERT_EQ(isolated.by_workload.at(c.key()).size(), 1u);
  EXPECT_EQ(isolated.by_workload.at(c.key())[0].target_key, key.isolated(true).key());
  ASSERT_EQ(in_graph.by_workload.size(), 1u);
  EXPECT_EQ(in_graph.by_workload.at(a.key()).size(), 3u);
  EXPECT_EQ(in_graph.name, log + " (in-graph)");

  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.borrow = false;
  auto chosen = configs_for_build(o, host, std::vector<std::string>{a.key(), b.key()});
  ::unsetenv("KILN_LOGS_DIR");
  ASSERT_EQ(chosen.count(a.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(a.key()).config_json), json::parse(fast_in_graph.to_json()));
  EXPECT_EQ(chosen.at(a.key()).source, log + " (in-graph)");
  EXPECT_EQ(chosen.at(a.key()).origin, ConfigChoice::Origin::kShippedLog);
  ASSERT_EQ(chosen.count(b.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(b.key()).config_json), json::parse(b_alone.to_json()));
  EXPECT_EQ(chosen.at(b.key()).source, log);
  std::filesystem::remove_all(dir);
}

// kiln tune's closing estimate: per node, the fastest in-graph record of any of
// its implementations against its untuned default (the first implementation's
// fallback); a workload used by two nodes counts twice, a node without a
// record of its default not at all.
TEST(InGraphEstimate, CountsEachNodesBestAgainstItsUntunedDefault) {
  const Isa isa = codegen::Target::host().isa();
  const TargetKey key = TargetKey::for_target(codegen::Target::host(), 2);
  std::mt19937_64 rng(23);
  auto canonical = [](const schedule::Config& c) {
    return nlohmann::json::parse(c.to_json()).dump();
  };
  auto rec = [&](const ops::Workload& w, const std::string& config, double ms) {
    return in_graph_record(w.key(), key.in_graph().key(), config, std::vector<double>(5, ms));
  };
  ops::Workload a = conv(12, 12), b = conv(10, 10), c = conv(8, 8), d = conv(6, 6);
  ops::Workload b_winograd = b;
  b_winograd.template_name = "conv2d_winograd_NCHWc.x86";
  auto fallback = [&](const ops::Workload& w) {
    return canonical(ops::get_template(w.template_name).fallback(w, isa));
  };
  std::vector<Record> records = {
      rec(a, fallback(a), 1.0), rec(a, canonical(same_layout(a, rng)), 0.8),
      // b's untuned default is Winograd; its direct implementation is faster.
      rec(b_winograd, fallback(b_winograd), 0.5), rec(b, canonical(same_layout(b, rng)), 0.4),
      // c has no record of its fallback; d's fallback stays the fastest.
      rec(c, canonical(same_layout(c, rng)), 0.1), rec(d, fallback(d), 0.3),
      rec(d, canonical(same_layout(d, rng)), 0.35)};
  InGraphEstimate e = estimate_in_graph(
      {{a.key()}, {b_winograd.key(), b.key()}, {a.key()}, {c.key()}, {d.key()}}, records, isa);
  EXPECT_EQ(e.nodes, 4u);
  EXPECT_EQ(e.tuned_nodes, 3u);
  EXPECT_NEAR(e.tuned_ms, 0.8 + 0.4 + 0.8 + 0.3, 1e-9);
  EXPECT_NEAR(e.untuned_ms, 1.0 + 0.5 + 1.0 + 0.3, 1e-9);
  // A tuned config 1 % faster is no win: the node counts as untuned.
  e = estimate_in_graph(
      {{d.key()}}, {rec(d, fallback(d), 0.3), rec(d, canonical(same_layout(d, rng)), 0.297)}, isa);
  EXPECT_EQ(e.nodes, 1u);
  EXPECT_EQ(e.tuned_nodes, 0u);
  EXPECT_NEAR(e.tuned_ms, 0.3, 1e-9);
}

// clearly_faster: a margin over the untuned config's median, and with
// enough times a rank test corrected for the node's number of candidates.
TEST(ClearlyFaster, NeedsTheMarginAndTheRankTest) {
  auto rec = [](std::vector<double> t) {
    Record r;
    r.times_ms = std::move(t);
    return r;
  };
  const Record untuned = rec({1.00, 1.01, 0.99, 1.02, 1.00, 0.98});
  const Record faster = rec({0.90, 0.91, 0.89, 0.92, 0.90, 0.88});
  EXPECT_TRUE(clearly_faster(faster, untuned, 1));
  EXPECT_TRUE(clearly_faster(faster, untuned, 7));  // p = 1/924
  EXPECT_FALSE(clearly_faster(untuned, faster, 1));
  // Every time lower, but by 1 %: within what builds differ by.
  EXPECT_FALSE(clearly_faster(rec({0.99, 1.00, 0.98, 1.01, 0.99, 0.97}), untuned, 1));
  // A lower median from a wide spread: U = 24 of 36, p about 0.2.
  EXPECT_FALSE(clearly_faster(rec({0.80, 0.85, 0.86, 0.90, 1.05, 1.10}), untuned, 1));
  // U = 32 of 36, p = 12/924: enough against one rival, not against seven.
  const Record mostly = rec({0.90, 0.91, 0.92, 0.93, 0.94, 1.005});
  EXPECT_TRUE(clearly_faster(mostly, untuned, 1));
  EXPECT_FALSE(clearly_faster(mostly, untuned, 7));
  // Too few times for a rank test: the margin alone.
  EXPECT_TRUE(clearly_faster(rec({0.9}), rec({1.0}), 3));
  EXPECT_FALSE(clearly_faster(rec({0.98}), rec({1.0}), 1));
  EXPECT_FALSE(clearly_faster(rec({}), rec({1.0}), 1));
}

// kiln tune's in-graph step times the untuned config beside the tuned ones;
// a build keeps the untuned config of a node unless the tuned one it would
// take, of either implementation, ran clearly faster.
TEST(ConfigsForBuild, InGraphTiesKeepTheUntunedConfig) {
  using nlohmann::json;
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_in_graph_ties_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db_path = (dir / "t.db").string();
  const codegen::Target host = codegen::Target::host();
  const Isa isa = host.isa();
  const int threads = kiln_get_num_threads();
  const TargetKey key = TargetKey::for_target(host, threads);
  std::mt19937_64 rng(31);
  // 30 repeats about `ms`, 1 % apart: 6 group medians, as the step stores.
  auto times = [&](double ms) {
    std::uniform_real_distribution<double> noise(-0.01, 0.01);
    std::vector<double> t(30);
    for (double& x : t) x = ms * (1 + noise(rng));
    return t;
  };
  auto add = [&](const ops::Workload& w, const schedule::Config& cfg, double ms) {
    RecordDB db = RecordDB::open(db_path);
    db.add(in_graph_record(w.key(), key.in_graph().key(), cfg.to_json(), times(ms)));
  };
  auto fallback = [&](const ops::Workload& w) {
    return ops::get_template(w.template_name).fallback(w, isa);
  };
  // One implementation: a tuned config 1 % faster than the untuned one.
  ops::Workload a = conv(12, 12);
  auto [tied, clear] = two_same_layout(a, rng);
  add(a, fallback(a), 1.0);
  add(a, tied, 0.99);
  {
    // An earlier step's time of the untuned config, on a slower day: not
    // what this step's candidates are compared with.
    Record earlier =
        in_graph_record(a.key(), key.in_graph().key(), fallback(a).to_json(), times(2.0));
    earlier.timestamp_unix -= 3600;
    RecordDB db = RecordDB::open(db_path);
    db.add(earlier);
  }
  BuildRecordOptions o;
  o.tuning_log = db_path;
  o.shipped_logs = false;
  o.borrow = false;
  auto chosen = [&](const std::vector<std::vector<std::string>>& sets) {
    return configs_for_build(o, host, sets);
  };
  ConfigChoice c = chosen({{a.key()}}).at(a.key());
  EXPECT_EQ(json::parse(c.config_json), json::parse(fallback(a).to_json()));
  EXPECT_TRUE(c.kept_untuned);
  EXPECT_NE(c.source.find("(in-graph)"), std::string::npos) << c.source;
  EXPECT_EQ(summarize_choices({a.key()}, chosen({{a.key()}})).kept_untuned, 1u);
  add(a, clear, 0.8);
  c = chosen({{a.key()}}).at(a.key());
  EXPECT_EQ(json::parse(c.config_json), json::parse(clear.to_json()));
  EXPECT_FALSE(c.kept_untuned);
  EXPECT_EQ(summarize_choices({a.key()}, chosen({{a.key()}})).kept_untuned, 0u);

  // Two implementations, Winograd the untuned default: a direct config that
  // ties Winograd's fallback leaves the node on it, the direct one unchosen.
  ops::Workload b = conv(10, 10), b_winograd = b;
  b_winograd.template_name = "conv2d_winograd_NCHWc.x86";
  schedule::Config direct = same_layout(b, rng);
  add(b_winograd, fallback(b_winograd), 0.5);
  add(b, direct, 0.495);
  auto both = chosen({{b_winograd.key(), b.key()}});
  ASSERT_EQ(both.count(b_winograd.key()), 1u);
  EXPECT_EQ(both.count(b.key()), 0u);
  EXPECT_EQ(json::parse(both.at(b_winograd.key()).config_json),
            json::parse(fallback(b_winograd).to_json()));
  EXPECT_TRUE(both.at(b_winograd.key()).kept_untuned);
  // Without the in-graph time of the untuned config there is nothing to
  // keep: the fastest record wins, as before.
  both = chosen({{b.key()}});
  ASSERT_EQ(both.count(b.key()), 1u);
  EXPECT_FALSE(both.at(b.key()).kept_untuned);
  // A direct config clearly faster than Winograd's untuned one is the node's.
  schedule::Config faster = same_layout(b, rng);
  while (faster == direct) faster = same_layout(b, rng);
  add(b, faster, 0.4);
  both = chosen({{b_winograd.key(), b.key()}});
  ASSERT_EQ(both.count(b.key()), 1u);
  EXPECT_EQ(json::parse(both.at(b.key()).config_json), json::parse(faster.to_json()));
  EXPECT_FALSE(both.at(b.key()).kept_untuned);
  std::filesystem::remove_all(dir);
}

// A shipped log's in-graph record stands only against today's untuned config
// timed in the same step. Where the step timed none (a log made before the
// step timed it, or one made against an older fallback), the node runs its
// fallback, unconfigured, and the build says why in one note per log. A
// log's record that is today's untuned config stands; the user's database
// keeps its records either way (its step may have been cut short), with a
// note that says how to re-time them.
TEST(ConfigsForBuild, ShippedInGraphRecordsNeedTodaysUntunedConfig) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_stale_log_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  const TargetKey key = TargetKey::for_target(host, threads);
  const std::string ig = key.in_graph().key();
  std::mt19937_64 rng(53);
  auto fallback = [&](const ops::Workload& w) {
    return ops::get_template(w.template_name).fallback(w, host.isa());
  };
  // a: a tuned record alone. b: a tuned record beside another untuned config
  // (an older fallback). c: a tuned record clearly faster than today's
  // untuned one. d: today's untuned config alone, the step's pick.
  ops::Workload a = conv(12, 12), b = conv(10, 10), c = conv(14, 14), d = conv(16, 16);
  schedule::Config a_tuned = same_layout(a, rng), c_tuned = same_layout(c, rng);
  while (a_tuned == fallback(a)) a_tuned = same_layout(a, rng);
  while (c_tuned == fallback(c)) c_tuned = same_layout(c, rng);
  auto [b_tuned, b_old_untuned] = two_same_layout(b, rng);
  while (b_tuned == fallback(b) || b_old_untuned == fallback(b))
    std::tie(b_tuned, b_old_untuned) = two_same_layout(b, rng);
  const std::vector<Record> records = {
      in_graph_record(a.key(), ig, a_tuned.to_json(), std::vector<double>(6, 0.5)),
      in_graph_record(b.key(), ig, b_tuned.to_json(), std::vector<double>(6, 0.5)),
      in_graph_record(b.key(), ig, b_old_untuned.to_json(), std::vector<double>(6, 0.9)),
      in_graph_record(c.key(), ig, c_tuned.to_json(), std::vector<double>(6, 0.5)),
      in_graph_record(c.key(), ig, fallback(c).to_json(), std::vector<double>(6, 0.9)),
      in_graph_record(d.key(), ig, fallback(d).to_json(), std::vector<double>(6, 0.5))};
  const std::string log = (dir / (isa_class(host) + ".jsonl")).string();
  {
    std::ofstream out(log);
    for (const Record& r : records) out << record_to_json_line(r) << "\n";
  }
  const std::vector<std::vector<std::string>> nodes = {{a.key()}, {b.key()}, {c.key()}, {d.key()}};
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.borrow = false;
  std::vector<std::string> notes;
  auto chosen = configs_for_build(o, host, nodes, &notes);
  EXPECT_EQ(chosen.count(a.key()), 0u);
  EXPECT_EQ(chosen.count(b.key()), 0u);
  ASSERT_EQ(chosen.count(c.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(c.key()).config_json), json::parse(c_tuned.to_json()));
  ASSERT_EQ(chosen.count(d.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(d.key()).config_json), json::parse(fallback(d).to_json()));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("2 workloads run their fallback config: " + log + " (in-graph)", 0), 0u)
      << notes[0];
  // --require-tuned: the two count as untuned.
  o.require_tuned = true;
  try {
    configs_for_build(o, host, nodes);
    ADD_FAILURE() << "expected --require-tuned to fail";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("2 of 4 workloads"), std::string::npos) << e.what();
  }
  ::unsetenv("KILN_LOGS_DIR");

  // The same records in the user's database: each node takes its record.
  {
    RecordDB db = RecordDB::open((dir / "t.db").string());
    for (const Record& r : records) db.add(r);
  }
  BuildRecordOptions own;
  own.tuning_log = (dir / "t.db").string();
  own.shipped_logs = false;
  own.borrow = false;
  notes.clear();
  chosen = configs_for_build(own, host, nodes, &notes);
  EXPECT_EQ(chosen.size(), 4u);
  EXPECT_EQ(json::parse(chosen.at(a.key()).config_json), json::parse(a_tuned.to_json()));
  EXPECT_EQ(json::parse(chosen.at(b.key()).config_json), json::parse(b_tuned.to_json()));
  // One note names the two picks that no step weighed against today's
  // untuned config, and says how to re-time them.
  // (Another note says the database holds no isolated records.)
  auto re_time = std::find_if(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("without a record of today's untuned config") != std::string::npos;
  });
  ASSERT_NE(re_time, notes.end());
  EXPECT_EQ(
      re_time->rfind("2 workloads take their config from " + own.tuning_log + " (in-graph)", 0), 0u)
      << *re_time;
  EXPECT_NE(re_time->find("`kiln tune` with this database re-times them"), std::string::npos)
      << *re_time;
  for (const std::string& n : notes) EXPECT_EQ(n.find("fallback config"), std::string::npos) << n;
  std::filesystem::remove_all(dir);
}

// A shipped log's in-graph records of both implementations of a node, from
// one step, where the direct config only ties Winograd's untuned one: the node
// keeps Winograd's untuned config and the build counts it as kept (configured),
// not as a node without records (ResNet-18's 256-channel 3x3 convolutions on
// the AVX-512 log of 2026-12-01 were reported among the fallback configs).
TEST(ConfigsForBuild, ShippedInGraphTieOfTwoImplementationsCountsAsKept) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_shipped_tie_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const TargetKey key = TargetKey::for_target(host, kiln_get_num_threads());
  const std::string ig = key.in_graph().key();
  std::mt19937_64 rng(59);
  ops::Workload direct = conv(10, 10), winograd = direct;
  winograd.template_name = "conv2d_winograd_NCHWc.x86";
  const schedule::Config winograd_untuned =
      ops::get_template(winograd.template_name).fallback(winograd, host.isa());
  const schedule::Config direct_tuned = same_layout(direct, rng);
  {
    std::ofstream out(dir / (isa_class(host) + ".jsonl"));
    for (const Record& r :
         {in_graph_record(winograd.key(), ig, winograd_untuned.to_json(),
                          std::vector<double>(6, 0.5)),
          in_graph_record(direct.key(), ig, direct_tuned.to_json(), std::vector<double>(6, 0.495))})
      out << record_to_json_line(r) << "\n";
  }
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.borrow = false;
  std::vector<std::string> notes;
  const std::vector<std::vector<std::string>> nodes = {{winograd.key(), direct.key()}};
  auto chosen = configs_for_build(o, host, nodes, &notes);
  ::unsetenv("KILN_LOGS_DIR");
  ASSERT_EQ(chosen.count(winograd.key()), 1u);
  EXPECT_EQ(chosen.count(direct.key()), 0u);
  EXPECT_EQ(json::parse(chosen.at(winograd.key()).config_json),
            json::parse(winograd_untuned.to_json()));
  EXPECT_TRUE(chosen.at(winograd.key()).kept_untuned);
  const TunedSummary s = summarize_choices({winograd.key(), direct.key()}, chosen);
  EXPECT_EQ(s.tuned, 1u);
  EXPECT_EQ(s.kept_untuned, 1u);
  EXPECT_TRUE(notes.empty()) << notes.front();
  std::filesystem::remove_all(dir);
}

// A config's text as a space that has since grown stored it: another index
// (every index shifts when a knob gains a value), and without the knobs
// added later whose value is their first (records made before them).
std::string as_stored_by_an_older_space(const schedule::Config& cfg) {
  nlohmann::json j = nlohmann::json::parse(cfg.to_json());
  j["index"] = j["index"].get<int64_t>() + 977;
  for (const char* added_later : {"rolled_reduction", "oc_group", "plane_rows"})
    if (j["knobs"].contains(added_later) && j["knobs"][added_later] == 0)
      j["knobs"].erase(added_later);
  return j.dump();
}

TEST(ConfigMatcher, ReadsBothTextsThroughTodaysSpace) {
  const codegen::Target host = codegen::Target::host();
  ops::Workload w = conv(14, 14);
  const schedule::Config fallback = conv_template().fallback(w, host.isa());
  const ConfigMatcher m(w.key(), fallback.to_json());
  EXPECT_TRUE(m.matches(fallback.to_json()));
  EXPECT_TRUE(m.matches(as_stored_by_an_older_space(fallback)));
  std::mt19937_64 rng(61);
  EXPECT_FALSE(m.matches(same_layout(w, rng).to_json()));
  EXPECT_FALSE(m.matches(R"({"knobs": {"no_such_knob": 1}})"));
  // A workload this kiln cannot read: the texts, as JSON.
  const ConfigMatcher text("no_such_template(x=[1])", R"({"knobs": {"a": 1, "b": 2}})");
  EXPECT_TRUE(text.matches(R"({"knobs":{"b":2,"a":1}})"));
  EXPECT_FALSE(text.matches(R"({"knobs":{"b":2,"a":3}})"));
}

// A shipped log made before the space grew: its in-graph records of the
// untuned config still weigh its picks (a clear win is taken, a tie keeps
// the untuned config), with no note. Matched by text, every such log's
// picks ran their fallback after conv2d_NCHWc's oh_reg gained 7.
TEST(ConfigsForBuild, ShippedInGraphRecordsOfAnOlderSpaceStillWeighTheirPicks) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_older_space_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const TargetKey key = TargetKey::for_target(host, kiln_get_num_threads());
  const std::string ig = key.in_graph().key();
  std::mt19937_64 rng(67);
  ops::Workload win = conv(14, 14), tie = conv(12, 12);
  const schedule::Config win_untuned = conv_template().fallback(win, host.isa());
  const schedule::Config tie_untuned = conv_template().fallback(tie, host.isa());
  schedule::Config win_tuned = same_layout(win, rng), tie_tuned = same_layout(tie, rng);
  {
    std::ofstream out(dir / (isa_class(host) + ".jsonl"));
    for (const Record& r : {in_graph_record(win.key(), ig, as_stored_by_an_older_space(win_tuned),
                                            std::vector<double>(6, 0.5)),
                            in_graph_record(win.key(), ig, as_stored_by_an_older_space(win_untuned),
                                            std::vector<double>(6, 0.9)),
                            in_graph_record(tie.key(), ig, as_stored_by_an_older_space(tie_tuned),
                                            std::vector<double>(6, 0.495)),
                            in_graph_record(tie.key(), ig, as_stored_by_an_older_space(tie_untuned),
                                            std::vector<double>(6, 0.5))})
      out << record_to_json_line(r) << "\n";
  }
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.borrow = false;
  std::vector<std::string> notes;
  const std::vector<std::vector<std::string>> nodes = {{win.key()}, {tie.key()}};
  auto chosen = configs_for_build(o, host, nodes, &notes);
  ::unsetenv("KILN_LOGS_DIR");
  ASSERT_EQ(chosen.count(win.key()), 1u);
  EXPECT_TRUE(schedule::Config::from_json(conv_template().space(win),
                                          chosen.at(win.key()).config_json) == win_tuned);
  EXPECT_FALSE(chosen.at(win.key()).kept_untuned);
  ASSERT_EQ(chosen.count(tie.key()), 1u);
  EXPECT_TRUE(schedule::Config::from_json(conv_template().space(tie),
                                          chosen.at(tie.key()).config_json) == tie_untuned);
  EXPECT_TRUE(chosen.at(tie.key()).kept_untuned);
  EXPECT_TRUE(notes.empty()) << notes.front();
  std::filesystem::remove_all(dir);
}

// Exported records (kiln records export --best, the shipped logs) carry the
// untuned config's in-graph record of the same step, so that a build on the
// log keeps the untuned config where a build on the database does.
TEST(BestRecords, CarryTheUntunedInGraphRecordForTheMargin) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  if (isa_class(host).empty()) GTEST_SKIP() << "no shipped log for this ISA class";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_best_untuned_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  const TargetKey key = TargetKey::for_target(host, threads);
  std::mt19937_64 rng(41);
  ops::Workload a = conv(12, 12);
  const schedule::Config fb = ops::get_template(a.template_name).fallback(a, host.isa());
  const schedule::Config tied = same_layout(a, rng);
  auto times = [&](double ms) {
    std::uniform_real_distribution<double> noise(-0.01, 0.01);
    std::vector<double> t(30);
    for (double& x : t) x = ms * (1 + noise(rng));
    return t;
  };
  std::vector<Record> best;
  {
    RecordDB db = RecordDB::open((dir / "t.db").string());
    db.add(record(a, tied, 0.5, threads));  // isolated
    db.add(record(a, fb, 0.6, threads));
    db.add(in_graph_record(a.key(), key.in_graph().key(), tied.to_json(), times(0.98)));
    db.add(in_graph_record(a.key(), key.in_graph().key(), fb.to_json(), times(1.0)));
    best = best_records(db);
  }
  size_t in_graph = 0;
  for (const Record& r : best) in_graph += r.target_key == key.in_graph().key();
  EXPECT_EQ(in_graph, 2u);  // the pick and the untuned config
  const std::string log = (dir / (isa_class(host) + ".jsonl")).string();
  {
    std::ofstream out(log);
    for (const Record& r : best) out << record_to_json_line(r) << "\n";
  }
  ::setenv("KILN_LOGS_DIR", dir.c_str(), 1);
  BuildRecordOptions o;
  o.borrow = false;
  auto chosen = configs_for_build(o, host, std::vector<std::vector<std::string>>{{a.key()}});
  ::unsetenv("KILN_LOGS_DIR");
  ASSERT_EQ(chosen.count(a.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(a.key()).config_json), json::parse(fb.to_json()));
  EXPECT_TRUE(chosen.at(a.key()).kept_untuned);
  EXPECT_EQ(chosen.at(a.key()).origin, ConfigChoice::Origin::kShippedLog);
  std::filesystem::remove_all(dir);
}

// An export counts the in-graph picks that no step weighed against today's
// untuned config (kiln records export --best says so): a build on the log
// would run their fallback. A pick with the untuned config timed in its step,
// a pick that is the untuned config, and an isolated record are not counted;
// a pick alone is. Only each workload's newest step counts: a tuned record
// whose untuned config was timed an hour later, in a step that did not time
// it, is not picked (the newer step's untuned record is).
TEST(BestRecords, CountThePicksNoStepWeighedAgainstTheUntunedConfig) {
  const codegen::Target host = codegen::Target::host();
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln_best_unweighed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  const std::string ig = TargetKey::for_target(host, threads).in_graph().key();
  std::mt19937_64 rng(5);
  auto fallback = [&](const ops::Workload& w) {
    return ops::get_template(w.template_name).fallback(w, host.isa());
  };
  auto tuned = [&](const ops::Workload& w) {
    schedule::Config c = same_layout(w, rng);
    while (c == fallback(w)) c = same_layout(w, rng);
    return c;
  };
  auto at = [&](const ops::Workload& w, const schedule::Config& c, double ms, int64_t t) {
    Record r = in_graph_record(w.key(), ig, c.to_json(), std::vector<double>(6, ms));
    r.timestamp_unix = t;
    return r;
  };
  const int64_t t0 = 1796000000, later = t0 + 3600;
  // weighed: tuned beside its untuned config; untuned: the untuned config
  // alone; alone: tuned alone; apart: tuned, its untuned config an hour
  // later (the newest step).
  ops::Workload weighed = conv(12, 12), untuned = conv(14, 14), alone = conv(10, 10),
                apart = conv(16, 16), isolated = conv(18, 18);
  size_t unweighed = 99;
  {
    RecordDB db = RecordDB::open((dir / "t.db").string());
    db.add(at(weighed, tuned(weighed), 0.5, t0));
    db.add(at(weighed, fallback(weighed), 0.9, t0));
    db.add(at(untuned, fallback(untuned), 0.5, t0));
    db.add(at(alone, tuned(alone), 0.5, t0));
    db.add(at(apart, tuned(apart), 0.5, t0));
    db.add(at(apart, fallback(apart), 0.9, later));
    db.add(record(isolated, tuned(isolated), 0.5, threads));
    best_records(db, &unweighed);
  }
  EXPECT_EQ(unweighed, 1u);
  std::filesystem::remove_all(dir);
}

// Two in-graph steps of one workload: the build and the export go by the
// newest, where the tuned config did not clearly beat the untuned one, not
// by the older step's faster draw of the same config.
TEST(ConfigsForBuild, InGraphRecordsOfTheNewestStepOnly) {
  using nlohmann::json;
  const codegen::Target host = codegen::Target::host();
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_newest_step_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const int threads = kiln_get_num_threads();
  const std::string ig = TargetKey::for_target(host, threads).in_graph().key();
  std::mt19937_64 rng(71);
  ops::Workload w = conv(12, 12);
  const schedule::Config untuned = conv_template().fallback(w, host.isa());
  schedule::Config tuned = same_layout(w, rng);
  auto at = [&](const schedule::Config& c, double ms, int64_t t) {
    Record r = in_graph_record(w.key(), ig, c.to_json(), std::vector<double>(6, ms));
    r.timestamp_unix = t;
    return r;
  };
  const int64_t older = 1796000000, newer = older + 3600;
  const std::string path = (dir / "t.db").string();
  {
    RecordDB db = RecordDB::open(path);
    db.add(at(tuned, 0.4, older));
    db.add(at(untuned, 0.6, older));
    db.add(at(tuned, 0.59, newer));
    db.add(at(untuned, 0.6, newer));
  }
  BuildRecordOptions o;
  o.tuning_log = path;
  o.shipped_logs = false;
  o.borrow = false;
  const std::vector<std::vector<std::string>> nodes = {{w.key()}};
  auto chosen = configs_for_build(o, host, nodes);
  ASSERT_EQ(chosen.count(w.key()), 1u);
  EXPECT_EQ(json::parse(chosen.at(w.key()).config_json), json::parse(untuned.to_json()));
  EXPECT_TRUE(chosen.at(w.key()).kept_untuned);
  size_t unweighed = 99;
  std::vector<Record> best;
  {
    RecordDB db = RecordDB::open(path);
    best = best_records(db, &unweighed);
  }
  EXPECT_EQ(unweighed, 0u);
  for (const Record& r : best) EXPECT_EQ(r.timestamp_unix, newer) << r.config_json;
  std::filesystem::remove_all(dir);
}

// The untuned config an export carries is the fallback of the ISA the record
// was measured for, whatever the host: a key whose -mcpu implies no features
// (LLVM 16 names Zen 5 "generic") gets its ISA from the key's feature list.
// Until 2026-11-30 it was parsed as SSE, and exports made on Zen 5 dropped
// the untuned record.
TEST(BestRecords, FindTheUntunedConfigOfAGenericCpuKey) {
  const std::string generic = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic -mattr=";
  for (const std::string features :
       {"+avx,+avx2,+f16c,+fma",
        "+avx,+avx2,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512vl,+f16c,+fma"}) {
    const codegen::Target target = codegen::Target::parse(generic + features);
    const TargetKey key = TargetKey::for_target(target, 2);
    EXPECT_EQ(codegen::Target::parse(key.codegen_target()).isa().isa_class, target.isa().isa_class)
        << key.key();
    auto dir = std::filesystem::temp_directory_path() /
               ("kiln_best_generic_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ops::Workload a = conv(12, 12);
    const ops::OpTemplate& t = conv_template();
    const schedule::Config fb = t.fallback(a, target.isa());
    std::mt19937_64 rng(7);
    // Another config with the fallback's blocks: pick_best takes it over the
    // fallback, so only the carry rule exports the fallback's record.
    schedule::Config other = t.space(a).random(rng);
    while (other == fb || ops::layout_blocks(t, a, other) != ops::layout_blocks(t, a, fb))
      other = t.space(a).random(rng);
    std::vector<Record> best;
    {
      RecordDB db = RecordDB::open((dir / "t.db").string());
      db.add(in_graph_record(a.key(), key.in_graph().key(), other.to_json(),
                             std::vector<double>(10, 0.98)));
      db.add(in_graph_record(a.key(), key.in_graph().key(), fb.to_json(),
                             std::vector<double>(10, 1.0)));
      best = best_records(db);
    }
    std::set<nlohmann::json> exported;
    for (const Record& r : best) exported.insert(nlohmann::json::parse(r.config_json));
    EXPECT_EQ(exported, (std::set<nlohmann::json>{nlohmann::json::parse(other.to_json()),
                                                  nlohmann::json::parse(fb.to_json())}))
        << features;
    std::filesystem::remove_all(dir);
  }
}

}  // namespace kiln::tuner
