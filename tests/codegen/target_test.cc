#include "codegen/target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "runtime/cpu_features.h"

using kiln::codegen::Target;

TEST(Target, ParsesExplicitTarget) {
  Target t = Target::parse("llvm -mcpu=skylake-avx512 -mattr=+avx2,+fma -mtriple=x86_64-linux-gnu");
  EXPECT_EQ(t.cpu, "skylake-avx512");
  EXPECT_EQ(t.triple, "x86_64-linux-gnu");
  EXPECT_EQ(t.features, (std::vector<std::string>{"+avx2", "+fma"}));
  EXPECT_FALSE(t.fast_math);
  EXPECT_TRUE(t.has_feature("avx2"));
  EXPECT_TRUE(t.has_feature("fma"));
  // Implied by the CPU although not listed.
  EXPECT_TRUE(t.has_feature("avx512f"));
  EXPECT_EQ(t.vector_bits(), 512);
}

TEST(Target, ExplicitFeaturesOverrideTheCpu) {
  Target t = Target::parse("llvm -mcpu=skylake-avx512 -mattr=-avx512f -mtriple=x86_64-linux-gnu");
  EXPECT_FALSE(t.has_feature("avx512f"));
  EXPECT_EQ(t.vector_bits(), 256);
  Target g = Target::parse("llvm -mtriple=x86_64-linux-gnu -mattr=+sse4.2");
  EXPECT_EQ(g.vector_bits(), 128);
  EXPECT_TRUE(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell").vector_bits() == 256);
}

TEST(Target, RoundTripsThroughText) {
  for (const char* s : {"llvm", "llvm -fast-math",
                        "llvm -mcpu=skylake-avx512 -mattr=+avx2,+fma -mtriple=x86_64-linux-gnu",
                        "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=haswell -fast-math"}) {
    Target t = Target::parse(s);
    EXPECT_EQ(Target::parse(t.str()), t) << s << " -> " << t.str();
  }
  EXPECT_TRUE(Target::parse("llvm -fast-math").fast_math);
}

TEST(Target, HostFeaturesComeFromCpuid) {
  Target h = Target::host();
  EXPECT_FALSE(h.triple.empty());
  ASSERT_FALSE(h.features.empty());
  // Enabled ones, and off only what the CPU name would otherwise imply.
  Target named;
  named.triple = h.triple;
  named.cpu = h.cpu;
  for (const std::string& f : h.features)
    if (f[0] == '-') EXPECT_TRUE(named.has_feature(f.substr(1))) << f;
  EXPECT_EQ(h.features.front()[0], '+');
  EXPECT_EQ(Target::parse("llvm"), h);
  EXPECT_TRUE(h.has_feature("sse2"));
}

// A Sapphire Rapids guest whose hypervisor hides AMX (seen on a KVM VM,
// family 6 model 207): LLVM names the CPU sapphirerapids, which implies AMX,
// and CPUID says there is none. The host target must not require it.
TEST(Target, HostFeaturesAVmHidesAreSwitchedOff) {
  const std::string triple = "x86_64-pc-linux-gnu";
  std::map<std::string, bool> present = {
      {"avx2", true},      {"avx512f", true},   {"avx512vnni", true}, {"amx-tile", false},
      {"amx-int8", false}, {"amx-bf16", false}, {"sse4a", false}};
  Target vm = Target::from_host_features(triple, "sapphirerapids", present);
  EXPECT_EQ(vm.features, (std::vector<std::string>{"+avx2", "+avx512f", "+avx512vnni", "-amx-bf16",
                                                   "-amx-int8", "-amx-tile"}));
  // sse4a is AMD's: sapphirerapids never implied it, so it needs no "-".
  EXPECT_FALSE(vm.has_feature("amx-tile"));
  EXPECT_FALSE(vm.isa().amx_int8);
  EXPECT_FALSE(vm.isa().amx_bf16);
  EXPECT_TRUE(vm.isa().int8_dot_instruction);
  EXPECT_EQ(vm.isa().isa_class, "x86_64-avx512");
  std::vector<std::string> req = vm.required_features();
  for (const char* amx : {"amx-tile", "amx-int8", "amx-bf16"})
    EXPECT_EQ(std::find(req.begin(), req.end(), amx), req.end()) << amx;
  EXPECT_NE(std::find(req.begin(), req.end(), "avx512bf16"), req.end());  // still implied
  EXPECT_EQ(Target::parse(vm.str()), vm);

  // The bare metal: AMX present, nothing switched off.
  for (const char* amx : {"amx-tile", "amx-int8", "amx-bf16"}) present[amx] = true;
  Target metal = Target::from_host_features(triple, "sapphirerapids", present);
  EXPECT_TRUE(metal.isa().amx_int8);
  for (const std::string& f : metal.features) EXPECT_EQ(f[0], '+') << f;
}

TEST(Target, RejectsGarbage) {
  auto rejects = [](const std::string& s, const std::string& part) {
    try {
      Target::parse(s);
      ADD_FAILURE() << "accepted " << s;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  rejects("", "llvm");
  rejects("cuda", "cuda");
  rejects("llvm -mcpu", "-mcpu");
  rejects("llvm -mcpu=", "-mcpu=");
  rejects("llvm -mattr=avx2", "avx2");
  rejects("llvm -mattr=+avx2,,+fma", "feature");
  rejects("llvm -foo=bar", "-foo=bar");
  rejects("llvm -mtriple=nonsense-unknown-thing", "nonsense-unknown-thing");
}

namespace kiln::codegen {
namespace {

std::string parse_error(const std::string& s) {
  try {
    Target::parse(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A mistyped CPU or feature is one error with near matches, never LLVM's
// warning per subtarget and an abort.
TEST(Target, UnknownCpuOrFeatureListsNearMatches) {
  std::string e = parse_error("llvm -mcpu=skylake_avx512");
  EXPECT_NE(e.find("unknown -mcpu \"skylake_avx512\""), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean: skylake-avx512"), std::string::npos) << e;
  e = parse_error("llvm -mcpu=haswell -mattr=+avx512vnn");
  EXPECT_NE(e.find("unknown feature \"avx512vnn\""), std::string::npos) << e;
  EXPECT_NE(e.find("avx512vnni"), std::string::npos) << e;
  e = parse_error("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a27");
  EXPECT_NE(e.find("unknown -mcpu \"cortex-a27\" for aarch64"), std::string::npos) << e;
  EXPECT_NE(e.find("cortex-a"), std::string::npos) << e;
  e = parse_error("llvm -mcpu=zzzzzzzzzzzzzzzzzzzz");
  EXPECT_NE(e.find("unknown -mcpu"), std::string::npos) << e;
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << "nothing is near: " << e;
  EXPECT_EQ(parse_error("llvm -mcpu=skylake-avx512 -mattr=+avx2,-avx512f"), "");
}

// Lanes and register budgets come from the per-ISA table.
TEST(Target, IsaTableByArchitectureAndFeatures) {
  struct Case {
    std::string target, isa;
    int bits, registers;
  };
  for (const Case& c : std::vector<Case>{
           {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", "x86_64-avx512", 512, 32},
           {"llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", "x86_64-avx2", 256, 16},
           {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=-avx512f", "x86_64-avx2",
            256, 16},
           {"llvm -mtriple=x86_64-linux-gnu -mcpu=nehalem", "x86_64-sse", 128, 16},
           {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", "aarch64-neon", 128, 32},
           {"llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon", "armv7-neon", 128,
            16},
       }) {
    SCOPED_TRACE(c.target);
    Target t = Target::parse(c.target);
    EXPECT_EQ(t.isa().isa_class, c.isa);
    EXPECT_EQ(t.vector_bits(), c.bits);
    EXPECT_EQ(t.isa().vector_registers, c.registers);
    EXPECT_EQ(t.float_lanes(), c.bits / 32);
  }
  EXPECT_EQ(Target::parse("llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7").arch(), "arm");
}

// What a package built for a target requires: the checkable features the
// target's code may use, so haswell code needs no AVX-512 and skylake-avx512
// code does.
TEST(Target, RequiredFeaturesFollowTheCpu) {
  auto has = [](const std::vector<std::string>& v, const std::string& f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  std::vector<std::string> hsw = Target::parse("llvm -mcpu=haswell").required_features();
  EXPECT_TRUE(has(hsw, "avx2"));
  EXPECT_TRUE(has(hsw, "fma"));
  EXPECT_FALSE(has(hsw, "avx512f"));
  std::vector<std::string> skx = Target::parse("llvm -mcpu=skylake-avx512").required_features();
  EXPECT_TRUE(has(skx, "avx512f"));
  EXPECT_TRUE(has(skx, "avx512bw"));
  EXPECT_FALSE(has(skx, "amx-tile"));
  EXPECT_EQ(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72").required_features(),
            std::vector<std::string>{"neon"});
}

// The runtime's CPUID check (no LLVM) and LLVM's host detection agree on
// every feature a package can require.
TEST(Target, RuntimeFeatureCheckAgreesWithLlvmOnTheHost) {
  Target h = Target::host();
  ASSERT_EQ(h.arch(), runtime::host_arch());
  for (const std::string& f : runtime::checkable_cpu_features(h.arch()))
    EXPECT_EQ(runtime::host_has_cpu_feature(f), h.has_feature(f)) << f;
  EXPECT_TRUE(runtime::missing_cpu_features(h.required_features()).empty());
}

// Cache sizes: the host's from sysfs, known CPUs from the table.
TEST(Target, CacheSizes) {
  CacheSizes host = cache_sizes(Target::host());
  EXPECT_GT(host.l1d, 0);
  EXPECT_GE(host.l2, host.l1d);
  CacheSizes a72 = cache_sizes(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"));
  EXPECT_EQ(a72.l1d, 32 << 10);
  EXPECT_GT(host.l3, 0);  // from sysfs, or the table where only CPUID told L1d and L2
}

// Where sysfs lists no caches (a Zen 5 VM), CPUID tells L1d and L2: AMD's
// leaf 0x80000005, or Intel's leaf 4, and leaf 0x80000006.
TEST(Target, CacheSizesFromCpuid) {
  // An AMD Zen 5 as one VM reported it: 48 KiB L1d, 1 MiB L2.
  CacheSizes amd = cpuid_cache_sizes([](unsigned leaf, unsigned, unsigned r[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    if (leaf == 0x80000005) r[2] = 48u << 24;
    if (leaf == 0x80000006) r[2] = 1024u << 16;
    return leaf == 0x80000005 || leaf == 0x80000006;
  });
  EXPECT_EQ(amd.l1d, 48 << 10);
  EXPECT_EQ(amd.l2, 1 << 20);
  EXPECT_EQ(amd.l3, 0);
  // An Intel CPU: leaf 0x80000005 is all zeros; leaf 4 lists L1i, L1d (12
  // ways x 1 partition x 64-byte lines x 64 sets) and L2.
  CacheSizes intel = cpuid_cache_sizes([](unsigned leaf, unsigned sub, unsigned r[4]) {
    r[0] = r[1] = r[2] = r[3] = 0;
    if (leaf == 4 && sub == 0) r[0] = 2 | 1 << 5;  // instruction cache, level 1
    if (leaf == 4 && sub == 1) {
      r[0] = 1 | 1 << 5;  // data cache, level 1
      r[1] = 11u << 22 | 63;
      r[2] = 63;
    }
    if (leaf == 4 && sub == 2) r[0] = 3 | 2 << 5;  // unified, level 2
    if (leaf == 0x80000006) r[2] = 2048u << 16;
    return true;
  });
  EXPECT_EQ(intel.l1d, 48 << 10);
  EXPECT_EQ(intel.l2, 2 << 20);
  // No leaves: unknown.
  CacheSizes none = cpuid_cache_sizes([](unsigned, unsigned, unsigned*) { return false; });
  EXPECT_EQ(none.l1d, 0);
  EXPECT_EQ(none.l2, 0);
}

// The CPU model name of kiln's per-CPU tables: LLVM's -mcpu name, or for a
// CPU LLVM 16 calls "generic", kiln's own name where it knows the model.
TEST(CpuModelName, NamesCpusLlvmPredatesFromCpuid) {
  EXPECT_EQ(cpu_model_from_cpuid("generic", "AuthenticAMD", 0x1A), "znver5");
  EXPECT_EQ(cpu_model_from_cpuid("znver4", "AuthenticAMD", 0x19), "znver4");
  EXPECT_EQ(cpu_model_from_cpuid("generic", "AuthenticAMD", 0x19), "generic");
  EXPECT_EQ(cpu_model_from_cpuid("generic", "GenuineIntel", 0x1A), "generic");
  EXPECT_EQ(cpu_models_llvm_calls_generic(), (std::set<std::string>{"znver5"}));
  // A parsed target is named by its -mcpu, whatever the host is.
  EXPECT_EQ(cpu_model_name(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4")), "znver4");
  EXPECT_EQ(cpu_model_name(
                Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=generic -mattr=+avx2,+fma")),
            "generic");
  // The host: LLVM's name unless LLVM calls it generic.
  Target host = Target::host();
  if (host.cpu != "generic")
    EXPECT_EQ(cpu_model_name(host), host.cpu);
  else
    EXPECT_FALSE(cpu_model_name(host).empty());
}

}  // namespace
}  // namespace kiln::codegen
