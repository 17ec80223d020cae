#include "runtime/cpu_features.h"

#include <algorithm>
#include <map>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__) || defined(__arm__)
#include <sys/auxv.h>
#endif

namespace kiln::runtime {
namespace {

#if defined(__x86_64__)
struct Cpuid {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Cpuid cpuid(unsigned leaf, unsigned sub) {
  Cpuid r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = {};
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

// CPUID bits, masked by what the OS saves on a context switch (XCR0): AVX
// needs the ymm state, AVX-512 the opmask and zmm states, AMX the tile state.
std::map<std::string, bool> detect() {
  Cpuid l1 = cpuid(1, 0), l7 = cpuid(7, 0), l71 = cpuid(7, 1), ext = cpuid(0x80000001, 0);
  bool osxsave = l1.c & (1u << 27);
  unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
  auto bit = [](unsigned reg, int n) { return (reg >> n) & 1u; };
  return {
      {"sse4.1", bit(l1.c, 19)},
      {"sse4.2", bit(l1.c, 20)},
      {"popcnt", bit(l1.c, 23)},
      {"movbe", bit(l1.c, 22)},
      {"avx", ymm && bit(l1.c, 28)},
      {"fma", ymm && bit(l1.c, 12)},
      {"f16c", ymm && bit(l1.c, 29)},
      {"avx2", ymm && bit(l7.b, 5)},
      {"bmi", bit(l7.b, 3)},
      {"bmi2", bit(l7.b, 8)},
      {"lzcnt", bit(ext.c, 5)},
      {"avx512f", zmm && bit(l7.b, 16)},
      {"avx512dq", zmm && bit(l7.b, 17)},
      {"avx512ifma", zmm && bit(l7.b, 21)},
      {"avx512cd", zmm && bit(l7.b, 28)},
      {"avx512bw", zmm && bit(l7.b, 30)},
      {"avx512vl", zmm && bit(l7.b, 31)},
      {"avx512vbmi", zmm && bit(l7.c, 1)},
      {"avx512vnni", zmm && bit(l7.c, 11)},
      {"avx512fp16", zmm && bit(l7.d, 23)},
      {"avx512bf16", zmm && bit(l71.a, 5)},
      {"avxvnni", ymm && bit(l71.a, 4)},
      {"amx-bf16", tiles && bit(l7.d, 22)},
      {"amx-tile", tiles && bit(l7.d, 24)},
      {"amx-int8", tiles && bit(l7.d, 25)},
  };
}
#elif defined(__aarch64__)
std::map<std::string, bool> detect() {
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  return {{"neon", (hw >> 1) & 1}, {"fullfp16", (hw >> 10) & 1}, {"dotprod", (hw >> 20) & 1},
          {"sve", (hw >> 22) & 1}, {"i8mm", (hw2 >> 13) & 1},    {"bf16", (hw2 >> 14) & 1}};
}
#elif defined(__arm__)
std::map<std::string, bool> detect() {
  unsigned long hw = getauxval(AT_HWCAP);
  return {{"neon", (hw >> 12) & 1}, {"vfp4", (hw >> 16) & 1}};
}
#else
std::map<std::string, bool> detect() { return {}; }
#endif

}  // namespace

const std::vector<std::string>& checkable_cpu_features(const std::string& arch) {
  static const std::map<std::string, std::vector<std::string>> table = {
      {"x86_64",
       {"sse4.1",   "sse4.2",   "popcnt",   "movbe",      "avx",        "fma",        "f16c",
        "avx2",     "bmi",      "bmi2",     "lzcnt",      "avx512f",    "avx512dq",   "avx512ifma",
        "avx512cd", "avx512bw", "avx512vl", "avx512vbmi", "avx512vnni", "avx512fp16", "avx512bf16",
        "avxvnni",  "amx-bf16", "amx-tile", "amx-int8"}},
      {"aarch64", {"neon", "fullfp16", "dotprod", "sve", "i8mm", "bf16"}},
      {"arm", {"neon", "vfp4"}},
  };
  static const std::vector<std::string> none;
  auto it = table.find(arch);
  return it == table.end() ? none : it->second;
}

std::string host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "arm";
#else
  return "unknown";
#endif
}

bool host_has_cpu_feature(const std::string& name) {
  static const std::map<std::string, bool> host = detect();
  auto it = host.find(name);
  return it != host.end() && it->second;
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& required) {
  std::vector<std::string> missing;
  for (const std::string& f : required)
    if (!host_has_cpu_feature(f)) missing.push_back(f);
  return missing;
}

}  // namespace kiln::runtime
