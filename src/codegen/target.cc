#include "codegen/target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/AArch64TargetParser.h>
#include <llvm/TargetParser/ARMTargetParser.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "codegen/llvm_init.h"
#include "runtime/cpu_features.h"

namespace kiln::codegen {

namespace detail {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Every back end Debian's LLVM carries: kiln cross-compiles (aarch64,
    // armv7) as well as JIT-compiling for the host.
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

}  // namespace detail

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> parse_features(const std::string& list, const std::string& whole) {
  std::vector<std::string> out;
  for (const std::string& f : split(list, ',')) {
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-'))
      throw std::invalid_argument("target \"" + whole + "\": bad feature \"" + f +
                                  "\" in -mattr (expected +name or -name)");
    out.push_back(f);
  }
  return out;
}

// Levenshtein distance, for "did you mean" lists.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Up to five names of `known` closest to `name` (edit distance, then a
// shared prefix), as "a, b, c".
std::string near_matches(const std::string& name, const std::vector<std::string>& known) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& k : known) scored.emplace_back(edit_distance(name, k), k);
  std::sort(scored.begin(), scored.end());
  std::string out;
  for (size_t i = 0; i < scored.size() && i < 5; ++i) {
    if (scored[i].first > std::max<size_t>(3, name.size() / 2)) break;
    out += (out.empty() ? "" : ", ") + scored[i].second;
  }
  return out;
}

std::string arch_of(const std::string& triple) {
  std::string arch = triple.substr(0, triple.find('-'));
  if (starts_with(arch, "armv") || starts_with(arch, "thumbv") || arch == "arm") return "arm";
  return arch;
}

// The -mcpu names LLVM accepts for an architecture (empty when kiln has no list).
std::vector<std::string> known_cpus(const std::string& arch) {
  llvm::SmallVector<llvm::StringRef, 256> names;
  if (arch == "x86_64" || arch == "i386" || arch == "i686") llvm::X86::fillValidCPUArchList(names);
  if (arch == "aarch64") llvm::AArch64::fillValidCPUArchList(names);
  if (arch == "arm") llvm::ARM::fillValidCPUArchList(names);
  return std::vector<std::string>(names.begin(), names.end());
}

// The -mattr names LLVM accepts for x86: every feature host detection reports
// on or off, every feature some CPU implies, and those kiln's own tables
// name. Empty (no check) for other architectures.
std::vector<std::string> known_features(const std::string& arch) {
  if (arch != "x86_64") return {};
  std::set<std::string> names;
  llvm::StringMap<bool> host;
  if (arch == arch_of(llvm::sys::getProcessTriple()) && llvm::sys::getHostCPUFeatures(host))
    for (const auto& kv : host) names.insert(kv.first().str());
  for (const std::string& cpu : known_cpus(arch)) {
    llvm::SmallVector<llvm::StringRef, 128> feats;
    llvm::X86::getFeaturesForCPU(cpu, feats);
    for (llvm::StringRef f : feats) names.insert(f.ltrim("+-").str());
  }
  for (const std::string& f : runtime::checkable_cpu_features(arch)) names.insert(f);
  for (const char* f : {"64bit", "cx8", "cx16", "sse", "sse2", "sse3", "ssse3", "mmx", "x87",
                        "prefer-256-bit", "prefer-128-bit", "evex512", "fast-gather"})
    names.insert(f);
  return std::vector<std::string>(names.begin(), names.end());
}

// An unknown -mcpu or -mattr name is one clear error with near matches,
// before LLVM prints a warning per subtarget and aborts.
void check_names(const Target& t, const std::string& whole) {
  std::string arch = arch_of(t.triple);
  if (!t.cpu.empty()) {
    std::string err;
    const llvm::Target* lt = llvm::TargetRegistry::lookupTarget(t.triple, err);
    std::unique_ptr<llvm::MCSubtargetInfo> sti(lt ? lt->createMCSubtargetInfo(t.triple, "", "")
                                                  : nullptr);
    if (sti && !sti->isCPUStringValid(t.cpu)) {
      std::string near = near_matches(t.cpu, known_cpus(arch));
      throw std::invalid_argument("target \"" + whole + "\": unknown -mcpu \"" + t.cpu + "\" for " +
                                  arch + (near.empty() ? "" : " (did you mean: " + near + "?)"));
    }
  }
  std::vector<std::string> known = known_features(arch);
  if (known.empty()) return;
  for (const std::string& f : t.features) {
    std::string name = f.substr(1);
    if (std::binary_search(known.begin(), known.end(), name)) continue;
    std::string near = near_matches(name, known);
    throw std::invalid_argument("target \"" + whole + "\": unknown feature \"" + name +
                                "\" in -mattr for " + arch +
                                (near.empty() ? "" : " (did you mean: " + near + "?)"));
  }
}

}  // namespace

Target Target::parse(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  if (tokens.empty() || tokens[0] != "llvm")
    throw std::invalid_argument("target \"" + s + "\": must start with \"llvm\", got \"" +
                                (tokens.empty() ? std::string() : tokens[0]) + "\"");
  if (tokens.size() == 1) return host();
  Target t;
  bool have_cpu = false, have_attr = false;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    auto value = [&](const std::string& key) {
      std::string v = tok.substr(key.size());
      if (v.empty()) throw std::invalid_argument("target \"" + s + "\": empty value in " + tok);
      return v;
    };
    if (starts_with(tok, "-mcpu=")) {
      t.cpu = value("-mcpu="), have_cpu = true;
    } else if (starts_with(tok, "-mattr=")) {
      t.features = parse_features(value("-mattr="), s), have_attr = true;
    } else if (starts_with(tok, "-mtriple=")) {
      t.triple = value("-mtriple=");
    } else if (tok == "-fast-math") {
      t.fast_math = true;
    } else {
      throw std::invalid_argument("target \"" + s + "\": unknown option \"" + tok + "\"");
    }
  }
  // A target that names only a triple/flags keeps the host's machine description
  // only when nothing about the machine was given.
  if (t.triple.empty()) t.triple = llvm::sys::getProcessTriple();
  if (!have_cpu && !have_attr && t.triple == llvm::sys::getProcessTriple()) {
    Target h = host();
    t.cpu = h.cpu;
    t.features = h.features;
  }
  detail::initialize_llvm();
  std::string err;
  if (!llvm::TargetRegistry::lookupTarget(t.triple, err))
    throw std::invalid_argument("target \"" + s + "\": unsupported triple \"" + t.triple +
                                "\": " + err);
  check_names(t, s);
  return t;
}

Target Target::host() {
  llvm::StringMap<bool> feats;
  std::map<std::string, bool> present;
  if (llvm::sys::getHostCPUFeatures(feats))
    for (const auto& kv : feats) present[kv.first().str()] = kv.second;
  return from_host_features(llvm::sys::getProcessTriple(), llvm::sys::getHostCPUName().str(),
                            present);
}

Target Target::from_host_features(const std::string& triple, const std::string& cpu,
                                  const std::map<std::string, bool>& present) {
  Target named;  // what the CPU name alone implies
  named.triple = triple;
  named.cpu = cpu;
  Target t = named;
  std::vector<std::string> hidden;
  for (const auto& [name, on] : present) {
    if (on)
      t.features.push_back("+" + name);
    else if (named.has_feature(name))
      hidden.push_back("-" + name);
  }
  std::sort(t.features.begin(), t.features.end());
  std::sort(hidden.begin(), hidden.end());
  t.features.insert(t.features.end(), hidden.begin(), hidden.end());
  return t;
}

std::string Target::str() const {
  std::string s = "llvm -mtriple=" + triple;
  if (!cpu.empty()) s += " -mcpu=" + cpu;
  if (!features.empty()) {
    s += " -mattr=";
    for (size_t i = 0; i < features.size(); ++i) s += (i ? "," : "") + features[i];
  }
  if (fast_math) s += " -fast-math";
  return s;
}

bool Target::has_feature(const std::string& name) const {
  // The last explicit mention wins, as in LLVM's own feature strings.
  for (auto it = features.rbegin(); it != features.rend(); ++it)
    if (it->substr(1) == name) return (*it)[0] == '+';
  if (cpu.empty()) return false;
  // Ask LLVM only about names of this architecture: another one's (avx512f on
  // aarch64) would print "not a recognized feature" warnings.
  const std::string a = arch_of(triple);
  const std::vector<std::string>& checkable = runtime::checkable_cpu_features(a);
  static const std::map<std::string, std::vector<std::string>> more = {
      {"aarch64", {"fp-armv8", "crypto", "crc", "lse", "rdm"}},
      {"arm", {"vfp3", "vfp2", "d32", "fp16", "crypto"}},
  };
  bool known = std::find(checkable.begin(), checkable.end(), name) != checkable.end();
  if (auto it = more.find(a); !known && it != more.end())
    known = std::find(it->second.begin(), it->second.end(), name) != it->second.end();
  if (!known && a == "x86_64") {
    static const std::vector<std::string> x86 = known_features("x86_64");
    known = std::binary_search(x86.begin(), x86.end(), name);
  }
  if (!known) return false;
  detail::initialize_llvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!t) return false;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, cpu, ""));
  return sti && sti->checkFeatures("+" + name);
}

std::string llvm_version_string() { return LLVM_VERSION_STRING; }

int Target::vector_bits() const { return isa().vector_bits; }

std::string Target::arch() const { return arch_of(triple); }

// The per-ISA table: lane counts and register budgets come from here, never
// from a constant in a template.
namespace {

// Intel AVX-512 cores whose two FMA ports both take 512-bit FMAs (LLVM's
// -mcpu names; Isa::fma_waits_on_loads). Measured on Sapphire Rapids only.
const std::set<std::string>& intel_cores_with_two_zmm_fma() {
  static const std::set<std::string> names = {"skylake-avx512", "cascadelake",    "cooperlake",
                                              "icelake-server", "sapphirerapids", "emeraldrapids",
                                              "graniterapids",  "graniterapids-d"};
  return names;
}

// The row of the target's vector ISA, from its features.
Isa isa_row(const Target& t) {
  std::string a = t.arch();
  auto has_feature = [&](const std::string& f) { return t.has_feature(f); };
  if (a == "x86_64") {
    Isa row = has_feature("avx512f")                      ? Isa{"x86_64-avx512", 512, 32, 2}
              : has_feature("avx2") && has_feature("fma") ? Isa{"x86_64-avx2", 256, 16, 2}
                                                          : Isa{"x86_64-sse", 128, 16, 1};
    row.fma_waits_on_loads =
        row.isa_class == "x86_64-avx512" && intel_cores_with_two_zmm_fma().count(t.cpu) > 0;
    row.amx_int8 = has_feature("amx-tile") && has_feature("amx-int8");
    row.amx_bf16 = has_feature("amx-tile") && has_feature("amx-bf16");
    // vpdpbusd at the row's width (codegen/dot_product.cc picks the same).
    row.int8_dot_instruction =
        has_feature("avx512f")
            ? has_feature("avx512vnni")
            : has_feature("avxvnni") || (has_feature("avx512vnni") && has_feature("avx512vl"));
    return row;
  }
  if (a == "aarch64") {
    Isa row{"aarch64-neon", 128, 32, 2};
    row.int8_dot_instruction = has_feature("i8mm") || has_feature("dotprod");
    return row;
  }
  if (a == "arm" && has_feature("neon")) return {"armv7-neon", 128, 16, 1};
  return {"generic", 128, 16, 1};
}

}  // namespace

Target::Isa Target::isa() const {
  Isa row = isa_row(*this);
  CacheSizes caches = cache_sizes(*this);
  row.l1d_bytes = caches.l1d;
  row.l2_bytes = caches.l2;
  return row;
}

std::vector<std::string> Target::required_features() const {
  std::vector<std::string> out;
  for (const std::string& f : runtime::checkable_cpu_features(arch()))
    if (has_feature(f)) out.push_back(f);
  return out;
}

namespace {

// "48K" / "2048K" / "32M" from sysfs, in bytes.
int64_t parse_size(const std::string& s) {
  if (s.empty()) return 0;
  int64_t n = std::atoll(s.c_str());
  char unit = s.find_first_not_of("0123456789") == std::string::npos
                  ? ' '
                  : s[s.find_first_not_of("0123456789")];
  return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : unit == 'G' ? n << 30 : n;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

CacheSizes host_caches() {
  CacheSizes c;
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string level = read_line(dir + "level"), type = read_line(dir + "type");
    if (level.empty()) break;
    int64_t size = parse_size(read_line(dir + "size"));
    if (level == "1" && type == "Data") c.l1d = size;
    if (level == "2") c.l2 = size;
    if (level == "3") c.l3 = size;
  }
  return c;
}

bool host_cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]) {
#if defined(__x86_64__) || defined(__i386__)
  return __get_cpuid_count(leaf, subleaf, &regs[0], &regs[1], &regs[2], &regs[3]) != 0;
#else
  (void)leaf, (void)subleaf, (void)regs;
  return false;
#endif
}

}  // namespace

CacheSizes cpuid_cache_sizes(CpuidQuery cpuid) {
  CacheSizes c;
  unsigned r[4] = {};
  if (cpuid(0x80000005, 0, r)) c.l1d = int64_t{r[2] >> 24} << 10;  // AMD: ecx[31:24] KiB
  for (unsigned sub = 0; c.l1d == 0 && sub < 8 && cpuid(4, sub, r); ++sub) {
    const unsigned type = r[0] & 31, level = (r[0] >> 5) & 7;
    if (type == 0) break;
    if (level == 1 && type == 1) {  // the L1 data cache: ways x partitions x line x sets
      c.l1d = int64_t{((r[1] >> 22) & 1023) + 1} * (((r[1] >> 12) & 1023) + 1) *
              ((r[1] & 4095) + 1) * (int64_t{r[2]} + 1);
    }
  }
  if (cpuid(0x80000006, 0, r)) c.l2 = int64_t{r[2] >> 16} << 10;  // ecx[31:16] KiB
  return c;
}

const std::set<std::string>& cpu_models_llvm_calls_generic() {
  static const std::set<std::string> names = {"znver5"};
  return names;
}

std::string cpu_model_from_cpuid(const std::string& llvm_name, const std::string& vendor,
                                 int family) {
  if (llvm_name != "generic") return llvm_name;
  if (vendor == "AuthenticAMD" && family == 0x1A) return "znver5";
  return llvm_name;
}

std::string cpu_model_name(const Target& target) {
#if defined(__x86_64__) || defined(__i386__)
  if (target.cpu == "generic" && target == Target::host()) {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return target.cpu;
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return target.cpu;
    int family = static_cast<int>((eax >> 8) & 0xF);
    if (family == 0xF) family += static_cast<int>((eax >> 20) & 0xFF);
    return cpu_model_from_cpuid(target.cpu, vendor, family);
  }
#endif
  return target.cpu;
}

CacheSizes cache_sizes(const Target& target) {
  // Every Target::isa() asks: the host's answer is read once.
  static const Target host = Target::host();
  static const CacheSizes host_sizes = [] {
    CacheSizes c = host_caches();
    if (c.l1d == 0) c = cpuid_cache_sizes(host_cpuid);
    return c;
  }();
  const bool use_host = target == host && host_sizes.l1d > 0;
  if (use_host && host_sizes.l3 > 0) return host_sizes;
  // Known CPUs, per core (L3: the whole chip's share a core sees).
  static const std::map<std::string, CacheSizes> known = {
      {"skylake-avx512", {32 << 10, 1 << 20, 1408 << 10}},
      {"icelake-server", {48 << 10, 1280 << 10, 1536 << 10}},
      {"sapphirerapids", {48 << 10, 2 << 20, 1875 << 10}},
      {"haswell", {32 << 10, 256 << 10, 2 << 20}},
      {"znver3", {32 << 10, 512 << 10, 4 << 20}},
      {"znver4", {32 << 10, 1 << 20, 4 << 20}},
      {"cortex-a72", {32 << 10, 512 << 10, 0}},
      {"cortex-a7", {32 << 10, 128 << 10, 0}},
  };
  CacheSizes table = {32 << 10, 1 << 20, 2 << 20};
  if (auto it = known.find(target.cpu); it != known.end()) table = it->second;
  if (!use_host) return table;
  // The host's L1d and L2 from CPUID, its L3 (unknown there) from the table.
  return {host_sizes.l1d, host_sizes.l2 > 0 ? host_sizes.l2 : table.l2, table.l3};
}

}  // namespace kiln::codegen
