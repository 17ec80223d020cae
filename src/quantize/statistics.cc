// TensorStats and the calibration methods (statistics.h).
#include "quantize/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace kiln::quantize {

CalibrationMethod parse_calibration_method(const std::string& s) {
  if (s == "max") return CalibrationMethod::kMax;
  if (s == "percentile") return CalibrationMethod::kPercentile;
  if (s == "kl") return CalibrationMethod::kKl;
  throw std::invalid_argument("unknown calibration method '" + s +
                              "' (valid: max, percentile, kl)");
}

const char* method_name(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kMax: return "max";
    case CalibrationMethod::kPercentile: return "percentile";
    case CalibrationMethod::kKl: return "kl";
  }
  return "?";
}

void TensorStats::observe_range(const float* x, size_t n, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!std::isfinite(v))
      throw std::runtime_error(what + " holds a non-finite value (" + std::to_string(v) +
                               "): it cannot be calibrated");
    if (count_ == 0 && i == 0) min_ = max_ = v;
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
  }
  count_ += n;
}

float TensorStats::hist_lo() const { return std::min(min_, 0.0f); }
float TensorStats::hist_hi() const { return std::max(max_, 0.0f); }

void TensorStats::observe_histogram(const float* x, size_t n) {
  if (hist_.empty()) {
    hist_.assign(kBins, 0);
    abs_hist_.assign(kBins, 0);
  }
  const double lo = hist_lo(), hi = hist_hi();
  const double amax = std::max(-lo, hi);
  const double width = (hi - lo) / kBins, abs_width = amax / kBins;
  for (size_t i = 0; i < n; ++i) {
    zeros_ += x[i] == 0.0f;
    // Values outside pass 1's range cannot occur (same data, same model);
    // clamping keeps a bin index in range all the same.
    int b = width > 0 ? static_cast<int>((x[i] - lo) / width) : 0;
    hist_[std::clamp(b, 0, kBins - 1)] += 1;
    int a = abs_width > 0 ? static_cast<int>(std::fabs(x[i]) / abs_width) : 0;
    abs_hist_[std::clamp(a, 0, kBins - 1)] += 1;
  }
}

Range percentile_range(const std::vector<double>& hist, float lo, float hi, double percentile) {
  if (!(percentile > 50 && percentile <= 100))
    throw std::invalid_argument("percentile must be in (50, 100], not " +
                                std::to_string(percentile));
  double total = 0;
  for (double h : hist) total += h;
  const double width = (static_cast<double>(hi) - lo) / static_cast<double>(hist.size());
  if (total == 0 || width == 0) return {lo, hi};
  // The value below which a fraction f of the samples lie, linear inside its bin.
  auto quantile = [&](double f) {
    const double target = f * total;
    double cum = 0;
    for (size_t b = 0; b < hist.size(); ++b) {
      if (cum + hist[b] >= target && hist[b] > 0)
        return lo + width * (static_cast<double>(b) + (target - cum) / hist[b]);
      cum += hist[b];
    }
    return static_cast<double>(hi);
  };
  const double tail = (100.0 - percentile) / 100.0;
  return {static_cast<float>(quantile(tail)), static_cast<float>(quantile(1.0 - tail))};
}

namespace {

// Smooths a distribution so that no bin is zero (KL needs q > 0 where p > 0):
// zero bins get eps, taken evenly from the non-zero ones (TVM's and
// TensorRT's smoothing).
std::vector<double> smooth(std::vector<double> p, double eps = 1e-4) {
  size_t zeros = 0;
  for (double v : p) zeros += v == 0;
  const size_t nonzeros = p.size() - zeros;
  if (nonzeros == 0 || zeros == 0) return p;
  const double take = eps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  for (double& v : p) v = v == 0 ? eps : v - take;
  return p;
}

double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  double d = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0 && q[i] > 0) d += p[i] * std::log(p[i] / q[i]);
  return d;
}

std::vector<double> normalized(std::vector<double> v) {
  double s = 0;
  for (double x : v) s += x;
  if (s > 0)
    for (double& x : v) x /= s;
  return v;
}

}  // namespace

float kl_threshold(const std::vector<double>& hist, float hi, int levels) {
  const int bins = static_cast<int>(hist.size());
  if (bins <= levels) return hi;
  const double width = static_cast<double>(hi) / bins;
  double best = std::numeric_limits<double>::infinity();
  int best_i = bins;
  double outliers = 0;
  for (int b = levels; b < bins; ++b) outliers += hist[b];
  for (int i = levels; i <= bins; ++i) {
    // Reference: the first i bins, everything beyond clipped into the last.
    std::vector<double> p(hist.begin(), hist.begin() + i);
    p[i - 1] += outliers;
    if (i < bins) outliers -= hist[i];
    // Candidate: the same i bins merged into `levels` levels, each level
    // spread back evenly over the bins of it that were non-zero.
    std::vector<double> q(i, 0);
    const double per = static_cast<double>(i) / levels;
    for (int j = 0; j < levels; ++j) {
      const int start = static_cast<int>(std::floor(j * per));
      const int stop = j == levels - 1 ? i : static_cast<int>(std::floor((j + 1) * per));
      double sum = 0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        sum += hist[k];
        nonzero += hist[k] != 0;
      }
      if (nonzero == 0) continue;
      for (int k = start; k < stop; ++k)
        if (hist[k] != 0) q[k] = sum / nonzero;
    }
    const std::vector<double> pn = smooth(normalized(p)), qn = smooth(normalized(q));
    const double d = kl_divergence(pn, qn);
    if (d < best) {
      best = d;
      best_i = i;
    }
  }
  return static_cast<float>(width * best_i);
}

std::string TensorStats::degenerate(CalibrationMethod method) const {
  if (count_ == 0 || method == CalibrationMethod::kMax) return "";
  if (min_ == max_) {
    char value[32];
    std::snprintf(value, sizeof(value), "%g", min_);
    return std::string("every value is ") + value;
  }
  // The histogram the method searches: kl's leaves the exact zeros out.
  std::vector<double> h = method == CalibrationMethod::kKl ? abs_hist_ : hist_;
  if (method == CalibrationMethod::kKl && !h.empty()) h[0] -= zeros_;
  const auto used = std::count_if(h.begin(), h.end(), [](double v) { return v > 0; });
  if (used > 1) return "";
  return method == CalibrationMethod::kKl ? "every value that is not 0 falls in one histogram bin"
                                          : "every value falls in one histogram bin";
}

Range TensorStats::range(CalibrationMethod method, double percentile, std::string* fallback) const {
  if (count_ == 0) return {0, 0};
  if (method == CalibrationMethod::kMax) return {min_, max_};
  if (hist_.empty())
    throw std::logic_error("TensorStats::range: no histogram (pass 2 did not run)");
  // A degenerate histogram gives the search nothing to weigh: kl would clip a constant 0.5 to
  // [0, 0.0625] (the first 256 of 2048 bins). Max calibration is exact there.
  if (std::string why = degenerate(method); !why.empty()) {
    if (fallback) *fallback = why;
    return {min_, max_};
  }
  if (method == CalibrationMethod::kPercentile)
    return percentile_range(hist_, hist_lo(), hist_hi(), percentile);
  // kl, without the exact zeros (statistics.h): they sit in the bin that
  // starts at 0, the first of the |x| histogram and of an unsigned one.
  std::vector<double> abs_hist = abs_hist_;
  abs_hist[0] -= zeros_;
  if (min_ >= 0) return {0, kl_threshold(abs_hist, hist_hi(), 256)};
  if (max_ <= 0) {
    std::vector<double> mirrored(hist_.rbegin(), hist_.rend());
    mirrored[0] = abs_hist[0];  // values in (-w, 0], zeros removed
    return {-kl_threshold(mirrored, -hist_lo(), 256), 0};
  }
  const float t = kl_threshold(abs_hist, std::max(-min_, max_), 128);
  return {std::max(min_, -t), std::min(max_, t)};
}

}  // namespace kiln::quantize
