// Timing a loaded package: what `kiln run --print-time` prints and
// GraphModule.benchmark() returns in Python, computed in one place.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/graph_executor.h"

namespace kiln::runtime {

// Statistics of run times in milliseconds (std: the population standard deviation).
struct TimeSummary {
  std::vector<double> times_ms;  // every timed run, in run order
  double mean_ms = 0, median_ms = 0, max_ms = 0, min_ms = 0, std_ms = 0;
};

// The statistics of `ms` (at least one time).
TimeSummary summarize_times(std::vector<double> ms);

// Runs `ex` `warmup` times untimed, then `repeat` (>= 1) times, each timed
// with a steady clock, and summarizes the timed runs.
TimeSummary benchmark(GraphExecutor& ex, int repeat, int warmup = 1);

}  // namespace kiln::runtime
