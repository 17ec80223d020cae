#include "runtime/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace kiln::runtime {

TimeSummary summarize_times(std::vector<double> ms) {
  if (ms.empty()) throw std::invalid_argument("no run times to summarize");
  TimeSummary s;
  s.times_ms = ms;
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double t : ms) sum += t;
  size_t n = ms.size();
  s.mean_ms = sum / static_cast<double>(n);
  s.median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  double var = 0;
  for (double t : ms) var += (t - s.mean_ms) * (t - s.mean_ms);
  s.std_ms = std::sqrt(var / static_cast<double>(n));
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  return s;
}

TimeSummary benchmark(GraphExecutor& ex, int repeat, int warmup) {
  if (repeat < 1) throw std::invalid_argument("repeat must be at least 1");
  for (int i = 0; i < warmup; ++i) ex.run();
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(repeat));
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    ex.run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return summarize_times(std::move(ms));
}

}  // namespace kiln::runtime
