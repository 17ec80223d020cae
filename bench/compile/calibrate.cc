// kiln_compile_calibrate: how long LLVM takes over kernels of a given
// estimated size (schedule/code_size.h), to choose the compile budget.
//
//   kiln_compile_calibrate WORKLOADS.txt [--samples N] [--per-workload K] [--seed S]
//
// WORKLOADS.txt holds one workload key a line (kiln tasks prints them). For
// each workload: its fallback config for the host, and, of N random configs
// of its space estimated without compiling, the K largest (spread over the
// size range). Each is lowered and compiled (O3, object code) with no budget;
// one CSV line per kernel on stdout:
//   workload,config,which,estimate,lower_s,compile_s
//
//   kiln_compile_calibrate --synthetic [--stop-after S]
//
// Past the templates' own size limits: dense_nopack's legacy space (no
// limits) for C[64, 64] = A[64, 512] B[512, 64] with register tiles of
// rows x 32 columns unrolled over k blocks of kk, smallest first, until one
// kernel takes longer than S seconds (default 40).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/target.h"
#include "ops/dense.h"
#include "ops/op_template.h"
#include "ops/workload.h"
#include "schedule/lower.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t estimate(const ops::Kernel& k, int vector_bits) {
  schedule::LowerOptions o;
  o.unroll = false;
  o.code_budget = 0;
  o.vector_bits = vector_bits;
  schedule::LowerReport r;
  o.report = &r;
  schedule::lower(k.sch, k.args, k.name, o);
  return r.code_size;
}

// One kernel lowered and compiled with no budget: estimate, lower_s, compile_s.
struct Timed {
  int64_t estimate = 0;
  double lower_s = 0, compile_s = 0;
};
Timed lower_and_compile(const ops::Kernel& k, const codegen::Target& target) {
  schedule::LowerOptions o;
  o.code_budget = 0;
  o.vector_bits = target.isa().vector_bits;
  schedule::LowerReport r;
  o.report = &r;
  auto t0 = Clock::now();
  ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name, o);
  Timed t;
  t.lower_s = since(t0);
  auto t1 = Clock::now();
  codegen::compile_object({f}, target);
  t.compile_s = since(t1);
  t.estimate = r.code_size;
  return t;
}

int synthetic(double stop_after) {
  codegen::Target target = codegen::Target::host();
  ops::DenseWorkload d{64, 64, 512};
  schedule::ConfigSpace space = ops::dense_nopack_space(d, schedule::SplitPolicy::All);
  struct Point {
    int64_t rows, kk, estimate;
    schedule::Config cfg;
  };
  std::vector<Point> points;
  for (int64_t rows : {1, 2, 4, 8, 16, 32, 64})
    for (int64_t kk : {4, 16, 32, 64, 128, 256, 512}) {
      schedule::Config c = ops::detail::KnobValues()
                               .split("tile_y", d.M, {1, rows})
                               .split("tile_x", d.N, {1, 32})
                               .split("tile_k", d.K, {kk})
                               .knob("tile_order", 0)
                               .in(space);
      points.push_back({rows, kk, estimate(ops::dense_nopack(d, c), target.isa().vector_bits), c});
    }
  std::sort(points.begin(), points.end(),
            [](const Point& a, const Point& b) { return a.estimate < b.estimate; });
  std::printf("workload,config,which,estimate,lower_s,compile_s\n");
  for (const Point& p : points) {
    Timed t = lower_and_compile(ops::dense_nopack(d, p.cfg), target);
    std::printf("dense_nopack_legacy(M=64;N=64;K=512),rows=%lld kk=%lld,synthetic,%lld,%.3f,%.3f\n",
                static_cast<long long>(p.rows), static_cast<long long>(p.kk),
                static_cast<long long>(t.estimate), t.lower_s, t.compile_s);
    std::fflush(stdout);
    if (t.lower_s + t.compile_s > stop_after) break;
  }
  return 0;
}

}  // namespace

// --configs FILE [--compile]: lines "workload key|config JSON"; the estimate
// of each (and with --compile its lower and compile times), as above.
int configs(const std::string& path, bool compile) {
  codegen::Target target = codegen::Target::host();
  std::ifstream in(path);
  std::printf("workload,config,which,estimate,lower_s,compile_s\n");
  for (std::string line; std::getline(in, line);) {
    size_t bar = line.find('|');
    if (bar == std::string::npos) continue;
    ops::Workload w = ops::Workload::parse(line.substr(0, bar));
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    schedule::Config c = schedule::Config::from_json(t.space(w), line.substr(bar + 1));
    Timed tm;
    if (compile)
      tm = lower_and_compile(ops::make_kernel(t, w, c), target);
    else
      tm.estimate = estimate(ops::make_kernel(t, w, c), target.isa().vector_bits);
    std::string cfg = c.to_json();
    std::replace(cfg.begin(), cfg.end(), ',', ';');
    std::printf("%s,%s,given,%lld,%.3f,%.3f\n", w.key().c_str(), cfg.c_str(),
                static_cast<long long>(tm.estimate), tm.lower_s, tm.compile_s);
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--configs")
    return configs(argv[2], argc >= 4 && std::string(argv[3]) == "--compile");
  if (argc >= 2 && std::string(argv[1]) == "--synthetic")
    return synthetic(argc >= 4 ? std::stod(argv[3]) : 40);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s WORKLOADS.txt [--samples N] [--per-workload K] [--seed S]\n",
                 argv[0]);
    return 2;
  }
  int samples = 200, per_workload = 3;
  uint64_t seed = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--samples") samples = std::stoi(argv[i + 1]);
    if (a == "--per-workload") per_workload = std::stoi(argv[i + 1]);
    if (a == "--seed") seed = std::stoull(argv[i + 1]);
  }
  codegen::Target target = codegen::Target::host();
  const int bits = target.isa().vector_bits;
  std::ifstream in(argv[1]);
  std::mt19937_64 rng(seed);
  std::printf("workload,config,which,estimate,lower_s,compile_s\n");
  for (std::string key; std::getline(in, key);) {
    if (key.empty()) continue;
    ops::Workload w = ops::Workload::parse(key);
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    schedule::ConfigSpace space = t.space(w);
    std::vector<std::pair<std::string, schedule::Config>> picks;
    picks.emplace_back("fallback", t.fallback(w, target.isa()));
    std::vector<std::pair<int64_t, schedule::Config>> sized;
    for (int i = 0; i < samples; ++i) {
      schedule::Config c = space.random(rng);
      try {
        sized.emplace_back(estimate(ops::make_kernel(t, w, c), bits), c);
      } catch (const std::exception&) {
      }
    }
    std::sort(sized.begin(), sized.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    // The largest, then every (n / K)th below it.
    for (int k = 0; k < per_workload && !sized.empty(); ++k) {
      size_t i = static_cast<size_t>(k) * sized.size() / static_cast<size_t>(per_workload * 2);
      picks.emplace_back(k == 0 ? "largest" : "sample", sized[i].second);
    }
    for (auto& [which, c] : picks) {
      ops::Kernel k = ops::make_kernel(t, w, c);
      schedule::LowerOptions o;
      o.code_budget = 0;
      o.vector_bits = bits;
      schedule::LowerReport r;
      o.report = &r;
      auto t0 = Clock::now();
      ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name, o);
      double lower_s = since(t0);
      auto t1 = Clock::now();
      codegen::compile_object({f}, target);
      double compile_s = since(t1);
      std::string cfg = c.to_json();
      std::replace(cfg.begin(), cfg.end(), ',', ';');
      std::printf("%s,%s,%s,%lld,%.3f,%.3f\n", std::string(key).c_str(), cfg.c_str(), which.c_str(),
                  static_cast<long long>(r.code_size), lower_s, compile_s);
      std::fflush(stdout);
    }
  }
  return 0;
}
