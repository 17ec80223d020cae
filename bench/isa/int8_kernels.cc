// kiln_bench_int8: the integer templates (dense_int8.x86, conv2d_NCHWc_int8.x86,
// conv2d_winograd_NCHWc_int8.x86, depthwise_conv2d_NCHWc_int8.x86) beside the float32 templates on
// the same shapes, on this CPU's widest ISA (or --target's, which this CPU must be able to run).
// Each kernel is checked first (integer: bit-exact against the template's reference; float:
// relative error), then timed (medians). GOP/s count one multiply and one add per product (2 M N
// K), for both, and are reported (depthwise: 2 C OH OW KH KW, which no dot product serves, so its
// "% int8 peak" only says how far it is from the dense kernels' roof) against the int8 peak
// (independent vpdpbusd chains) and the fp32 peak (independent FMA chains) measured in the same
// run. On a target without a dot instruction (AVX2: --target "llvm -mcpu=haswell") the int8 peak is
// that of kiln's exact AVX2 dot sequence (two vpmaddwd on int16 pairs), printed beside vpmaddubsw +
// vpmaddwd's (bench/peak.h) and the 256-bit FMA peak.
//
//   kiln_bench_int8 [--threads N] [--repeat N] [--search N] [--target T] [--smoke]
//                   [--depthwise-blocks]
//
// --depthwise-blocks times instead depthwise_conv2d_NCHWc_int8.x86 on MobileNetV2's depthwise
// layers in the whole-channel block (whole_channels=[1], the AMX convolutions' NHWC layout) against
// the same layers in the 16-channel block (the fallback on every other target), in alternation:
// what the NHWC layout costs the depthwise kernel per se.
//
// --search N also tries N random configs of each space that fit the ISA and
// keeps the fastest (a small stand-in for tuning); 0 (default) times the
// fallback only. Candidates are timed in alternation (--repeat samples each,
// default 15), int8 and fp32 interleaved. `--smoke` (ctest bench_int8_smoke) runs tiny shapes with
// partial tiles, checks them, times nothing.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../peak.h"
#include "../timer.h"
#include "codegen/codegen.h"
#include "codegen/target.h"
#include "ops/conv2d.h"
#include "ops/conv2d_int8.h"
#include "ops/dense.h"
#include "ops/dense_int8.h"
#include "ops/depthwise_conv2d_int8.h"
#include "ops/op_template.h"
#include "ops/winograd_conv2d_int8.h"
#include "runtime/c_runtime_api.h"
#include "schedule/lower.h"

namespace {

using kiln::codegen::Target;
using kiln::ops::OpTemplate;
using kiln::ops::Workload;
using kiln::schedule::Config;

kiln::ops::Conv2DAttrs conv_attrs(int64_t c, int64_t hw, int64_t oc, int64_t k) {
  return {1, c, hw, hw, oc, k, k, 1, 1, k / 2, k / 2, k / 2, k / 2, 1, 1, 1};
}

Workload conv_f32(int64_t c, int64_t hw, int64_t oc, int64_t k) {
  return kiln::ops::conv2d_workload("conv2d_NCHWc.x86", conv_attrs(c, hw, oc, k));
}
Workload conv_i8(int64_t c, int64_t hw, int64_t oc, int64_t k) {
  return kiln::ops::conv2d_int8_workload(conv_attrs(c, hw, oc, k), 3);
}
// Depthwise (groups = C), padding k/2 on every side as torchvision's MobileNetV2 has.
kiln::ops::Conv2DAttrs dw_attrs(int64_t c, int64_t hw, int64_t k, int64_t stride) {
  return {1, c, hw, hw, c, k, k, stride, stride, k / 2, k / 2, k / 2, k / 2, 1, 1, c};
}
Workload dw_f32(int64_t c, int64_t hw, int64_t k, int64_t stride) {
  return kiln::ops::conv2d_workload("depthwise_conv2d_NCHWc.x86", dw_attrs(c, hw, k, stride));
}
Workload dw_i8(int64_t c, int64_t hw, int64_t k, int64_t stride) {
  return kiln::ops::depthwise_conv2d_int8_workload(dw_attrs(c, hw, k, stride), 3);
}
Workload dw_i8_whole(int64_t c, int64_t hw, int64_t k, int64_t stride) {
  return kiln::ops::depthwise_conv2d_int8_workload(dw_attrs(c, hw, k, stride), 3, true);
}
// A network's first conv: 7x7 stride 2 over 3 channels (ResNet's stem), with
// 7-bit weights as `kiln quantize --reduce-range` writes them; `fold` packs
// the dot over (kw, c) pairs (fold_kw=[1], ops/conv2d_int8.h).
kiln::ops::Conv2DAttrs stem_attrs(int64_t hw) {
  return {1, 3, hw, hw, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1};
}
Workload stem_i8(int64_t hw, bool fold) {
  Workload w = kiln::ops::conv2d_int8_workload(stem_attrs(hw), 3, /*narrow_weights=*/true);
  return fold ? kiln::ops::with_folded_kw(w) : w;
}
Workload stem_f32(int64_t hw) {
  return kiln::ops::conv2d_workload("conv2d_NCHWc.x86", stem_attrs(hw));
}
// The same 3x3 convolutions by Winograd: int8 F(2x2) in integers
// (ops/winograd_conv2d_int8.h) beside float F(4x4)/F(2x2); both count the
// direct convolution's operations (effective GOP/s, which may pass the peak).
Workload wino_i8(int64_t c, int64_t hw, int64_t oc) {
  return kiln::ops::winograd_int8_workload(conv_i8(c, hw, oc, 3));
}
Workload wino_f32(int64_t c, int64_t hw, int64_t oc) {
  return kiln::ops::conv2d_workload("conv2d_winograd_NCHWc.x86", conv_attrs(c, hw, oc, 3));
}
Workload dense_f32(int64_t m, int64_t n, int64_t k) {
  return kiln::ops::dense_workload("dense_pack.x86", {m, n, k});
}

struct Case {
  std::string name;
  Workload int8, f32, smoke_int8, smoke_f32;
};

// ResNet-50's first-stage 3x3 and 1x1 (bottleneck reduce) convolutions and a
// square GEMM. Smoke shapes leave partial tiles.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"conv 3x3 64->64 56x56", conv_i8(64, 56, 64, 3), conv_f32(64, 56, 64, 3),
       conv_i8(12, 9, 20, 3), conv_f32(12, 9, 20, 3)},
      {"Winograd 3x3 64->64 56x56 (effective)", wino_i8(64, 56, 64), wino_f32(64, 56, 64),
       wino_i8(12, 9, 20), wino_f32(12, 9, 20)},
      {"Winograd 3x3 256->256 14x14 (effective)", wino_i8(256, 14, 256), wino_f32(256, 14, 256),
       wino_i8(16, 7, 16), wino_f32(16, 7, 16)},
      {"conv 1x1 256->64 56x56", conv_i8(256, 56, 64, 1), conv_f32(256, 56, 64, 1),
       conv_i8(32, 7, 24, 1), conv_f32(32, 7, 24, 1)},
      {"stem 7x7/2 3->64 224x224", stem_i8(224, false), stem_f32(224), stem_i8(13, false),
       stem_f32(13)},
      {"stem 7x7/2 3->64 224x224, fold_kw", stem_i8(224, true), stem_f32(224), stem_i8(13, true),
       stem_f32(13)},
      {"dense 1024x1024x1024", kiln::ops::dense_int8_workload(1024, 1024, 1024),
       dense_f32(1024, 1024, 1024), kiln::ops::dense_int8_workload(31, 17, 41),
       dense_f32(31, 17, 41)},
      // MobileNetV2's depthwise convolutions: the widest stride-1 and stride-2
      // layers and a late 7x7 one (smoke: a partial ow tile).
      {"depthwise 3x3 144ch 56x56", dw_i8(144, 56, 3, 1), dw_f32(144, 56, 3, 1), dw_i8(32, 9, 3, 1),
       dw_f32(32, 9, 3, 1)},
      {"depthwise 3x3 s2 96ch 112x112", dw_i8(96, 112, 3, 2), dw_f32(96, 112, 3, 2),
       dw_i8(16, 11, 3, 2), dw_f32(16, 11, 3, 2)},
      {"depthwise 3x3 960ch 7x7", dw_i8(960, 7, 3, 1), dw_f32(960, 7, 3, 1), dw_i8(48, 7, 5, 1),
       dw_f32(48, 7, 5, 1)},
  };
  return c;
}

// One compiled, checked candidate with its buffers, ready to time.
struct Candidate {
  std::string config;
  double err = 0;
  std::unique_ptr<kiln::codegen::JitModule> mod;
  kiln_kernel_fn fn = nullptr;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<void*> args;
  std::vector<double> samples_ms;
  double median_ms() const {
    std::vector<double> s = samples_ms;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s[(s.size() - 1) / 2];
  }
  // The best case the machine allowed (it is shared: other processes take a
  // core now and then, which the median includes and the minimum does not).
  double min_ms() const {
    return samples_ms.empty() ? 0 : *std::min_element(samples_ms.begin(), samples_ms.end());
  }
};

// Compiles cfg for target and checks it on random inputs of the template's
// types against its reference (typed buffers): integer outputs bit-exact.
Candidate compile_config(const Workload& w, const Config& cfg, const Target& target) {
  const OpTemplate& t = kiln::ops::get_template(w.template_name);
  kiln::ops::Kernel k = kiln::ops::make_kernel(t, w, cfg);
  kiln::ir::LoweredFunc f = kiln::schedule::lower(k.sch, k.args, "bench");
  Candidate c;
  c.config = cfg.to_json();
  c.mod = kiln::codegen::jit_compile({f}, target);
  c.fn = c.mod->get_function(f.name);
  std::mt19937_64 rng(1);
  auto types = t.input_dtypes(w);
  auto shapes = t.input_shapes(w, cfg);
  std::vector<const void*> in_ptrs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : shapes[i]) n *= d;
    c.buffers.emplace_back(size_t(n) * types[i].bytes());
    t.fill_random_input(w, i, types[i], c.buffers.back().data(), n, rng);
    in_ptrs.push_back(c.buffers.back().data());
  }
  int64_t out_n = 1;
  for (int64_t d : t.output_shape(w, cfg)) out_n *= d;
  kiln::ir::DataType ot = t.output_dtype(w);
  c.buffers.emplace_back(size_t(out_n) * ot.bytes(), 0xA5);
  for (auto& b : c.buffers) c.args.push_back(b.data());
  if (c.fn(c.args.data()) != 0) throw std::runtime_error(w.key() + ": the kernel failed");
  std::vector<uint8_t> ref(c.buffers.back().size());
  t.reference_typed(w, cfg, in_ptrs, ref.data());
  c.err = kiln::ops::max_error(ot, c.buffers.back().data(), ref.data(), out_n);
  if (!(c.err <= 1e-4))
    throw std::runtime_error(w.key() + " " + c.config + ": wrong result (error " +
                             std::to_string(c.err) + ")");
  return c;
}

// The fallback, then `search` random configs that fit the ISA, each compiled and checked.
std::vector<Candidate> candidates(const Workload& w, const Target& target, int search) {
  const OpTemplate& t = kiln::ops::get_template(w.template_name);
  std::vector<Config> configs = {t.fallback(w, target.isa())};
  std::mt19937_64 rng(7);
  auto space = t.space(w);
  for (int tries = 0; int(configs.size()) <= search && tries < 50 * (search + 1); ++tries) {
    Config c = space.random(rng);
    if (t.fits(w, c, target.isa())) configs.push_back(c);
  }
  std::vector<Candidate> out;
  for (const Config& c : configs) out.push_back(compile_config(w, c, target));
  return out;
}

// Times every candidate of both sets in alternation, `rounds` samples each
// (a shared machine's load changes from second to second: alternating keeps
// the int8 / fp32 ratio fair), and returns the fastest of each set by median.
std::pair<const Candidate*, const Candidate*> time_alternating(std::vector<Candidate>& a,
                                                               std::vector<Candidate>& b,
                                                               int rounds) {
  for (auto* set : {&a, &b})
    for (Candidate& c : *set) c.fn(c.args.data());  // warm up
  for (int r = 0; r < rounds; ++r)
    for (auto* set : {&a, &b})
      for (Candidate& c : *set)
        c.samples_ms.push_back(kiln::bench::time_ms([&] { c.fn(c.args.data()); }, 0, 1).median_ms);
  auto best = [](const std::vector<Candidate>& s) {
    const Candidate* m = &s.front();
    for (const Candidate& c : s)
      if (c.median_ms() < m->median_ms()) m = &c;
    return m;
  };
  return {best(a), best(b)};
}

// MobileNetV2's depthwise layers (channels, input size, stride), all 3x3.
struct DwLayer {
  int64_t c, hw, stride;
};
const DwLayer kMobileNetV2Depthwise[] = {{32, 112, 1}, {96, 112, 2}, {144, 56, 1}, {144, 56, 2},
                                         {192, 28, 1}, {192, 28, 2}, {384, 14, 1}, {576, 14, 1},
                                         {576, 14, 2}, {960, 7, 1}};

// The whole-channel fallback with c_parallel set (the chunks in the parallel
// loop, or inside each ow tile).
Config with_c_parallel(const Workload& w, const Config& fb, int64_t c_parallel) {
  const OpTemplate& t = kiln::ops::get_template(w.template_name);
  return kiln::ops::detail::KnobValues()
      .knob("c_bn", fb.knob("c_bn"))
      .knob("c_vec", fb.knob("c_vec"))
      .knob("c_parallel", c_parallel)
      .split("tile_ow", kiln::ops::conv2d_attrs(w, kiln::ops::ConvKind::kDepthwise).out_width(),
             {fb.split("tile_ow").back()})
      .knob("unroll_kw", fb.knob("unroll_kw"))
      .knob("pad_mode", fb.knob("pad_mode"))
      .in(t.space(w));
}

// --depthwise-blocks: the whole-channel block's fallback, with its chunks in
// the parallel loop and inside the ow tiles, against the 16-channel block's
// fallback, all three in alternation.
int run_depthwise_blocks(const Target& target, int threads, int repeat, bool smoke) {
  int failures = 0;
  if (!smoke) {
    std::printf("threads: %d   target: %s   times: medians (best)   configs: fallbacks\n\n",
                threads, target.str().c_str());
    std::printf(
        "| depthwise 3x3 | whole, c_parallel 1: GOP/s | whole, c_parallel 0 | 16-channel |"
        " 16 / whole (c_parallel 1, 0) | whole fallback | 16-channel fallback |\n"
        "|---|---:|---:|---:|---:|---|---|\n");
  }
  for (const DwLayer& l : kMobileNetV2Depthwise) {
    int64_t hw = smoke ? 9 : l.hw;
    Workload whole = dw_i8_whole(l.c, hw, 3, l.stride), c16 = dw_i8(l.c, hw, 3, l.stride);
    std::string name = std::to_string(l.c) + "ch " + std::to_string(l.hw) + "x" +
                       std::to_string(l.hw) + " s" + std::to_string(l.stride);
    const OpTemplate& t = kiln::ops::get_template(whole.template_name);
    std::vector<Candidate> cw, cb;
    try {
      Config fb = t.fallback(whole, target.isa());
      for (int64_t cp : {1, 0})
        cw.push_back(compile_config(whole, with_c_parallel(whole, fb, cp), target));
      cb.push_back(compile_config(c16, t.fallback(c16, target.isa()), target));
    } catch (const std::exception& e) {
      std::printf("FAIL %s: %s\n", name.c_str(), e.what());
      ++failures;
      continue;
    }
    if (smoke) continue;
    time_alternating(cw, cb, repeat ? repeat : 15);
    double ops = t.flops(whole);
    auto gops = [&](double ms) { return ops / (ms * 1e6); };
    const Candidate &p1 = cw[0], &p0 = cw[1], &b = cb[0];
    std::printf("| %s | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.2fx, %.2fx | `%s` | `%s` |\n",
                name.c_str(), gops(p1.median_ms()), gops(p1.min_ms()), gops(p0.median_ms()),
                gops(p0.min_ms()), gops(b.median_ms()), gops(b.min_ms()),
                b.median_ms() / p1.median_ms(), b.median_ms() / p0.median_ms(),
                t.fallback(whole, target.isa()).to_json().c_str(), b.config.c_str());
  }
  if (smoke)
    std::printf("kiln_bench_int8 --depthwise-blocks --smoke: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

int run(int argc, char** argv) {
  int threads = 2, repeat = 0, search = 0;
  bool smoke = false, depthwise_blocks = false;
  std::string target_str;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--repeat" || a == "--search") && i + 1 < argc) {
      int v = std::max(0, std::atoi(argv[++i]));
      (a == "--threads" ? threads : a == "--repeat" ? repeat : search) = v;
    } else if (a == "--target" && i + 1 < argc) {
      target_str = argv[++i];
    } else if (a == "--smoke") {
      smoke = true;
    } else if (a == "--depthwise-blocks") {
      depthwise_blocks = true;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench_int8 [--threads N] [--repeat N] [--search N] [--target T] "
                   "[--smoke] [--depthwise-blocks]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  kiln_set_num_threads(std::max(1, threads));
  Target host = Target::host();
  if (host.arch() != "x86_64") {
    std::printf("kiln_bench_int8: SKIP: not an x86_64 host\n");
    return 77;
  }
  Target target = target_str.empty() ? host : Target::parse(target_str);
  for (const std::string& f : target.required_features())
    if (!host.has_feature(f)) {
      std::printf("kiln_bench_int8: SKIP: this CPU lacks %s, which %s needs\n", f.c_str(),
                  target.str().c_str());
      return 77;
    }
  if (depthwise_blocks) return run_depthwise_blocks(target, threads, repeat, smoke);
  // Without a dot instruction the int8 roof is the AVX2 sequence's.
  const bool dot = target.isa().int8_dot_instruction;
  double maddubs_peak = 0;
  int failures = 0;
  double int8_peak = 0, f32_peak = 0;
  // The peaks: the best of three measurements spread over the run (on a shared
  // machine a single one may fall in a window where another process has a core).
  auto measure_peaks = [&] {
    using kiln::bench::Avx2Int8Dot;
    int8_peak = std::max(
        int8_peak, dot ? kiln::bench::measured_vnni_peak_gops(threads)
                       : kiln::bench::measured_avx2_int8_peak_gops(threads, Avx2Int8Dot::Pmaddwd));
    if (!dot)
      maddubs_peak = std::max(
          maddubs_peak, kiln::bench::measured_avx2_int8_peak_gops(threads, Avx2Int8Dot::Pmaddubsw));
    f32_peak = std::max(f32_peak,
                        kiln::bench::measured_fma_peak_gflops(threads, target.isa().vector_bits));
  };
  struct Row {
    std::string name, config_int8, config_f32;
    double int8, int8_best, f32, f32_best;  // GOP/s from the median and the best time
  };
  std::vector<Row> rows;
  if (!smoke) {
    measure_peaks();
    std::printf(
        "threads: %d   target: %s   times: medians   configs: fallback + %d random that fit\n"
        "GOP/s from the median time (best time in parentheses)\n",
        threads, target.str().c_str(), search);
  }
  for (const Case& c : cases()) {
    const Workload& wi = smoke ? c.smoke_int8 : c.int8;
    const Workload& wf = smoke ? c.smoke_f32 : c.f32;
    std::vector<Candidate> ci, cf;
    try {
      ci = candidates(wi, target, smoke ? 1 : search);
      cf = candidates(wf, target, smoke ? 1 : search);
    } catch (const std::exception& e) {
      std::printf("FAIL %s: %s\n", c.name.c_str(), e.what());
      ++failures;
      continue;
    }
    if (smoke) {
      std::printf("smoke %s: int8 bit-exact, fp32 rel err %.2e\n", c.name.c_str(), cf[0].err);
      continue;
    }
    auto [bi, bf] = time_alternating(ci, cf, repeat ? repeat : 15);
    if (&c == &cases()[1]) measure_peaks();
    double ops = kiln::ops::get_template(wi.template_name).flops(wi);
    double gi = ops / (bi->median_ms() * 1e6), gf = ops / (bf->median_ms() * 1e6);
    double gi_best = ops / (bi->min_ms() * 1e6), gf_best = ops / (bf->min_ms() * 1e6);
    rows.push_back({c.name, bi->config, bf->config, gi, gi_best, gf, gf_best});
  }
  if (!smoke) {
    measure_peaks();
    if (dot)
      std::printf("peaks this run (best of 3): int8 vpdpbusd %.0f GOP/s, fp32 FMA %.0f GFLOP/s\n\n",
                  int8_peak, f32_peak);
    else
      std::printf(
          "peaks this run (best of 3): int8 2x vpmaddwd (kiln's exact AVX2 dot) %.0f GOP/s, "
          "vpmaddubsw + vpmaddwd %.0f GOP/s, fp32 FMA (%d-bit) %.0f GFLOP/s\n\n",
          int8_peak, maddubs_peak, target.isa().vector_bits, f32_peak);
    std::printf(
        "| kernel | int8 GOP/s | %% int8 peak (best) | fp32 GFLOP/s | %% fp32 peak (best) |"
        " int8 / fp32 | int8 config | fp32 config |\n|---|---:|---:|---:|---:|---:|---|---|\n");
    auto pct = [](double x, double peak) { return peak > 0 ? 100 * x / peak : 0.0; };
    for (const Row& r : rows)
      std::printf(
          "| %s | %.0f (%.0f) | %.0f %% | %.0f (%.0f) | %.0f %% | %.2fx (%.2fx) | `%s` | `%s` |\n",
          r.name.c_str(), r.int8, r.int8_best, pct(r.int8_best, int8_peak), r.f32, r.f32_best,
          pct(r.f32_best, f32_peak), r.int8 / r.f32, r.int8_best / r.f32_best,
          r.config_int8.c_str(), r.config_f32.c_str());
  }
  if (smoke) std::printf("kiln_bench_int8 --smoke: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_int8: %s\n", e.what());
    return 1;
  }
}
