// kiln_bench: kiln's hand-scheduled kernels beside oneDNN on the shapes kiln
// is judged on, both measured in this run with the same thread count.
// `kiln_bench --smoke` (ctest bench_kiln_smoke) runs every benchmark's code on
// a tiny shape and checks both against the reference, so the table cannot rot
// unnoticed between the runs that print it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "kiln_kernels.h"
#include "onednn_reference.h"
#include "ops/reference.h"
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
  bool smoke = false;
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
  std::vector<std::string> dropped;
  for (int r = 0; r < kRounds; ++r) {
    auto k = kiln_fn();
    config = k.config;
    dropped = k.dropped;
    kiln_ms.push_back(k.median_ms);
    onednn_ms.push_back(onednn_fn());
    ratio.push_back(kiln_ms.back() / onednn_ms.back());
  }
  std::printf("%s: kiln config %s\n", name.c_str(), config.c_str());
  // The row still runs, on the fallback's value for that knob: say so loudly.
  for (const std::string& d : dropped)
    std::printf("%s: WARNING: hand-picked knob not applied: %s\n", name.c_str(), d.c_str());
  return {name, flops, median(kiln_ms), median(onednn_ms), median(ratio)};
}

struct DenseShape {
  int64_t M, N, K;
};
struct ConvShape {
  int64_t N, C, H, W, OC, KH, KW, stride, pad;
  int64_t OH() const { return (H + 2 * pad - KH) / stride + 1; }
  int64_t OW() const { return (W + 2 * pad - KW) / stride + 1; }
};
using Shape = std::variant<DenseShape, ConvShape>;

// A row of the table and the tiny shape `--smoke` runs in its place: the same
// code path (config picks, compile, check) on a shape that takes milliseconds.
// Smoke shapes are chosen so that the row's hand-picked knobs still apply.
struct Benchmark {
  std::string name;
  Shape full, smoke;
  int default_repeat;  // about half a second of kiln runs at full size
};

const std::vector<Benchmark>& benchmarks() {
  static const std::vector<Benchmark> b = {
      {"dense 1024x1024x1024", DenseShape{1024, 1024, 1024}, DenseShape{64, 512, 32}, 20},
      {"dense 1x2048 . 2048x1000", DenseShape{1, 1000, 2048}, DenseShape{1, 80, 64}, 100},
      {"conv2d 256->256 3x3 p1, 14x14, N1", ConvShape{1, 256, 14, 14, 256, 3, 3, 1, 1},
       ConvShape{1, 32, 7, 7, 64, 3, 3, 1, 1}, 100},
  };
  return b;
}

double flops_of(const Shape& s) {
  if (auto* d = std::get_if<DenseShape>(&s)) return 2.0 * d->M * d->N * d->K;
  const auto& c = std::get<ConvShape>(s);
  return 2.0 * c.N * c.OC * c.OH() * c.OW() * c.C * c.KH * c.KW;
}

std::string describe(const Shape& s) {
  char buf[96];
  if (auto* d = std::get_if<DenseShape>(&s)) {
    std::snprintf(buf, sizeof buf, "dense M=%lld N=%lld K=%lld", (long long)d->M, (long long)d->N,
                  (long long)d->K);
  } else {
    const auto& c = std::get<ConvShape>(s);
    std::snprintf(buf, sizeof buf, "conv2d %lldx%lldx%lldx%lld -> %lld, %lldx%lld s%lld p%lld",
                  (long long)c.N, (long long)c.C, (long long)c.H, (long long)c.W, (long long)c.OC,
                  (long long)c.KH, (long long)c.KW, (long long)c.stride, (long long)c.pad);
  }
  return buf;
}

kiln::bench::KilnResult kiln_run(const Shape& s, int repeat) {
  if (auto* d = std::get_if<DenseShape>(&s))
    return kiln::bench::kiln_dense_ms(d->M, d->N, d->K, repeat);
  const auto& c = std::get<ConvShape>(s);
  return kiln::bench::kiln_conv2d_ms(c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.pad, repeat);
}

kiln::bench::ConfigCheck kiln_config(const Shape& s) {
  if (auto* d = std::get_if<DenseShape>(&s))
    return kiln::bench::kiln_dense_config(d->M, d->N, d->K);
  const auto& c = std::get<ConvShape>(s);
  return kiln::bench::kiln_conv2d_config(c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.pad);
}

double onednn_run(const Shape& s, int repeat, std::vector<float>* result = nullptr) {
  if (auto* d = std::get_if<DenseShape>(&s))
    return onednn_sgemm_ms(d->M, d->N, d->K, repeat, result);
  const auto& c = std::get<ConvShape>(s);
  return onednn_conv2d_ms(c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.pad, repeat, result);
}

// The reference output for the inputs both kiln and oneDNN are given (same
// seeds: see onednn_reference.h and kiln_kernels.cc).
std::vector<float> reference_output(const Shape& s) {
  namespace ref = kiln::ops::reference;
  if (auto* d = std::get_if<DenseShape>(&s)) {
    auto A = ref::random_uniform(d->M * d->K, 1), B = ref::random_uniform(d->K * d->N, 2);
    std::vector<float> C(d->M * d->N);
    ref::dense(A.data(), B.data(), C.data(), d->M, d->N, d->K);
    return C;
  }
  const auto& c = std::get<ConvShape>(s);
  auto x = ref::random_uniform(c.N * c.C * c.H * c.W, 3),
       w = ref::random_uniform(c.OC * c.C * c.KH * c.KW, 4);
  std::vector<float> out(c.N * c.OC * c.OH() * c.OW());
  ref::conv2d_nchw(x.data(), w.data(), out.data(),
                   {c.N, c.C, c.H, c.W, c.OC, c.KH, c.KW, c.stride, c.stride, c.pad, c.pad, 1, 1});
  return out;
}

Row bench_row(const Benchmark& b, int repeat) {
  return interleaved_row(
      b.name, flops_of(b.full), [&] { return kiln_run(b.full, repeat); },
      [&] { return onednn_run(b.full, repeat); });
}

// Every benchmark's code path without timing anything worth reading: the
// full-size rows' configs must keep all their hand-picked knobs (a knob the
// template renamed would silently turn a row into the fallback), and on each
// smoke shape kiln's kernel and oneDNN's must both match the reference.
int smoke() {
  constexpr double kTolerance = 1e-4;
  int failures = 0;
  for (const Benchmark& b : benchmarks()) {
    for (const Shape* s : {&b.full, &b.smoke}) {
      auto c = kiln_config(*s);
      for (const std::string& d : c.dropped) {
        std::printf("FAIL %s (%s): hand-picked knob not applied: %s\n", b.name.c_str(),
                    describe(*s).c_str(), d.c_str());
        ++failures;
      }
    }
    std::string what = b.name + " at " + describe(b.smoke);
    double kiln_err = NAN, onednn_err = NAN;
    try {
      kiln_err = kiln_run(b.smoke, 1).rel_error;
    } catch (const std::exception& e) {
      std::printf("FAIL %s: kiln: %s\n", what.c_str(), e.what());
      ++failures;
    }
    try {
      std::vector<float> got, ref = reference_output(b.smoke);
      onednn_run(b.smoke, 1, &got);
      if (got.size() != ref.size())
        throw std::runtime_error("output has " + std::to_string(got.size()) + " values, not " +
                                 std::to_string(ref.size()));
      onednn_err = kiln::ops::reference::max_relative_error(got.data(), ref.data(), ref.size());
      if (!(onednn_err <= kTolerance)) {
        std::printf("FAIL %s: oneDNN differs from the reference (rel err %.3g)\n", what.c_str(),
                    onednn_err);
        ++failures;
      }
    } catch (const std::exception& e) {
      std::printf("FAIL %s: oneDNN: %s\n", what.c_str(), e.what());
      ++failures;
    }
    std::printf("smoke %s: kiln rel err %s, oneDNN rel err %s\n", what.c_str(),
                cell(kiln_err, "%.2e").c_str(), cell(onednn_err, "%.2e").c_str());
  }
  std::printf("kiln_bench --smoke: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
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
    } else if (a == "--smoke") {
      o.smoke = true;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench [--threads N] [--repeat N] [--smoke]\n"
                   "  --smoke  every benchmark on a tiny shape, kiln and oneDNN checked against\n"
                   "           the reference (exit 1 on a mismatch); no timing table\n");
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
  if (opt.smoke) return smoke();
  std::vector<Row> rows;
  for (const Benchmark& b : benchmarks())
    rows.push_back(bench_row(b, opt.repeat ? opt.repeat : b.default_repeat));
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
