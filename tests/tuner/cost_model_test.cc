// The XGBoost ranking cost model (tuner/cost_model.h): it learns the order of
// a nonlinear synthetic function across groups of different scales, learns a
// proxy speed label of real dense_pack.x86 kernels from their features (and
// carries it over to a workload it never saw), trains deterministically,
// survives save/load, and rejects bad input with clear errors.
#include "tuner/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "ops/dense.h"
#include "ops/op_template.h"
#include "schedule/lower.h"
#include "tuner/features.h"

namespace kiln::test {
namespace {

using Rows = std::vector<std::vector<float>>;

// Kendall's tau-b between predictions and truth (1 = same order, 0 = no
// relation); tau-b because proxy labels have many ties.
double kendall(const std::vector<float>& a, const std::vector<float>& b) {
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0, pairs = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      double da = a[i] - a[j], db = b[i] - b[j];
      pairs += 1;
      if (da == 0) ties_a += 1;
      if (db == 0) ties_b += 1;
      if (da * db > 0) concordant += 1;
      if (da * db < 0) discordant += 1;
    }
  double denom = std::sqrt((pairs - ties_a) * (pairs - ties_b));
  return denom > 0 ? (concordant - discordant) / denom : 0.0;
}

// How many of the truly best k rows are among the predicted best k.
int top_k_hits(const std::vector<float>& pred, const std::vector<float>& truth, size_t k) {
  std::vector<size_t> by_pred(pred.size()), by_truth(pred.size());
  std::iota(by_pred.begin(), by_pred.end(), 0);
  std::iota(by_truth.begin(), by_truth.end(), 0);
  std::stable_sort(by_pred.begin(), by_pred.end(),
                   [&](size_t i, size_t j) { return pred[i] > pred[j]; });
  std::stable_sort(by_truth.begin(), by_truth.end(),
                   [&](size_t i, size_t j) { return truth[i] > truth[j]; });
  int hits = 0;
  for (size_t i = 0; i < k; ++i)
    hits += std::find(by_truth.begin(), by_truth.begin() + k, by_pred[i]) != by_truth.begin() + k;
  return hits;
}

// Rows of 8 uniform features; the label is a nonlinear function of four of
// them plus noise, scaled per group (a group = a workload of another size:
// only the order inside a group is meaningful).
struct Synthetic {
  Rows X;
  std::vector<float> y;
  std::vector<unsigned> groups;
};

float truth(const std::vector<float>& x) {
  return std::sin(3.0f * x[0]) + 2.0f * x[1] * x[2] + (x[3] > 0.5f ? 1.0f : 0.0f);
}

Synthetic synthetic(std::mt19937_64& rng, int groups, int per_group, float noise) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::normal_distribution<float> n(0.0f, noise);
  Synthetic s;
  for (int g = 0; g < groups; ++g) {
    float scale = std::pow(10.0f, static_cast<float>(g));
    for (int i = 0; i < per_group; ++i) {
      std::vector<float> x(8);
      for (float& v : x) v = u(rng);
      s.y.push_back(scale * (truth(x) + 3.0f) + (noise > 0 ? scale * n(rng) : 0.0f));
      s.X.push_back(std::move(x));
    }
    s.groups.push_back(per_group);
  }
  return s;
}

TEST(CostModel, LearnsSyntheticRanking) {
  std::mt19937_64 rng(1);
  Synthetic train = synthetic(rng, 3, 120, 0.05f);
  Synthetic test = synthetic(rng, 1, 200, 0.0f);
  tuner::CostModel model;
  EXPECT_FALSE(model.trained());
  model.fit(train.X, train.y, train.groups, 60);
  ASSERT_TRUE(model.trained());
  EXPECT_EQ(model.num_features(), 8u);
  std::vector<float> pred = model.predict(test.X);
  ASSERT_EQ(pred.size(), test.X.size());
  double tau = kendall(pred, test.y);
  EXPECT_GT(tau, 0.6) << "Kendall tau of the predicted order";  // 0.74 when written
  // Random order would find 2 of the best 20 on average.
  EXPECT_GE(top_k_hits(pred, test.y, 20), 10);

  // A model that never saw the labels' order (labels shuffled) does far worse:
  // the check above cannot pass by construction.
  Synthetic shuffled = train;
  std::shuffle(shuffled.y.begin(), shuffled.y.end(), rng);
  tuner::CostModel blind;
  blind.fit(shuffled.X, shuffled.y, shuffled.groups, 60);
  EXPECT_LT(std::fabs(kendall(blind.predict(test.X), test.y)), 0.3);
}

TEST(CostModel, DeterministicAndSaveLoad) {
  std::mt19937_64 rng(2);
  Synthetic train = synthetic(rng, 3, 60, 0.1f);
  Synthetic test = synthetic(rng, 1, 50, 0.0f);
  tuner::CostModel a, b;
  a.fit(train.X, train.y, train.groups, 20);
  b.fit(train.X, train.y, train.groups, 20);
  std::vector<float> pa = a.predict(test.X);
  EXPECT_EQ(pa, b.predict(test.X));

  std::string text = a.save();
  ASSERT_FALSE(text.empty());
  tuner::CostModel c = tuner::CostModel::load(text);
  EXPECT_TRUE(c.trained());
  EXPECT_EQ(c.num_features(), 8u);
  EXPECT_EQ(c.predict(test.X), pa);
  EXPECT_EQ(c.save(), text);

  // Refitting replaces the model; moving keeps it.
  tuner::CostModel moved = std::move(c);
  EXPECT_EQ(moved.predict(test.X), pa);
  moved.fit(train.X, train.y, train.groups, 3);
  EXPECT_NE(moved.predict(test.X), pa);
}

TEST(CostModel, RejectsBadInput) {
  tuner::CostModel m;
  Rows X = {{1, 2}, {3, 4}, {5, 6}};
  EXPECT_THROW(m.predict(X), std::logic_error);
  EXPECT_THROW(m.save(), std::logic_error);
  EXPECT_THROW(m.fit({}, {}, {}), std::invalid_argument);
  EXPECT_THROW(m.fit(X, {1, 2}, {}), std::invalid_argument);                         // labels
  EXPECT_THROW(m.fit(X, {1, 2, 3}, {2, 2}), std::invalid_argument);                  // groups
  EXPECT_THROW(m.fit({{1, 2}, {3}, {5, 6}}, {1, 2, 3}, {}), std::invalid_argument);  // ragged
  EXPECT_THROW(m.fit(X, {1, NAN, 3}, {}), std::invalid_argument);
  EXPECT_THROW(m.fit(X, {1, 2, 3}, {}, 0), std::invalid_argument);
  EXPECT_FALSE(m.trained());
  m.fit(X, {1, 2, 3}, {});  // empty group list: one group
  EXPECT_TRUE(m.trained());
  EXPECT_THROW(m.predict({{1, 2, 3}}), std::invalid_argument);
  EXPECT_EQ(m.predict({}).size(), 0u);
  EXPECT_THROW(tuner::CostModel::load(""), std::runtime_error);
  EXPECT_THROW(tuner::CostModel::load("not a model"), std::runtime_error);
  EXPECT_THROW(tuner::CostModel::load("{\"learner\": 3"), std::runtime_error);
}

// Real kernels: random configs of dense_pack.x86 labelled with a proxy of
// speed that the knobs determine (vector width x register-tile rows, i.e. the
// size of the register tile), featurized from the lowered IR.
struct Sample {
  Rows lowered, combined;
  std::vector<float> y;
};

Sample dense_samples(const ops::Workload& w, int count, std::mt19937_64& rng) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::ConfigSpace space = t.space(w);
  Sample s;
  for (int i = 0; i < count; ++i) {
    schedule::Config cfg = space.random(rng);
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name);
    s.lowered.push_back(tuner::extract_features(f));
    s.combined.push_back(tuner::combined_features(f, cfg));
    s.y.push_back(static_cast<float>(cfg.split("tile_x").back() * cfg.split("tile_y").back()));
  }
  return s;
}

TEST(CostModel, LearnsRegisterTileFromDenseFeatures) {
  std::mt19937_64 rng(3);
  ops::Workload w = ops::dense_workload("dense_pack.x86", {64, 64, 64});
  Sample train = dense_samples(w, 60, rng);
  Sample test = dense_samples(w, 40, rng);

  tuner::CostModel model;
  model.fit(train.combined, train.y, {60}, 50);
  double tau = kendall(model.predict(test.combined), test.y);
  EXPECT_GT(tau, 0.7) << "held-out configs of the same workload";  // 0.92 when written

  // From the lowered features alone, on a workload of another shape it never saw.
  tuner::CostModel lowered;
  lowered.fit(train.lowered, train.y, {60}, 50);
  std::mt19937_64 rng2(4);
  Sample other = dense_samples(ops::dense_workload("dense_pack.x86", {48, 96, 40}), 40, rng2);
  double transfer = kendall(lowered.predict(other.lowered), other.y);
  EXPECT_GT(transfer, 0.5) << "transfer to dense_pack 48x96x40";  // 0.73 when written
}

}  // namespace
}  // namespace kiln::test
