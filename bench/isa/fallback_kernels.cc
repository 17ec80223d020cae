// kiln_bench_isa: the untuned build's kernels on every x86 ISA class this CPU
// can run. For each class (the host's, and AVX2 code on an AVX-512 host) it
// compiles the templates' fallback configs for that class's target, checks
// each kernel against the template's reference, and reports GFLOP/s beside
// that class's FMA peak measured in the same run (independent FMA chains at
// the class's vector width). This is what issue 11 asks of fallbacks: dense
// and 3x3 conv kernels at >= 50 % of the peak on each ISA.
//
//   kiln_bench_isa [--threads N] [--repeat N] [--smoke]
//
// `--smoke` (ctest bench_isa_smoke) runs tiny shapes, checks them, times nothing.
// AVX2 code run on an AVX-512 CPU has AVX2's 16 vector registers (VEX encodes
// no more), so its register tiles meet AVX2's constraints; its peak is that
// CPU's ymm peak, not an AVX2-only machine's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../peak.h"
#include "../timer.h"
#include "codegen/codegen.h"
#include "codegen/target.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"
#include "schedule/lower.h"

namespace {

using kiln::codegen::Target;
using kiln::ops::OpTemplate;
using kiln::ops::Workload;

// ---- kernels -------------------------------------------------------------------------

struct Case {
  std::string name;
  Workload full, smoke;
};

Workload conv(int64_t c, int64_t hw, int64_t oc) {
  return Workload{"conv2d_NCHWc.x86",
                  {{"data", {1, c, hw, hw}},
                   {"kernel", {oc, c, 3, 3}},
                   {"strides", {1, 1}},
                   {"pads", {1, 1, 1, 1}},
                   {"dilation", {1, 1}}}};
}

// The same convolution as conv(), by Winograd (conv2d_winograd_NCHWc.x86;
// GFLOP/s count the direct convolution's operations).
Workload wino(int64_t c, int64_t hw, int64_t oc) {
  Workload w = conv(c, hw, oc);
  w.template_name = "conv2d_winograd_NCHWc.x86";
  return w;
}

// A grouped 3x3 of C channels in groups of cg (equal widths) under a group
// template: group_conv2d_NCHWc.x86 (blocks inside a group) or
// group_conv2d_lanes_NCHWc.x86 (several whole groups per block).
Workload grouped(const char* tmpl, int64_t c, int64_t hw, int64_t cg, int64_t stride) {
  return Workload{tmpl,
                  {{"data", {1, c, hw, hw}},
                   {"kernel", {c, cg, 3, 3}},
                   {"strides", {stride, stride}},
                   {"pads", {1, 1, 1, 1}},
                   {"dilation", {1, 1}}}};
}
constexpr const char* kGroup = "group_conv2d_NCHWc.x86";
constexpr const char* kLanes = "group_conv2d_lanes_NCHWc.x86";

Workload dense(int64_t m, int64_t k, int64_t n) {
  return Workload{"dense_pack.x86", {{"data", {m, k}}, {"weight", {k, n}}}};
}

// The shapes the fallback must be good on: ResNet's 3x3 convs early and late,
// ResNeXt's grouped 3x3s, a transformer's dense layers (128 tokens) and a square GEMM. Smoke shapes
// leave partial tiles (odd widths, N not a multiple of the column block).
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"conv 3x3 64->64 56x56", conv(64, 56, 64), conv(16, 9, 24)},
      {"conv 3x3 128->128 28x28", conv(128, 28, 128), conv(8, 5, 16)},
      {"conv 3x3 256->256 14x14", conv(256, 14, 256), conv(32, 7, 40)},
      {"conv 3x3 512->512 7x7", conv(512, 7, 512), conv(16, 3, 16)},
      {"winograd 3x3 64->64 56x56", wino(64, 56, 64), wino(16, 9, 24)},
      {"winograd 3x3 128->128 28x28", wino(128, 28, 128), wino(8, 5, 16)},
      {"winograd 3x3 256->256 14x14", wino(256, 14, 256), wino(32, 7, 40)},
      {"winograd 3x3 512->512 7x7", wino(512, 7, 512), wino(16, 3, 16)},
      // ResNeXt-50 32x4d's grouped 3x3s of 4 and 8 channels per group, by
      // both group templates (the lanes one is the untuned default).
      {"group 3x3 128/32 56x56", grouped(kGroup, 128, 56, 4, 1), grouped(kGroup, 32, 9, 4, 1)},
      {"group-lanes 3x3 128/32 56x56", grouped(kLanes, 128, 56, 4, 1),
       grouped(kLanes, 32, 9, 4, 1)},
      {"group 3x3 256/32 28x28", grouped(kGroup, 256, 28, 8, 1), grouped(kGroup, 32, 7, 8, 2)},
      {"group-lanes 3x3 256/32 28x28", grouped(kLanes, 256, 28, 8, 1),
       grouped(kLanes, 32, 7, 8, 2)},
      {"dense 128x256 . 256x1024", dense(128, 256, 1024), dense(9, 20, 52)},
      {"dense 128x1024 . 1024x256", dense(128, 1024, 256), dense(13, 33, 24)},
      {"dense 1024x1024 . 1024x1024", dense(1024, 1024, 1024), dense(31, 17, 40)},
  };
  return c;
}

struct Result {
  double ms = 0, rel_err = 0;
  std::string config;
};

// Compiles w's fallback for `target`, checks it against the template's
// reference on random inputs (physical layouts), then times it.
Result run_fallback(const Workload& w, const Target& target, int repeat) {
  const OpTemplate& t = kiln::ops::get_template(w.template_name);
  kiln::schedule::Config cfg = t.fallback(w, target.isa());
  kiln::ops::Kernel k = kiln::ops::make_kernel(t, w, cfg);
  kiln::ir::LoweredFunc f = kiln::schedule::lower(k.sch, k.args, "fallback");
  auto mod = kiln::codegen::jit_compile({f}, target);
  kiln_kernel_fn fn = mod->get_function(f.name);

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::vector<float>> inputs;
  for (const auto& shape : t.input_shapes(w, cfg)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    inputs.emplace_back(n);
    for (float& v : inputs.back()) v = u(rng);
  }
  int64_t out_n = 1;
  for (int64_t d : t.output_shape(w, cfg)) out_n *= d;
  std::vector<float> out(out_n, NAN), ref(out_n);
  std::vector<void*> args;
  std::vector<const float*> in_ptrs;
  for (auto& in : inputs) {
    args.push_back(in.data());
    in_ptrs.push_back(in.data());
  }
  args.push_back(out.data());
  if (fn(args.data()) != 0) throw std::runtime_error(w.key() + ": the kernel failed");
  t.reference(w, cfg, in_ptrs, ref.data());
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < out_n; ++i) {
    max_ref = std::max(max_ref, double(std::fabs(ref[i])));
    double d = std::fabs(double(out[i]) - double(ref[i]));
    max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
  }
  Result r;
  r.rel_err = max_diff / std::max(max_ref, 1e-30);
  r.config = cfg.to_json();
  r.ms = repeat > 0 ? kiln::bench::time_ms([&] { fn(args.data()); }, 3, repeat).median_ms : 0;
  return r;
}

// The x86 ISA classes this CPU runs, each with the target that builds for it.
std::vector<std::pair<Target, int>> isa_targets() {
  std::vector<std::pair<Target, int>> out;
  Target host = Target::host();
  if (host.arch() != "x86_64") return out;
  if (host.isa().vector_bits >= 512) out.emplace_back(host, 512);
  if (kiln::runtime::host_has_cpu_feature("avx2") && kiln::runtime::host_has_cpu_feature("fma"))
    out.emplace_back(host.isa().vector_bits >= 512
                         ? Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell")
                         : host,
                     256);
  return out;
}

int run(int argc, char** argv) {
  int threads = 2, repeat = 0;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--repeat") && i + 1 < argc)
      (a == "--threads" ? threads : repeat) = std::max(1, std::atoi(argv[++i]));
    else if (a == "--smoke")
      smoke = true;
    else {
      std::fprintf(stderr, "usage: kiln_bench_isa [--threads N] [--repeat N] [--smoke]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  kiln_set_num_threads(threads);
  auto targets = isa_targets();
  if (targets.empty()) {
    std::printf("kiln_bench_isa: SKIP: this CPU has neither AVX-512 nor AVX2+FMA\n");
    return 77;
  }
  int failures = 0;
  if (!smoke)
    std::printf(
        "threads: %d   times: medians   peak: FMA chains at the ISA's width, this run\n\n"
        "| ISA class | target | kernel | GFLOP/s | %% of peak | peak GFLOP/s | config |\n"
        "|---|---|---|---:|---:|---:|---|\n",
        threads);
  for (const auto& [target, bits] : targets) {
    double peak = smoke ? 0 : kiln::bench::measured_fma_peak_gflops(threads, bits);
    for (const Case& c : cases()) {
      const Workload& w = smoke ? c.smoke : c.full;
      const OpTemplate& t = kiln::ops::get_template(w.template_name);
      Result r;
      try {
        r = run_fallback(w, target, smoke ? 0 : (repeat ? repeat : 20));
      } catch (const std::exception& e) {
        std::printf("FAIL %s on %s: %s\n", c.name.c_str(), target.str().c_str(), e.what());
        ++failures;
        continue;
      }
      if (!(r.rel_err <= 1e-4)) {
        std::printf("FAIL %s on %s: rel err %.3g\n", c.name.c_str(), target.str().c_str(),
                    r.rel_err);
        ++failures;
      }
      if (smoke) {
        std::printf("smoke %s (%s) on %s: rel err %.2e\n", c.name.c_str(), w.key().c_str(),
                    target.isa().isa_class.c_str(), r.rel_err);
        continue;
      }
      double gflops = t.flops(w) / (r.ms * 1e6);
      std::printf("| %s | %s | %s | %.1f | %.0f %% | %.0f | `%s` |\n",
                  target.isa().isa_class.c_str(), target.cpu.c_str(), c.name.c_str(), gflops,
                  100 * gflops / peak, peak, r.config.c_str());
      std::fflush(stdout);
    }
  }
  if (smoke) std::printf("kiln_bench_isa --smoke: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_isa: %s\n", e.what());
    return 1;
  }
}
