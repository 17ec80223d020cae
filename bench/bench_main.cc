// kiln_bench: kiln's hand-scheduled kernels beside oneDNN on the shapes kiln
// is judged on, both measured in this run with the same thread count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "kiln_kernels.h"
#include "onednn_reference.h"
#include "peak.h"
#include "runtime/c_runtime_api.h"

namespace {

using kiln::bench::onednn_conv2d_ms;
using kiln::bench::onednn_sgemm_ms;

struct Row {
  std::string name;
  double flops;  // floating-point operations of one run
  double kiln_ms;
  double onednn_ms;
  double ratio;  // kiln time / oneDNN time (median of per-round ratios)
};

struct Options {
  int threads = 2;  // the machine's two cores; MACHINE.md's peaks assume 2
  int repeat = 0;   // 0: a per-shape default of roughly half a second
};

// fp32 zmm FMA peaks measured in MACHINE.md: 202 GFLOP/s on one core and
// 400 on two; beyond that assume 200 per thread.
double peak_gflops(int threads) { return threads == 1 ? 202.0 : 200.0 * threads; }

double gflops(double flops, double ms) { return flops / (ms * 1e6); }

// "-" for values that are not there yet (NaN), else the number.
std::string cell(double v, const char* fmt) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

void print_table(const std::vector<Row>& rows, int threads, double measured_peak) {
  const double peak = peak_gflops(threads);
  std::printf("threads: %d   peak: %.0f GFLOP/s (fp32 FMA zmm, MACHINE.md)   times: medians\n",
              threads, peak);
  std::printf("FMA peak measured in this run: %.0f GFLOP/s (%.0f %% of MACHINE.md's)\n\n",
              measured_peak, 100.0 * measured_peak / peak);
  std::printf("%-34s | %9s | %12s | %8s | %10s | %9s | %14s | %11s\n", "op", "kiln ms",
              "kiln GFLOP/s", "% peak", "% measured", "oneDNN ms", "oneDNN GFLOP/s", "kiln/oneDNN");
  std::printf("%s\n", std::string(34 + 9 + 12 + 8 + 10 + 9 + 14 + 11 + 21, '-').c_str());
  for (const Row& r : rows) {
    double kiln_gf = gflops(r.flops, r.kiln_ms);
    std::printf("%-34s | %9s | %12s | %8s | %10s | %9s | %14s | %11s\n", r.name.c_str(),
                cell(r.kiln_ms, "%.3f").c_str(), cell(kiln_gf, "%.1f").c_str(),
                cell(100.0 * kiln_gf / peak, "%.1f %%").c_str(),
                cell(measured_peak > 0 ? 100.0 * kiln_gf / measured_peak : NAN, "%.1f %%").c_str(),
                cell(r.onednn_ms, "%.3f").c_str(),
                cell(gflops(r.flops, r.onednn_ms), "%.1f").c_str(),
                // Time ratio: above 1 means kiln is slower than oneDNN.
                cell(r.ratio, "%.2f").c_str());
  }
}

// kiln and oneDNN are timed in alternating rounds, so that a slow window of
// this shared machine hits both: each column is the median of the rounds'
// medians, and the ratio the median of the per-round ratios.
constexpr int kRounds = 5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

template <typename KilnFn, typename OneDnnFn>
Row interleaved_row(const std::string& name, double flops, KilnFn kiln_fn, OneDnnFn onednn_fn) {
  std::vector<double> kiln_ms, onednn_ms, ratio;
  std::string config;
  for (int r = 0; r < kRounds; ++r) {
    auto k = kiln_fn();
    config = k.config;
    kiln_ms.push_back(k.median_ms);
    onednn_ms.push_back(onednn_fn());
    ratio.push_back(kiln_ms.back() / onednn_ms.back());
  }
  std::printf("%s: kiln config %s\n", name.c_str(), config.c_str());
  return {name, flops, median(kiln_ms), median(onednn_ms), median(ratio)};
}

Row dense_row(const std::string& name, int64_t M, int64_t N, int64_t K, int repeat) {
  return interleaved_row(
      name, 2.0 * M * N * K, [&] { return kiln::bench::kiln_dense_ms(M, N, K, repeat); },
      [&] { return onednn_sgemm_ms(M, N, K, repeat); });
}

Row conv_row(const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC,
             int64_t KH, int64_t KW, int64_t stride, int64_t pad, int repeat) {
  const int64_t OH = (H + 2 * pad - KH) / stride + 1, OW = (W + 2 * pad - KW) / stride + 1;
  return interleaved_row(
      name, 2.0 * N * OC * OH * OW * C * KH * KW,
      [&] { return kiln::bench::kiln_conv2d_ms(N, C, H, W, OC, KH, KW, stride, pad, repeat); },
      [&] { return onednn_conv2d_ms(N, C, H, W, OC, KH, KW, stride, pad, repeat); });
}

int parse_positive(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 1 || v > 1 << 20) {
    std::fprintf(stderr, "kiln_bench: %s needs a positive integer, got '%s'\n", flag, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--repeat") && i + 1 < argc) {
      (a == "--threads" ? o.threads : o.repeat) = parse_positive(argv[i], argv[i + 1]);
      ++i;
    } else {
      std::fprintf(stderr, "usage: kiln_bench [--threads N] [--repeat N]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace

static int run(int argc, char** argv) {
  Options opt = parse_args(argc, argv);
  int threads = kiln::bench::set_onednn_threads(opt.threads);
  if (threads != opt.threads) {
    std::fprintf(stderr, "kiln_bench: could not set %d OpenMP threads (got %d)\n", opt.threads,
                 threads);
    return 1;
  }
  kiln_set_num_threads(opt.threads);
  auto rep = [&](int dflt) { return opt.repeat ? opt.repeat : dflt; };
  std::vector<Row> rows;
  rows.push_back(dense_row("dense 1024x1024x1024", 1024, 1024, 1024, rep(20)));
  rows.push_back(dense_row("dense 1x2048 . 2048x1000", 1, 1000, 2048, rep(100)));
  rows.push_back(
      conv_row("conv2d 256->256 3x3 p1, 14x14, N1", 1, 256, 14, 14, 256, 3, 3, 1, 1, rep(100)));
  print_table(rows, threads, kiln::bench::measured_fma_peak_gflops(threads));
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench: error: %s\n", e.what());
    return 1;
  }
}
