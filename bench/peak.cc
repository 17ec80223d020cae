#include "peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln::bench {

namespace {

// 24 independent accumulators cover the FMA latency on both ports; returns
// the flops done. The result is kept alive through `sink`.
__attribute__((target("avx512f"))) double fma_loop(long iterations, float* sink) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink = _mm512_reduce_add_ps(s);
  return double(iterations) * 24 * 16 * 2;
}

double one_run(int threads) {
  const long iterations = 2'000'000;
  std::vector<float> sinks(threads * 16);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { fma_loop(iterations, &sinks[t * 16]); });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return double(iterations) * 24 * 16 * 2 * threads / s * 1e-9;
}

}  // namespace

double measured_fma_peak_gflops(int threads) {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) runs.push_back(one_run(threads));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace kiln::bench
