// Wall-clock timing of a callable for benchmarks: medians, because this
// machine is shared and noisy (MACHINE.md), and the minimum beside it as the
// best case the hardware allowed.
#pragma once

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace kiln::bench {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
};

// Runs `fn` `warmup` times untimed (caches, page faults, thread start-up),
// then `repeat` times, timing each run alone with steady_clock, which never
// jumps. `fn` must finish its work before returning (wait on streams).
template <typename Fn>
Timing time_ms(Fn&& fn, int warmup, int repeat) {
  if (repeat < 1) throw std::invalid_argument("time_ms: repeat must be >= 1");
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms(repeat);
  for (double& t : ms) {
    auto start = std::chrono::steady_clock::now();
    fn();
    auto stop = std::chrono::steady_clock::now();
    t = std::chrono::duration<double, std::milli>(stop - start).count();
  }
  std::sort(ms.begin(), ms.end());
  // Lower median for an even count: a real sample, never an average of two.
  return {ms[(ms.size() - 1) / 2], ms.front()};
}

}  // namespace kiln::bench
