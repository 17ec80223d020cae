// The one-sided rank test behind kiln tune's in-graph choice
// (tuner/rank_test.h): exact p-values against a brute-force count over every
// assignment of ranks, and the values a reader can check by hand.
#include "tuner/rank_test.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace kiln::tuner {
namespace {

// P(U' >= U) by enumerating which of the n + m pooled values go to the first
// sample: every split of the pooled sample is equally likely under the null.
double brute_force_p(const std::vector<double>& lower, const std::vector<double>& higher) {
  std::vector<double> pooled = lower;
  pooled.insert(pooled.end(), higher.begin(), higher.end());
  auto u_of = [](const std::vector<double>& a, const std::vector<double>& b) {
    double u = 0;
    for (double x : a)
      for (double y : b) u += x < y ? 1.0 : x == y ? 0.5 : 0.0;
    return u;
  };
  const double observed = u_of(lower, higher);
  std::vector<bool> pick(pooled.size(), false);
  std::fill(pick.begin(), pick.begin() + static_cast<std::ptrdiff_t>(lower.size()), true);
  size_t all = 0, as_extreme = 0;
  do {
    std::vector<double> a, b;
    for (size_t i = 0; i < pooled.size(); ++i) (pick[i] ? a : b).push_back(pooled[i]);
    ++all;
    as_extreme += u_of(a, b) >= observed;
  } while (std::prev_permutation(pick.begin(), pick.end()));
  return static_cast<double>(as_extreme) / static_cast<double>(all);
}

TEST(RankTest, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7);
}

TEST(RankTest, HandCheckedValues) {
  // Complete separation: 1 ordering in C(n+m, n).
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1}, {2}), 0.5);
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1, 2, 3}, {4, 5, 6}), 1.0 / 20);
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}), 1.0 / 924);
  // The other way round: every ordering has U' >= 0.
  EXPECT_DOUBLE_EQ(rank_test_p_lower({7, 8, 9}, {1, 2, 3}), 1.0);
  // One inversion of 36 pairs: U = 35, two orderings reach it.
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1, 2, 3, 4, 5, 7.5}, {7, 8, 9, 10, 11, 12}), 2.0 / 924);
  EXPECT_DOUBLE_EQ(rank_test_p_lower({}, {1, 2}), 1.0);
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1, 2}, {}), 1.0);
}

TEST(RankTest, MatchesBruteForceOnRandomSamples) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> time(1.0, 2.0);
  for (int trial = 0; trial < 60; ++trial) {
    size_t n = 1 + rng() % 6, m = 1 + rng() % 7;
    double shift = 0.1 * static_cast<double>(rng() % 5);
    std::vector<double> a(n), b(m);
    for (double& x : a) x = time(rng) - shift;
    for (double& y : b) y = time(rng);
    EXPECT_NEAR(rank_test_p_lower(a, b), brute_force_p(a, b), 1e-12)
        << "n " << n << " m " << m << " trial " << trial;
  }
}

// Ties count half a pair and never make the p-value smaller than the next
// U below would: identical samples are no evidence either way.
TEST(RankTest, TiesAreNoEvidence) {
  EXPECT_GT(rank_test_p_lower({1, 1, 1, 1}, {1, 1, 1, 1}), 0.5);
  // 2 of 3 pairs lower, one tied: U = 2.5 tested as U >= 2.
  EXPECT_DOUBLE_EQ(rank_test_p_lower({1}, {1, 2, 3}), rank_test_p_lower({1.5}, {1, 2, 3}));
}

// Large samples keep a proper distribution (probabilities sum to one, a
// complete separation is the smallest p-value).
TEST(RankTest, LargeSamples) {
  std::vector<double> a(40), b(40);
  for (int i = 0; i < 40; ++i) a[i] = i, b[i] = 100 + i;
  double p = rank_test_p_lower(a, b);
  EXPECT_GT(p, 0);
  EXPECT_LT(p, 1e-20);
  EXPECT_DOUBLE_EQ(rank_test_p_lower(b, a), 1.0);
  for (int i = 0; i < 40; ++i) b[i] = i + 0.5;  // interleaved: about half the pairs
  double mid = rank_test_p_lower(a, b);
  EXPECT_GT(mid, 0.2);
  EXPECT_LT(mid, 0.8);
  // Past the exact count's size, the normal approximation behaves alike.
  std::vector<double> c(70), d(70);
  for (int i = 0; i < 70; ++i) c[i] = i, d[i] = 100 + i;
  EXPECT_LT(rank_test_p_lower(c, d), 1e-20);
  EXPECT_GT(rank_test_p_lower(d, c), 1 - 1e-12);
  for (int i = 0; i < 70; ++i) d[i] = i + 0.5;
  EXPECT_NEAR(rank_test_p_lower(c, d), 0.5, 0.1);
}

}  // namespace
}  // namespace kiln::tuner
