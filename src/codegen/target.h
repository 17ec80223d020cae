// A code generation target: what LLVM may assume about the machine.
//
// Parsed from TVM-style strings, e.g.
//   "llvm"                                        the host, features as detected
//   "llvm -mcpu=skylake-avx512 -mattr=+avx2,+fma -mtriple=x86_64-linux-gnu"
//   "llvm ... -fast-math"                         allow fast-math flags on float ops
// Tuning records are keyed by the features, so str() prints every field.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/isa.h"

namespace kiln::codegen {

struct Target {
  std::string triple;                 // e.g. "x86_64-pc-linux-gnu"
  std::string cpu;                    // e.g. "skylake-avx512"; empty = generic
  std::vector<std::string> features;  // "+avx512f", "-avx512fp16", ...
  bool fast_math = false;

  // Throws std::invalid_argument naming the offending part of s; an unknown
  // -mcpu or -mattr name is one error listing the nearest valid names.
  static Target parse(const std::string& s);
  // The machine this process runs on. Features come from the host's CPUID
  // (llvm::sys::getHostCPUFeatures), not from the CPU name, which a VM may
  // misreport: see from_host_features.
  static Target host();
  // The target of a host LLVM names `cpu` with these CPUID features (name ->
  // present): every present feature as "+name", and "-name" for each absent
  // one the CPU name implies. A VM can hide what its CPU model has (AMX on a
  // Sapphire Rapids guest whose hypervisor does not pass the tile state on);
  // without the "-", the name would put it back into the code and into the
  // package's required features. Sorted: "+" names, then "-" names.
  static Target from_host_features(const std::string& triple, const std::string& cpu,
                                   const std::map<std::string, bool>& present);

  // "llvm -mtriple=... -mcpu=... -mattr=+a,+b [-fast-math]"; parse(str()) == *this.
  std::string str() const;

  // Whether the target has a feature ("avx512f", without '+'). An explicit
  // "+x"/"-x" in `features` decides; otherwise the CPU's own feature set does.
  bool has_feature(const std::string& name_without_plus) const;
  // Widest profitable float vector: 512 with avx512f, 256 with avx2, else 128.
  int vector_bits() const;

  // The target's row of the per-ISA table (target.cc): what kernel shapes
  // are derived from (lanes, register budget) and what records and shipped
  // logs are grouped by.
  using Isa = kiln::Isa;
  // The per-ISA table's row for this target, with its L1 data and L2 cache sizes.
  Isa isa() const;
  int float_lanes() const { return isa().lanes(); }
  // "x86_64", "aarch64", "arm", ... (the triple's first component; armv7*
  // and thumbv7* are "arm").
  std::string arch() const;
  // The CPU features of `runtime::checkable_cpu_features(arch())` this
  // target's code may use: what a package built for it requires of the
  // machine that loads it.
  std::vector<std::string> required_features() const;

  bool operator==(const Target& o) const {
    return triple == o.triple && cpu == o.cpu && features == o.features && fast_math == o.fast_math;
  }
  bool operator!=(const Target& o) const { return !(*this == o); }
};

// The CPU model's name for kiln's per-CPU tables (the shipped logs' <class>.<cpu>
// files, cache sizes): the target's -mcpu name, except for the host when LLVM
// names its CPU "generic" because it predates it; then a name kiln derives from
// CPUID for the models it has data for (AMD family 0x1A: "znver5", which LLVM 16
// does not know). Never passed to LLVM: code for such a host stays -mcpu=generic
// with the host's features.
std::string cpu_model_name(const Target& target);
// The derivation, given the CPUID vendor string and family (base plus
// extended): `llvm_name` unless it is "generic" and the model is known.
std::string cpu_model_from_cpuid(const std::string& llvm_name, const std::string& vendor,
                                 int family);
// The names cpu_model_from_cpuid gives CPUs LLVM calls "generic" ({"znver5"}):
// a shipped log of one of them holds records whose target says -mcpu=generic.
const std::set<std::string>& cpu_models_llvm_calls_generic();

// Per-core cache sizes in bytes (0: unknown): read from sysfs for the host
// (from CPUID where sysfs lists no caches, as in some VMs), from a small
// table for known -mcpu names, else typical values.
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};
CacheSizes cache_sizes(const Target& target);

// One CPUID query (leaf, subleaf) into eax, ebx, ecx, edx; false where the
// CPU has no such leaf.
using CpuidQuery = bool (*)(unsigned leaf, unsigned subleaf, unsigned regs[4]);
// The per-core L1d and L2 sizes CPUID reports: L1d from AMD's leaf
// 0x80000005 or else the deterministic cache leaf 4 (Intel), L2 from leaf
// 0x80000006. L3 stays 0 (unknown): hypervisors pass the host's on (one
// Zen 5 VM reported 508 MiB).
CacheSizes cpuid_cache_sizes(CpuidQuery cpuid);

// The version of the LLVM kiln generates code with, e.g. "16.0.6" (tuning
// records are keyed by it: another LLVM may compile a config differently).
std::string llvm_version_string();

}  // namespace kiln::codegen
