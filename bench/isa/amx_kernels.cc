// kiln_bench_amx: the AMX dense int8 kernel (ops/dense_int8_amx.h: tdpbusd
// tiles) beside dense_int8.x86's fallback (vpdpbusd registers) on one GEMM,
// both checked bit-exact first, then timed in alternation (medians; GOP/s
// count 2 M N K). On a CPU without amx-int8 the AMX kernel runs with its tiles
// emulated in memory: the line says so, and its time is not AMX's.
//
//   kiln_bench_amx [--threads N] [--repeat N] [--size M,N,K] [--smoke]
//
// --smoke (ctest bench_amx_smoke) checks a small shape with every tail and
// times nothing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "../timer.h"
#include "codegen/codegen.h"
#include "codegen/target.h"
#include "ops/dense_int8.h"
#include "ops/dense_int8_amx.h"
#include "ops/kernel.h"
#include "ops/op_template.h"
#include "runtime/amx.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"
#include "schedule/lower.h"

namespace {

struct Kernel {
  std::unique_ptr<kiln::codegen::JitModule> mod;
  kiln_kernel_fn fn = nullptr;
  std::vector<void*> args;
  std::vector<double> ms;
  double median() const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    return s[(s.size() - 1) / 2];
  }
};

void check(const std::vector<int32_t>& got, const std::vector<int32_t>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      throw std::runtime_error(std::string(what) + ": wrong result at " + std::to_string(i) + ": " +
                               std::to_string(got[i]) + " != " + std::to_string(want[i]));
}

}  // namespace

int main(int argc, char** argv) try {
  int threads = 2, repeat = 15;
  int64_t M = 1024, N = 1024, K = 1024;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--threads" || a == "--repeat") && i + 1 < argc) {
      (a == "--threads" ? threads : repeat) = std::atoi(argv[++i]);
    } else if (a == "--size" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%ld,%ld,%ld", &M, &N, &K) != 3)
        throw std::invalid_argument("--size wants M,N,K");
    } else if (a == "--smoke") {
      smoke = true;
    } else {
      std::fprintf(stderr,
                   "usage: kiln_bench_amx [--threads N] [--repeat N] [--size M,N,K] "
                   "[--smoke]\n");
      return 2;
    }
  }
  if (smoke) M = 37, N = 40, K = 100;
  if (!kiln::ops::dense_int8_amx_supports(M, N, K))
    throw std::invalid_argument("K must be a positive multiple of 4");
  kiln_set_num_threads(std::max(1, threads));
  kiln::codegen::Target target = kiln::codegen::Target::host();
  bool amx = kiln::runtime::host_has_cpu_feature("amx-int8");
  if (amx) kiln::runtime::require_amx_permission();

  std::mt19937 rng(3);
  std::vector<uint8_t> A(M * K);
  std::vector<int8_t> B(K * N);
  for (auto& x : A) x = static_cast<uint8_t>(rng());
  for (auto& x : B) x = static_cast<int8_t>(rng());
  std::vector<int32_t> want(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t(A[m * K + k]) * B[k * N + n];
      want[m * N + n] = acc;
    }

  // The AMX kernel.
  Kernel t;
  std::vector<int8_t> Bt = kiln::ops::pack_dense_int8_amx_weight(B.data(), K, N);
  std::vector<int32_t> Ct(M * N, 0x5a5a5a5a);
  t.mod = kiln::codegen::jit_compile({kiln::ops::dense_int8_amx_kernel("amx", M, N, K)}, target);
  t.fn = t.mod->get_function("amx");
  t.args = {A.data(), Bt.data(), Ct.data()};
  if (t.fn(t.args.data()) != 0) throw std::runtime_error("the AMX kernel failed");
  check(Ct, want, "dense_int8_amx");

  // dense_int8.x86's fallback for this CPU.
  Kernel v;
  const kiln::ops::OpTemplate& tpl = kiln::ops::dense_int8_template();
  kiln::ops::Workload w = kiln::ops::dense_int8_workload(M, N, K);
  kiln::schedule::Config cfg = tpl.fallback(w, target.isa());
  std::vector<int8_t> Bv = kiln::ops::pack_dense_int8_weight(w, cfg, B.data());
  std::vector<int32_t> Cv(M * N, 0x5a5a5a5a);
  kiln::ops::Kernel k = kiln::ops::make_kernel(tpl, w, cfg);
  v.mod = kiln::codegen::jit_compile({kiln::schedule::lower(k.sch, k.args, "vnni")}, target);
  v.fn = v.mod->get_function("vnni");
  v.args = {A.data(), Bv.data(), Cv.data()};
  if (v.fn(v.args.data()) != 0) throw std::runtime_error("dense_int8.x86 failed");
  check(Cv, want, "dense_int8.x86");
  if (smoke) {
    std::printf("ok: %ldx%ldx%ld, both bit-exact (AMX kernel %s)\n", M, N, K,
                amx ? "on tiles" : "emulated: this CPU lacks amx-int8");
    return 0;
  }

  for (int r = 0; r < repeat; ++r)
    for (Kernel* x : {&t, &v})
      x->ms.push_back(
          kiln::bench::time_ms([&] { x->fn(x->args.data()); }, r == 0 ? 1 : 0, 1).median_ms);
  double ops = 2.0 * M * N * K;
  std::printf("%ldx%ldx%ld, threads %d, medians of %d, target %s\n", M, N, K, threads, repeat,
              target.str().c_str());
  std::printf("  dense_int8_amx (%s): %8.3f ms  %8.1f GOP/s\n",
              amx ? "tdpbusd tiles" : "EMULATED tiles, this CPU lacks amx-int8", t.median(),
              ops / t.median() * 1e-6);
  std::printf("  dense_int8.x86 fallback:       %8.3f ms  %8.1f GOP/s\n", v.median(),
              ops / v.median() * 1e-6);
  std::printf("  ratio amx / x86: %.2fx\n", v.median() / t.median());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "kiln_bench_amx: %s\n", e.what());
  return 1;
}
