// kiln_bench_ops: the operators outside the templates (issue 12, item 4) at
// the shapes of the encoder (d 256, 4 heads, seq 128, ffn 1024) and of
// ResNet-18 / SqueezeNet, each built by the whole kiln build as a one-op (or
// one-pattern) graph, run by the runtime's executor, checked against the
// reference interpreter, and timed (median of runs, the executor's default
// threads). Each line prints ms, GB/s (graph inputs + outputs) and GFLOP/s
// (a nominal count per element, named in the table), and each against the
// peak measured in the same run that bounds it:
//  - memory: a 2-thread memcpy over the same number of bytes (read + written)
//    as the operator, warm like the operator (the same cache level), the best
//    of repeated samples;
//  - compute: independent FMA chains at the widest vector width (bench/peak.h).
// "of peak" is the larger of the two fractions: the bound that applies.
//
//   kiln_bench_ops [--smoke]   (--smoke: tiny shapes, few runs, results checked)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../peak.h"
#include "driver/build.h"
#include "graph/graph.h"
#include "graph/interpreter.h"
#include "graph/op_registry.h"
#include "runtime/c_runtime_api.h"
#include "runtime/graph_executor.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::graph::Attribute;
using kiln::graph::Graph;
using kiln::graph::Initializer;
using kiln::graph::TensorType;
using Ints = std::vector<int64_t>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Initializer random_f32(const Ints& shape, std::mt19937_64& rng, float lo, float hi) {
  Initializer t;
  t.type = {"float32", shape};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : v) x = dist(rng);
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

Initializer scalar(float v) {
  Initializer t;
  t.type = {"float32", {}};
  t.data.resize(sizeof(float));
  std::memcpy(t.data.data(), &v, sizeof v);
  return t;
}

// A graph made node by node; every value's type comes from evaluating its
// node on the sample inputs (the registry's reference), so value_info is exact.
class Builder {
 public:
  explicit Builder(uint64_t seed) : rng_(seed) {}

  std::string input(const std::string& name, const Ints& shape, float lo, float hi) {
    Initializer v = random_f32(shape, rng_, lo, hi);
    g_.inputs.push_back({name, v.type});
    g_.value_info[name] = v.type;
    samples_[name] = std::move(v);
    return name;
  }
  std::string constant(const std::string& name, Initializer v) {
    g_.value_info[name] = v.type;
    g_.initializers[name] = v;
    samples_[name] = std::move(v);
    return name;
  }
  std::string weight(const std::string& name, const Ints& shape) {
    return constant(name, random_f32(shape, rng_, -1, 1));
  }
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   std::map<std::string, Attribute> attrs = {}) {
    kiln::graph::Node n;
    n.op_type = op;
    n.name = op + "_" + std::to_string(g_.nodes.size());
    n.inputs = inputs;
    n.outputs = {n.name};
    n.attrs = std::move(attrs);
    std::vector<const Initializer*> in;
    for (const std::string& i : inputs) in.push_back(&samples_.at(i));
    std::vector<Initializer> out = kiln::graph::get_op(op).evaluate(n, in);
    g_.value_info[n.name] = out[0].type;
    samples_[n.name] = std::move(out[0]);
    g_.nodes.push_back(n);
    return n.name;
  }
  Graph finish(const std::string& output) {
    g_.outputs = {output};
    return g_;
  }
  const Initializer& sample(const std::string& v) const { return samples_.at(v); }

 private:
  std::mt19937_64 rng_;
  Graph g_;
  std::map<std::string, Initializer> samples_;
};

struct Case {
  std::string name;       // what and at which shape
  std::string flops_per;  // the nominal count, printed
  double flops = 0;       // per run
  Graph graph;
  std::map<std::string, Initializer> inputs;
};

int64_t elements(const Ints& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Case softmax(const Ints& s) {
  Builder b(1);
  std::string x = b.input("x", s, -8, 8);
  std::string y = b.node("Softmax", {x}, {{"axis", int64_t{-1}}});
  // max, subtract, exp (counted as one), sum, divide.
  return {"Softmax " + kiln::graph::shape_str(s),
          "5/elem",
          5.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case layer_norm(const Ints& s) {
  Builder b(2);
  std::string x = b.input("x", s, -2, 2);
  std::string g = b.weight("scale", {s.back()});
  std::string c = b.weight("bias", {s.back()});
  std::string y = b.node("LayerNormalization", {x, g, c}, {{"axis", int64_t{-1}}});
  // sum, subtract + square + sum, subtract, scale, shift, multiply by 1/std.
  return {"LayerNormalization " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// The pattern exporters emit for LayerNorm before opset 17.
Case decomposed_layer_norm(const Ints& s) {
  Builder b(3);
  std::string x = b.input("x", s, -2, 2);
  std::string mean = b.node("ReduceMean", {x}, {{"axes", Ints{-1}}});
  std::string d = b.node("Sub", {x, mean});
  std::string two = b.constant("two", scalar(2));
  std::string sq = b.node("Pow", {d, two});
  std::string var = b.node("ReduceMean", {sq}, {{"axes", Ints{-1}}});
  std::string eps = b.constant("eps", scalar(1e-5f));
  std::string ve = b.node("Add", {var, eps});
  std::string sd = b.node("Sqrt", {ve});
  std::string n = b.node("Div", {d, sd});
  std::string g = b.weight("scale", {s.back()});
  std::string c = b.weight("bias", {s.back()});
  std::string y = b.node("Add", {b.node("Mul", {n, g}), c});
  return {"LayerNorm, decomposed (ReduceMean..Div) " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// SiLU as exporters emit it (EfficientNet's activation): x * Sigmoid(x).
Case silu(const Ints& s) {
  Builder b(11);
  std::string x = b.input("x", s, -8, 8);
  std::string y = b.node("Mul", {x, b.node("Sigmoid", {x})});
  // the sigmoid's exp (range reduction, a degree-7 polynomial, the scale:
  // ~12 mul/add), its add and division, the product: ~15 a value.
  return {"SiLU (Sigmoid Mul) " + kiln::graph::shape_str(s),
          "15/elem",
          15.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// GELU as exporters emit it: x * 0.5 * (1 + erf(x / sqrt(2))).
Case gelu(const Ints& s) {
  Builder b(4);
  std::string x = b.input("x", s, -4, 4);
  std::string r2 = b.constant("sqrt2", scalar(1.4142135f));
  std::string one = b.constant("one", scalar(1));
  std::string half = b.constant("half", scalar(0.5f));
  std::string e = b.node("Erf", {b.node("Div", {x, r2})});
  std::string y = b.node("Mul", {b.node("Mul", {x, b.node("Add", {e, one})}), half});
  // div, erf (a rational polynomial: ~14 mul/add), add, 2 mul.
  return {"GELU (Div Erf Add Mul Mul) " + kiln::graph::shape_str(s),
          "18/elem",
          18.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case reduce_mean(const Ints& s) {
  Builder b(5);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("ReduceMean", {x}, {{"axes", Ints{-1}}});
  return {"ReduceMean last axis " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case global_average_pool(const Ints& s) {
  Builder b(6);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("GlobalAveragePool", {x});
  return {"GlobalAveragePool " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case max_pool(const Ints& s) {
  Builder b(7);
  std::string x = b.input("x", s, -2, 2);
  std::string y =
      b.node("MaxPool", {x},
             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  Ints o = b.sample(y).type.shape;
  return {"MaxPool 3x3 s2 p1 " + kiln::graph::shape_str(s),
          "9/output",
          9.0 * elements(o),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// Pools as they run between blocked convolutions (graph::propagate_layout):
// on NCHW[b]c data, s = [N, C/b, H, W, b].
Case blocked_max_pool(const Ints& s) {
  Builder b(9);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("MaxPool", {x},
                         {{"kernel_shape", Ints{3, 3}},
                          {"strides", Ints{2, 2}},
                          {"pads", Ints{1, 1, 1, 1}},
                          {"kiln_block", s.back()}});
  Ints o = b.sample(y).type.shape;
  return {"MaxPool 3x3 s2 p1, NCHW[b]c " + kiln::graph::shape_str(s),
          "9/output",
          9.0 * elements(o),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case blocked_global_average_pool(const Ints& s) {
  Builder b(10);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("GlobalAveragePool", {x}, {{"kiln_block", s.back()}});
  return {"GlobalAveragePool, NCHW[b]c " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// ConvNeXt's norm over the channels of each pixel as it runs between blocked
// convolutions (graph::channels_last_to_nchw, then propagate_layout): on
// NCHW[b]c data, s = [N, C/b, H, W, b]. Compare with LayerNormalization over
// the last axis of the NHWC tensor of the same size, what it replaces.
Case blocked_channel_norm(const Ints& s) {
  Builder b(11);
  std::string x = b.input("x", s, -2, 2);
  std::string g = b.weight("scale", {s[1] * s[4]});
  std::string c = b.weight("bias", {s[1] * s[4]});
  std::string y = b.node("kiln.ChannelNorm", {x, g, c}, {{"kiln_block", s.back()}});
  // As LayerNormalization's count.
  return {"kiln.ChannelNorm, NCHW[b]c " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case flatten(const Ints& s) {
  Builder b(8);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("Flatten", {x}, {{"axis", int64_t{1}}});
  return {"Flatten " + kiln::graph::shape_str(s), "0", 0, b.finish(y), {{"x", b.sample(x)}}};
}

size_t bytes_of(const TensorType& t) { return static_cast<size_t>(elements(t.shape)) * 4; }

// GB/s (bytes read + written) of `threads` threads each copying its share of
// `total / 2` bytes over and over, warm: the best of `samples` samples (a
// peak is what the machine can do; other processes on this shared VM only
// ever lower a sample). Each thread times its own loop, so thread start-up
// is not counted; a sample takes its slowest thread.
double copy_gbps(size_t total, int threads, int samples) {
  size_t half = std::max<size_t>(total / 2, 64 * static_cast<size_t>(threads));
  std::vector<char> src(half, 1), dst(half, 0);
  size_t share = half / static_cast<size_t>(threads);
  int reps = static_cast<int>(std::max<size_t>(1, (64u << 20) / half));
  double best = 0;
  for (int s = 0; s < samples; ++s) {
    std::vector<double> sec(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r)
          std::memcpy(dst.data() + t * share, src.data() + t * share, share);
        sec[static_cast<size_t>(t)] = std::chrono::duration<double>(Clock::now() - t0).count();
      });
    for (auto& th : pool) th.join();
    double slowest = *std::max_element(sec.begin(), sec.end());
    best = std::max(best, 2.0 * static_cast<double>(share) * threads * reps / slowest * 1e-9);
  }
  return best;
}

// Builds, checks and times one case; returns false when its result is wrong.
bool run_case(const Case& c, bool smoke, double fma_peak, int threads) {
  const std::string pkg = (std::filesystem::temp_directory_path() /
                           ("kiln-bench-ops-" + std::to_string(getpid()) + ".tar"))
                              .string();
  kiln::driver::BuildOptions options;
  options.output_path = pkg;
  kiln::driver::BuiltModule built = kiln::driver::build_module(c.graph, options);
  kiln::runtime::GraphExecutor ex = kiln::runtime::GraphExecutor::load(pkg);
  std::filesystem::remove(pkg);
  size_t bytes = 0;
  for (const auto& [name, value] : c.inputs) {
    ex.set_input(name, value.data.data(), kiln::runtime::DType::f32(), value.type.shape);
    bytes += value.data.size();
  }
  ex.run();
  const TensorType& out_t = c.graph.value_info.at(c.graph.outputs[0]);
  bytes += bytes_of(out_t);
  const auto* got = static_cast<const float*>(ex.output_data(0));
  std::vector<float> want =
      kiln::graph::run_graph(c.graph, c.inputs).at(c.graph.outputs[0]).as<float>();
  double max_ref = 1e-30, max_err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  if (!(max_err / max_ref <= 1e-4)) {
    std::fprintf(stderr, "kiln_bench_ops: %s: max abs error %g (max |ref| %g)\n", c.name.c_str(),
                 max_err, max_ref);
    return false;
  }
  const int samples = smoke ? 3 : 31;
  const int calls = smoke ? 2 : std::max(1, static_cast<int>(2e7 / std::max<size_t>(bytes, 1)));
  std::vector<double> ms;
  for (int s = 0; s < samples; ++s) {
    auto t0 = Clock::now();
    for (int k = 0; k < calls; ++k) ex.run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / calls);
  }
  const double t = median(ms);
  const double gbps = static_cast<double>(bytes) / (t * 1e-3) * 1e-9;
  const double gflops = c.flops / (t * 1e-3) * 1e-9;
  const double copy = copy_gbps(bytes, threads, smoke ? 3 : 15);
  const double mem_frac = copy > 0 ? gbps / copy : 0;
  const double flop_frac = fma_peak > 0 ? gflops / fma_peak : 0;
  std::printf(
      "  %-52s %2zu kernel%s %9.4f ms %8.1f GB/s (copy %6.1f) %7.1f GFLOP/s (%-8s) %5.1f %% %s\n",
      c.name.c_str(), built.funcs.size(), built.funcs.size() == 1 ? " " : "s", t, gbps, copy,
      gflops, c.flops_per.c_str(), 100 * std::max(mem_frac, flop_frac),
      mem_frac >= flop_frac ? "memory" : "compute");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  const int threads = kiln_get_num_threads();
  double fma_peak = 0;
  if (!smoke) {
    fma_peak = kiln::bench::measured_fma_peak_gflops(threads, 512);
    if (fma_peak == 0) fma_peak = kiln::bench::measured_fma_peak_gflops(threads, 256);
  }
  std::vector<Case> cases;
  if (smoke) {
    cases = {softmax({1, 2, 3, 33}),
             layer_norm({1, 3, 37}),
             decomposed_layer_norm({1, 3, 37}),
             gelu({1, 3, 37}),
             silu({1, 3, 5, 7}),
             reduce_mean({2, 17}),
             global_average_pool({1, 3, 5, 5}),
             max_pool({1, 2, 9, 9}),
             blocked_max_pool({1, 2, 9, 9, 8}),
             blocked_global_average_pool({1, 2, 3, 3, 8}),
             blocked_channel_norm({1, 3, 5, 7, 8}),
             flatten({1, 5, 1, 1})};
  } else {
    cases = {softmax({1, 4, 128, 128}),
             softmax({1, 12, 197, 197}),
             layer_norm({1, 128, 256}),
             decomposed_layer_norm({1, 128, 256}),
             gelu({1, 128, 1024}),
             silu({1, 96, 112, 112}),
             silu({1, 144, 56, 56}),
             reduce_mean({1, 128, 256}),
             global_average_pool({1, 512, 7, 7}),
             global_average_pool({1, 1000, 13, 13}),
             max_pool({1, 64, 112, 112}),
             blocked_max_pool({1, 4, 112, 112, 16}),
             blocked_global_average_pool({1, 32, 7, 7, 16}),
             layer_norm({1, 56, 56, 96}),
             blocked_channel_norm({1, 6, 56, 56, 16}),
             layer_norm({1, 14, 14, 384}),
             blocked_channel_norm({1, 24, 14, 14, 16}),
             flatten({1, 512, 1, 1})};
  }
  std::printf("kiln_bench_ops: %d threads, fp32 FMA peak measured now %.0f GFLOP/s%s\n", threads,
              fma_peak, smoke ? " (smoke: timings meaningless)" : "");
  bool ok = true;
  for (const Case& c : cases) ok = run_case(c, smoke, fma_peak, threads) && ok;
  return ok ? 0 : 1;
}
