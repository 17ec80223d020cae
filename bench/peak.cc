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

// 12 chains: within AVX2's 16 ymm registers, enough for its FMA latency.
__attribute__((target("avx2,fma"))) double fma_loop_ymm(long iterations, float* sink) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  *sink = lanes[0] + lanes[7];
  return double(iterations) * 12 * 8 * 2;
}

// 16 independent vpdpbusd chains in named variables (an array of __m512i
// made GCC copy every accumulator through the stack each iteration); returns
// the integer operations done (16 lanes x 4 products x 2 per instruction).
__attribute__((target("avx512f,avx512vnni"))) double vnni_loop(long iterations, int* sink) {
#define KILN_CHAINS(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define KILN_DECL(i) __m512i acc##i = _mm512_set1_epi32(i);
#define KILN_STEP(i) acc##i = _mm512_dpbusd_epi32(acc##i, a, b);
#define KILN_SUM(i) s = _mm512_add_epi32(s, acc##i);
  KILN_CHAINS(KILN_DECL)
  const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01ff01ff);
  for (long it = 0; it < iterations; ++it) {
    KILN_CHAINS(KILN_STEP)
    // Keeps the compiler from collapsing the chains (they are all alike).
    __asm__ volatile(""
                     : "+v"(acc0), "+v"(acc1), "+v"(acc2), "+v"(acc3), "+v"(acc4), "+v"(acc5),
                       "+v"(acc6), "+v"(acc7));
  }
  __m512i s = _mm512_setzero_si512();
  KILN_CHAINS(KILN_SUM)
#undef KILN_CHAINS
#undef KILN_DECL
#undef KILN_STEP
#undef KILN_SUM
  *sink = _mm512_reduce_add_epi32(s);
  return double(iterations) * 16 * 16 * 4 * 2;
}

// The AVX2 dot sequences in assembly: the compiler would share the products
// of identical operands between chains (they do not depend on the
// accumulators). Eight chains; the temporaries are renamed by the core, so
// reusing two of them serialises nothing. Returns the integer operations done.
__attribute__((target("avx2"))) double avx2_pmaddwd_loop(long iterations, int* sink) {
  __m256i a0 = _mm256_set1_epi32(0x00030001), a1 = _mm256_set1_epi32(0x00040002);
  __m256i b0 = _mm256_set1_epi32(0x0001ffff), b1 = _mm256_set1_epi32(0xfffe0002);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0;
  for (long it = 0; it < iterations; ++it) {
#define KILN_DOT(c)                    \
  "vpmaddwd %[b0], %[a0], %%ymm14\n\t" \
  "vpmaddwd %[b1], %[a1], %%ymm15\n\t" \
  "vpaddd %%ymm14, " c ", " c          \
  "\n\t"                               \
  "vpaddd %%ymm15, " c ", " c "\n\t"
    __asm__ volatile(KILN_DOT("%[c0]") KILN_DOT("%[c1]") KILN_DOT("%[c2]") KILN_DOT("%[c3]")
                         KILN_DOT("%[c4]") KILN_DOT("%[c5]") KILN_DOT("%[c6]") KILN_DOT("%[c7]")
                     : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4),
                       [c5] "+x"(c5), [c6] "+x"(c6), [c7] "+x"(c7)
                     : [a0] "x"(a0), [a1] "x"(a1), [b0] "x"(b0), [b1] "x"(b1)
                     : "xmm14", "xmm15");
#undef KILN_DOT
  }
  __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                       _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  *sink = _mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 7);
  return double(iterations) * 8 * 8 * 4 * 2;
}

__attribute__((target("avx2"))) double avx2_pmaddubsw_loop(long iterations, int* sink) {
  __m256i a = _mm256_set1_epi32(0x04030201), b = _mm256_set1_epi32(0x40c0ff01);
  __m256i ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0;
  for (long it = 0; it < iterations; ++it) {
#define KILN_DOT(c)                        \
  "vpmaddubsw %[b], %[a], %%ymm14\n\t"     \
  "vpmaddwd %[ones], %%ymm14, %%ymm14\n\t" \
  "vpaddd %%ymm14, " c ", " c "\n\t"
    __asm__ volatile(KILN_DOT("%[c0]") KILN_DOT("%[c1]") KILN_DOT("%[c2]") KILN_DOT("%[c3]")
                         KILN_DOT("%[c4]") KILN_DOT("%[c5]") KILN_DOT("%[c6]") KILN_DOT("%[c7]")
                     : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4),
                       [c5] "+x"(c5), [c6] "+x"(c6), [c7] "+x"(c7)
                     : [a] "x"(a), [b] "x"(b), [ones] "x"(ones)
                     : "xmm14");
#undef KILN_DOT
  }
  __m256i s =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)),
                       _mm256_add_epi32(_mm256_add_epi32(c4, c5), _mm256_add_epi32(c6, c7)));
  *sink = _mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 7);
  return double(iterations) * 8 * 8 * 4 * 2;
}

// GFLOP/s of one run of `threads` threads at the width.
double one_run(int threads, int vector_bits) {
  std::vector<float> sinks(threads * 16);
  std::vector<double> flops(threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      flops[t] = vector_bits == 512 ? fma_loop(2'000'000, &sinks[t * 16])
                                    : fma_loop_ymm(4'000'000, &sinks[t * 16]);
    });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / s * 1e-9;
}

double one_vnni_run(int threads) {
  std::vector<int> sinks(threads * 16);
  std::vector<double> ops(threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { ops[t] = vnni_loop(3'000'000, &sinks[t * 16]); });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : ops) total += f;
  return total / s * 1e-9;
}

double one_avx2_int8_run(int threads, Avx2Int8Dot kind) {
  std::vector<int> sinks(threads * 16);
  std::vector<double> ops(threads);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ops[t] = kind == Avx2Int8Dot::Pmaddwd ? avx2_pmaddwd_loop(2'000'000, &sinks[t * 16])
                                            : avx2_pmaddubsw_loop(2'000'000, &sinks[t * 16]);
    });
  for (auto& th : pool) th.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : ops) total += f;
  return total / s * 1e-9;
}

}  // namespace

double measured_avx2_int8_peak_gops(int threads, Avx2Int8Dot kind) {
  if (!__builtin_cpu_supports("avx2")) return 0;
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) runs.push_back(one_avx2_int8_run(threads, kind));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

double measured_vnni_peak_gops(int threads) {
  if (!__builtin_cpu_supports("avx512vnni")) return 0;
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) runs.push_back(one_vnni_run(threads));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

double measured_fma_peak_gflops(int threads, int vector_bits) {
  bool supported = vector_bits == 512
                       ? __builtin_cpu_supports("avx512f")
                       : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!supported) return 0;
  std::vector<double> runs;
  for (int i = 0; i < 7; ++i) runs.push_back(one_run(threads, vector_bits));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace kiln::bench
