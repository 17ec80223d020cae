// Per-tensor activation statistics and the calibration methods that turn
// them into a quantization range.
//
// Statistics are gathered in two passes over the calibration data (the
// range must be known before the bins are): pass 1 observe_range() gives
// min/max; pass 2 observe_histogram() fills kBins bins over [min(lo, 0),
// max(hi, 0)] and kBins bins of |x| over [0, max|x|] (TensorRT's and TVM's
// 2048). `max` needs pass 1 only.
//
// Methods (range() below):
//  - max: [min, max] as observed.
//  - percentile p: the (100 - p)th and pth percentiles of the signed
//    histogram (both tails clipped; interpolated inside a bin).
//  - kl: TensorRT's entropy calibration: the threshold T whose clipped and
//    quantized distribution has the least KL divergence from the observed one.
//    All values >= 0: the search runs on [0, max] with 256 levels (uint8 with
//    zero point 0) and gives [0, T]; all <= 0: mirrored. A range crossing
//    zero: the search runs on |x| with 128 levels (what uint8 spends on
//    each side of a centred zero point, TensorRT's int8 count) and gives
//    [max(min, -T), min(max, T)].
//    Exact zeros are left out of the KL search: 0 is exact at any threshold
//    (it is the zero point's value), and ReLU's spike of zeros would
//    otherwise dominate the divergence and pull the threshold far down (on
//    tests/quantize's convnet, to a quarter of the range).
// A histogram with nothing to weigh (a range of zero width, or every value the method
// searches in one bin: constant calibration data, say) falls back to max; range() says so and
// the quantizer warns, naming the tensor (kl clipped a constant 0.5 to [0, 0.0625]).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::quantize {

enum class CalibrationMethod { kMax, kPercentile, kKl };

// "max", "percentile", "kl"; parse throws std::invalid_argument listing them.
CalibrationMethod parse_calibration_method(const std::string& s);
const char* method_name(CalibrationMethod m);

struct Range {
  float min = 0, max = 0;
};

inline constexpr int kBins = 2048;

class TensorStats {
 public:
  // Pass 1. Non-finite values throw std::runtime_error naming `what`.
  void observe_range(const float* x, size_t n, const std::string& what);
  // Pass 2 (after every observe_range()).
  void observe_histogram(const float* x, size_t n);

  bool empty() const { return count_ == 0; }
  float min() const { return min_; }
  float max() const { return max_; }
  // The signed histogram's bounds (0 included) and both histograms.
  float hist_lo() const;
  float hist_hi() const;
  const std::vector<double>& histogram() const { return hist_; }
  const std::vector<double>& abs_histogram() const { return abs_hist_; }

  // A histogram method (percentile, kl) on a degenerate histogram (a range of zero width, or
  // every value the method searches in one bin) falls back to max calibration, [min, max],
  // and says why in *fallback (left alone otherwise).
  Range range(CalibrationMethod method, double percentile = 99.99,
              std::string* fallback = nullptr) const;
  // Why `method` would fall back to max calibration; "" when it would not.
  std::string degenerate(CalibrationMethod method) const;

 private:
  size_t count_ = 0;
  double zeros_ = 0;  // exact zeros seen in pass 2
  float min_ = 0, max_ = 0;
  std::vector<double> hist_, abs_hist_;
};

// The building blocks, on their own for tests.
// The [lower, upper] percentiles (p and 100 - p) of `hist`, bins over [lo, hi].
Range percentile_range(const std::vector<double>& hist, float lo, float hi, double percentile);
// The KL-optimal threshold of `hist`, bins over [0, hi], for `levels`
// quantization levels (TensorRT's search: thresholds from `levels` bins to all).
float kl_threshold(const std::vector<double>& hist, float hi, int levels);

}  // namespace kiln::quantize
