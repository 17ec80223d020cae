// kiln_bench_runtime: what the runtime itself costs around the kernels
// (issue 12, item 5), on this machine, medians of many samples:
//  - one kiln_parallel_for launch on the thread pool with an empty body and
//    with a body of about 1 us per thread (the overhead is the time beyond it);
//  - one GraphExecutor::run() of the smallest graph (one Relu on 16 floats,
//    one kernel), and of the same graph with its kernel call alone, to
//    separate the executor's own cost;
//  - C++ heap allocations (operator new, counted here for every library of
//    the process) during run(): none are expected.
//
//   kiln_bench_runtime [--smoke]     (--smoke: few samples, results checked)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "driver/build.h"
#include "graph/graph.h"
#include "relu_graph.h"
#include "runtime/c_runtime_api.h"
#include "runtime/graph_executor.h"

namespace {

std::atomic<int64_t> g_news{0};

}  // namespace

// Counts every C++ allocation of the process (the runtime library's included:
// the executable's operator new interposes the one libstdc++ exports).
void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Spins for about `ns` nanoseconds: a stand-in for a tiny kernel's work.
void spin_ns(int64_t ns) {
  auto end = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < end) {
  }
}

int32_t empty_body(int64_t, int64_t, void*) { return 0; }
int32_t one_us_body(int64_t begin, int64_t end, void*) {
  spin_ns(1000 * (end - begin));
  return 0;
}

// Median time of one call of f, in microseconds, over `samples` samples of
// `calls` calls each.
template <typename F>
double median_us(int samples, int calls, F&& f) {
  std::vector<double> us;
  for (int s = 0; s < samples; ++s) {
    auto t0 = Clock::now();
    for (int c = 0; c < calls; ++c) f();
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  return median(us);
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  const int samples = smoke ? 3 : 51, calls = smoke ? 10 : 2000;
  const int threads = kiln_get_num_threads();

  // 1. The thread pool: a launch with nothing to do, and with ~1 us per thread.
  double empty_us =
      median_us(samples, calls, [&] { kiln_parallel_for(threads, empty_body, nullptr); });
  double one_us =
      median_us(samples, calls / 4 + 1, [&] { kiln_parallel_for(threads, one_us_body, nullptr); });
  double serial_us = median_us(samples, calls / 4 + 1, [&] { one_us_body(0, 1, nullptr); });

  // 2. The executor: a whole run() of the one-kernel graph.
  const std::string pkg = (std::filesystem::temp_directory_path() /
                           ("kiln-bench-runtime-" + std::to_string(getpid()) + ".tar"))
                              .string();
  kiln::driver::BuildOptions options;
  options.output_path = pkg;
  kiln::driver::build_module(kiln::bench::relu_graph(16), options);  // the smallest graph
  kiln::runtime::GraphExecutor ex = kiln::runtime::GraphExecutor::load(pkg);
  std::filesystem::remove(pkg);
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i - 8);
  ex.set_input("x", x.data(), kiln::runtime::DType::f32(), {1, 16});
  ex.run();  // warm: threads started, pages touched
  const auto* y = static_cast<const float*>(ex.output_data(0));
  for (int i = 0; i < 16; ++i)
    if (y[i] != std::max(x[i], 0.0f)) {
      std::fprintf(stderr, "kiln_bench_runtime: wrong Relu output %d: %g\n", i, y[i]);
      return 1;
    }
  double run_us = median_us(samples, calls, [&] { ex.run(); });
  // Allocations: counted around run() calls alone (the timing above keeps a
  // vector of samples, which allocates).
  const int64_t runs = static_cast<int64_t>(samples) * calls;
  const int64_t news_before = g_news.load();
  for (int64_t r = 0; r < runs; ++r) ex.run();
  const int64_t news = g_news.load() - news_before;

  std::printf("kiln_bench_runtime: %d threads%s\n", threads,
              smoke ? " (smoke: timings meaningless)" : "");
  std::printf("  kiln_parallel_for, empty body           %8.2f us per launch\n", empty_us);
  std::printf(
      "  kiln_parallel_for, ~1 us per thread      %8.2f us (serial 1 us body: %.2f us; overhead "
      "%.2f us)\n",
      one_us, serial_us, one_us - serial_us);
  std::printf("  GraphExecutor::run(), one Relu kernel    %8.1f ns per run\n", run_us * 1000);
  std::printf("  operator new calls inside run()          %8lld in %lld runs\n",
              static_cast<long long>(news), static_cast<long long>(runs));
  if (news != 0) {
    std::fprintf(stderr, "kiln_bench_runtime: run() allocated %lld times\n",
                 static_cast<long long>(news));
    return 1;
  }
  return 0;
}
