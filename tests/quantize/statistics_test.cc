// Calibration statistics and methods (src/quantize/statistics.h) against
// plain references: sorted-data percentiles, known distributions' thresholds.
#include "quantize/statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln::quantize {
namespace {

TensorStats stats_of(const std::vector<float>& x, bool histogram = true) {
  TensorStats s;
  // Two chunks, as two samples would give.
  const size_t half = x.size() / 2;
  s.observe_range(x.data(), half, "t");
  s.observe_range(x.data() + half, x.size() - half, "t");
  if (histogram) {
    s.observe_histogram(x.data(), half);
    s.observe_histogram(x.data() + half, x.size() - half);
  }
  return s;
}

TEST(Statistics, MaxIsTheObservedRange) {
  std::vector<float> x = {0.5f, -2.25f, 3.0f, 1.0f, -0.75f, 2.0f};
  TensorStats s = stats_of(x, false);
  Range r = s.range(CalibrationMethod::kMax);
  EXPECT_EQ(r.min, -2.25f);
  EXPECT_EQ(r.max, 3.0f);
}

TEST(Statistics, HistogramCountsEveryValueAndIncludesZero) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};  // all positive: bins start at 0
  TensorStats s = stats_of(x);
  EXPECT_EQ(s.hist_lo(), 0.0f);
  EXPECT_EQ(s.hist_hi(), 4.0f);
  double total = 0;
  for (double h : s.histogram()) total += h;
  EXPECT_EQ(total, 4.0);
  // 1.0 lands in bin 512 of 2048 over [0, 4]; 4.0 (the top edge) in the last.
  EXPECT_EQ(s.histogram()[512], 1.0);
  EXPECT_EQ(s.histogram()[kBins - 1], 1.0);
}

TEST(Statistics, PercentileMatchesSortedData) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  std::vector<float> x(200000);
  for (float& v : x) v = normal(rng);
  TensorStats s = stats_of(x);
  for (double p : {99.0, 99.9, 99.99}) {
    Range r = s.range(CalibrationMethod::kPercentile, p);
    std::vector<float> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    const float lo = sorted[static_cast<size_t>((100 - p) / 100 * x.size())];
    const float hi = sorted[static_cast<size_t>(p / 100 * x.size()) - 1];
    const float bin = (s.hist_hi() - s.hist_lo()) / kBins;
    EXPECT_NEAR(r.min, lo, 2 * bin) << "p=" << p;
    EXPECT_NEAR(r.max, hi, 2 * bin) << "p=" << p;
  }
  EXPECT_THROW(s.range(CalibrationMethod::kPercentile, 40), std::invalid_argument);
}

TEST(Statistics, KlKeepsAUniformRangeWhole) {
  // Nothing to clip: every threshold below the max loses real mass.
  std::vector<float> x(100000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / x.size() * 6.0f;
  Range r = stats_of(x).range(CalibrationMethod::kKl);
  EXPECT_EQ(r.min, 0.0f);
  EXPECT_GT(r.max, 0.97f * 6.0f);
}

TEST(Statistics, KlClipsARareOutlier) {
  // ReLU of a standard normal, plus one value far out: max calibration would
  // spend almost every level on nothing; KL's threshold stays near the bulk.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(400000);
  for (float& v : x) v = std::max(0.0f, normal(rng));
  x[1234] = 40.0f;
  Range r = stats_of(x).range(CalibrationMethod::kKl);
  EXPECT_EQ(r.min, 0.0f);
  EXPECT_GT(r.max, 2.0f);
  EXPECT_LT(r.max, 8.0f);
  // The half of exact zeros does not pull the threshold down (statistics.h).
  std::vector<float> no_zeros;
  for (float v : x)
    if (v > 0) no_zeros.push_back(v);
  Range r2 = stats_of(no_zeros).range(CalibrationMethod::kKl);
  EXPECT_NEAR(r.max, r2.max, 0.25f);
}

TEST(Statistics, KlOnARangeCrossingZeroIsSymmetricThenClippedToTheData) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(300000);
  for (float& v : x) v = normal(rng);
  x[10] = 30.0f;  // outlier above
  x[11] = -1.5f;  // keep the minimum small: the low end is the data's
  for (float& v : x) v = std::max(v, -1.5f);
  Range r = stats_of(x).range(CalibrationMethod::kKl);
  EXPECT_EQ(r.min, -1.5f);  // max(min, -T)
  EXPECT_GT(r.max, 2.0f);
  EXPECT_LT(r.max, 10.0f);
}

TEST(Statistics, KlOnNonPositiveValuesMirrors) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(300000);
  for (float& v : x) v = -std::fabs(normal(rng));
  x[0] = -40.0f;
  Range r = stats_of(x).range(CalibrationMethod::kKl);
  EXPECT_EQ(r.max, 0.0f);
  EXPECT_LT(r.min, -2.0f);
  EXPECT_GT(r.min, -8.0f);
}

TEST(Statistics, NonFiniteValuesNameTheTensor) {
  TensorStats s;
  std::vector<float> x = {1.0f, NAN};
  try {
    s.observe_range(x.data(), x.size(), "calib.npz sample 3: tensor 'conv1_out'");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("sample 3: tensor 'conv1_out'"), std::string::npos)
        << e.what();
  }
}

TEST(Statistics, MethodNames) {
  EXPECT_EQ(parse_calibration_method("kl"), CalibrationMethod::kKl);
  try {
    parse_calibration_method("entropy");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max, percentile, kl"), std::string::npos);
  }
}

// Issue 65 #3: constant calibration data (all 0.5) gave kl [0, 0.0625], clipping every sample.
// A degenerate histogram falls back to max calibration and says why.
TEST(Statistics, DegenerateHistogramsFallBackToMax) {
  const std::vector<float> constant(1000, 0.5f);
  for (CalibrationMethod m : {CalibrationMethod::kKl, CalibrationMethod::kPercentile}) {
    SCOPED_TRACE(method_name(m));
    TensorStats s = stats_of(constant);
    std::string why;
    Range r = s.range(m, 99.99, &why);
    EXPECT_EQ(r.min, 0.5f);
    EXPECT_EQ(r.max, 0.5f);
    EXPECT_EQ(why, "every value is 0.5");
  }
  // ReLU's zeros and one other value: kl searches the values that are not 0, all in one bin.
  std::vector<float> relu(1000, 0.0f);
  for (size_t i = 0; i < relu.size(); i += 3) relu[i] = 2.0f;
  std::string why;
  Range r = stats_of(relu).range(CalibrationMethod::kKl, 99.99, &why);
  EXPECT_EQ(r.min, 0.0f);
  EXPECT_EQ(r.max, 2.0f);
  EXPECT_EQ(why, "every value that is not 0 falls in one histogram bin");
  // Constant negative data, mirrored.
  r = stats_of(std::vector<float>(64, -3.0f)).range(CalibrationMethod::kKl, 99.99, &why);
  EXPECT_EQ(r.min, -3.0f);
  EXPECT_EQ(r.max, -3.0f);
  // A real distribution does not fall back.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(20000);
  for (float& v : x) v = normal(rng);
  why.clear();
  stats_of(x).range(CalibrationMethod::kKl, 99.99, &why);
  EXPECT_EQ(why, "");
  EXPECT_EQ(stats_of(x).degenerate(CalibrationMethod::kPercentile), "");
}

}  // namespace
}  // namespace kiln::quantize
