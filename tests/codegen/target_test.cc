#include "codegen/target.h"

#include <gtest/gtest.h>

#include <stdexcept>

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
  EXPECT_FALSE(h.features.empty());
  for (const std::string& f : h.features) EXPECT_EQ(f[0], '+') << f;  // only enabled ones
  EXPECT_EQ(Target::parse("llvm"), h);
  EXPECT_TRUE(h.has_feature("sse2"));
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
