// The records side of the layout choice (tuner/layout_records.h): one
// candidate per channel-block pair (timed by its fastest isolated record,
// configured by its fastest in-graph one), the transforms they need, and
// transform records under their own target-key variant.
#include "tuner/layout_records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "support/version.h"
#include "tuner/target_key.h"

namespace kiln::tuner {
namespace {

namespace fs = std::filesystem;

ops::Workload conv() {
  return ops::Workload{"conv2d_NCHWc.x86",
                       {{"data", {1, 32, 14, 14}},
                        {"kernel", {64, 32, 3, 3}},
                        {"strides", {1, 1}},
                        {"pads", {1, 1, 1, 1}},
                        {"dilation", {1, 1}}}};
}

const ops::OpTemplate& conv_template() { return ops::get_template("conv2d_NCHWc.x86"); }

Record record(const std::string& target_key, const schedule::Config& cfg, double ms) {
  Record r;
  r.workload_key = conv().key();
  r.target_key = target_key;
  r.config_json = cfg.to_json();
  r.times_ms = {ms, ms};
  r.timestamp_unix = 1700000000;
  r.kiln_version = ::kiln::kiln_version();
  return r;
}

class LayoutRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ =
        (fs::temp_directory_path() / ("kiln_layout_records_" + std::to_string(getpid()) + ".db"))
            .string();
    fs::remove(path_);
  }
  void TearDown() override {
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path_ + ext);
  }
  std::string path_;
};

TEST_F(LayoutRecordsTest, OneCandidatePerBlockPair) {
  const int threads = 2;
  codegen::Target target = codegen::Target::host();
  TargetKey key = TargetKey::for_target(target, threads);
  const ops::OpTemplate& t = conv_template();
  ops::Workload w = conv();
  // Random configs grouped by their block pair.
  std::mt19937_64 rng(3);
  std::map<std::pair<int64_t, int64_t>, std::vector<schedule::Config>> by_pair;
  for (int i = 0; i < 400; ++i) {
    schedule::Config c = t.space(w).random(rng);
    auto& v = by_pair[ops::layout_blocks(t, w, c)];
    if (v.size() < 2 && std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
  }
  ASSERT_GE(by_pair.size(), 2u);
  std::vector<Record> recs;
  std::map<std::pair<int64_t, int64_t>, double> want_ms;
  double ms = 1.0;
  for (const auto& [pair, cfgs] : by_pair) {
    for (const schedule::Config& c : cfgs) {
      recs.push_back(record(key.key(), c, ms));
      want_ms[pair] = want_ms.count(pair) ? std::min(want_ms[pair], ms) : ms;
      ms += 0.25;
    }
  }
  // A failed record faster than all: never a candidate.
  Record failed = record(key.key(), by_pair.begin()->second.front(), 0.01);
  failed.error = ErrorClass::kWrongResult;
  failed.config_json = t.space(w).random(rng).to_json();
  recs.push_back(failed);
  // An in-graph record of the first pair's slower config: the config its
  // candidate builds with, while the time stays the isolated one.
  const auto& first = *by_pair.begin();
  bool has_in_graph = first.second.size() > 1;
  if (has_in_graph) recs.push_back(record(key.in_graph().key(), first.second[1], 5.0));
  {
    RecordDB db = RecordDB::open(path_);
    db.add_batch(recs);
  }
  RecordDB db = RecordDB::open(path_, RecordDB::Mode::kMustExist);
  auto cands = layout_candidates(db, target, threads, {w.key(), "not a workload"});
  ASSERT_EQ(cands.size(), 1u);
  const std::vector<BlockCandidate>& c = cands.at(w.key());
  ASSERT_EQ(c.size(), by_pair.size());
  for (const BlockCandidate& k : c) {
    std::pair<int64_t, int64_t> pair{k.in_block, k.out_block};
    ASSERT_TRUE(by_pair.count(pair));
    EXPECT_DOUBLE_EQ(k.ms, want_ms.at(pair));
    schedule::Config cfg = schedule::Config::from_json(t.space(w), k.config_json);
    EXPECT_EQ(ops::layout_blocks(t, w, cfg), pair);
    if (has_in_graph && pair == first.first) EXPECT_EQ(cfg, first.second[1]);
  }
  // Another thread count's records do not apply.
  EXPECT_TRUE(layout_candidates(db, target, threads + 1, {w.key()}).empty());

  // The transforms they need: into each in_block, from NCHW and from every
  // offered block that divides the 32 channels, never from a block to itself.
  std::vector<TransformNeed> needs = needed_transforms(cands);
  ASSERT_FALSE(needs.empty());
  std::set<int64_t> in_blocks;
  for (const BlockCandidate& k : c) in_blocks.insert(k.in_block);
  std::set<int64_t> out_blocks;
  for (const BlockCandidate& k : c) {
    EXPECT_EQ(k.out_nchw, (std::vector<int64_t>{1, 64, 14, 14}));
    out_blocks.insert(k.out_block);
  }
  for (const TransformNeed& n : needs) {
    EXPECT_NE(n.from, n.to);
    if (n.to == 0) {  // an output back to NCHW
      EXPECT_EQ(n.shape, (std::vector<int64_t>{1, 64, 14, 14}));
      EXPECT_TRUE(out_blocks.count(n.from));
      continue;
    }
    EXPECT_EQ(n.shape, (std::vector<int64_t>{1, 32, 14, 14}));
    EXPECT_TRUE(in_blocks.count(n.to));
    EXPECT_EQ(32 % (n.from ? n.from : 1), 0);
  }
  for (int64_t b : out_blocks)
    EXPECT_TRUE(std::any_of(needs.begin(), needs.end(),
                            [&](const TransformNeed& n) { return n.from == b && n.to == 0; }));
  for (int64_t b : in_blocks)
    EXPECT_TRUE(std::any_of(needs.begin(), needs.end(),
                            [&](const TransformNeed& n) { return n.from == 0 && n.to == b; }));
}

TEST_F(LayoutRecordsTest, TransformRecordsRoundTrip) {
  const int threads = 2;
  codegen::Target target = codegen::Target::host();
  std::string key = transform_target_key(target, threads);
  EXPECT_EQ(TargetKey::parse(key).measured, TargetKey::kLayoutTransform);
  TransformNeed t{{1, 64, 56, 56}, 16, 8};
  // Medians of groups of five: a descheduled repeat does not count.
  Record r = transform_record(t, key, {0.2, 0.21, 9.0, 0.19, 0.2, 0.3});
  EXPECT_EQ(r.workload_key, transform_workload_key({1, 64, 56, 56}, 16, 8));
  EXPECT_EQ(r.times_ms, (std::vector<double>{0.2, 0.3}));
  EXPECT_THROW(transform_record(t, TargetKey::for_target(target, threads).key(), {1.0}),
               std::invalid_argument);
  EXPECT_THROW(transform_record(t, key, {}), std::invalid_argument);
  {
    RecordDB db = RecordDB::open(path_);
    db.add_batch({r});
  }
  RecordDB db = RecordDB::open(path_, RecordDB::Mode::kMustExist);
  auto times = load_transform_times(db, target, threads);
  ASSERT_EQ(times.size(), 1u);
  EXPECT_DOUBLE_EQ(times.at(r.workload_key), 0.25);
  EXPECT_TRUE(load_transform_times(db, target, threads + 1).empty());
  // Not a tuning workload: the build's config choice ignores it.
  EXPECT_TRUE(layout_candidates(db, target, threads, {r.workload_key}).empty());
}

TEST(LayoutEstimate, ScalesWithBytes) {
  double bw = copy_bandwidth_gbs();
  EXPECT_GT(bw, 0.1);
  double a = estimate_transform_ms({1, 64, 56, 56});
  EXPECT_NEAR(estimate_transform_ms({1, 128, 56, 56}), 2 * a, 1e-12);
  EXPECT_NEAR(a, 2.0 * 4 * 64 * 56 * 56 / (bw * 1e9) * 1e3, 1e-12);
}

}  // namespace
}  // namespace kiln::tuner
