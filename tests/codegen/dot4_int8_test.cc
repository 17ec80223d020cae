// dot4_u8i8 (the 4-way u8 x s8 dot product accumulate) and round_even:
// every lowering this machine can run, bit-exact against the scalar
// definition on random and extreme bytes; the others (AVX-VNNI, Arm sdot /
// usdot) by their assembly, and under qemu-aarch64 when it and the aarch64
// cross compiler are installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/dot_product.h"
#include "codegen/helpers.h"
#include "ir/printer.h"
#include "ir/simplify.h"

namespace kiln::codegen::test {
namespace {

// The host with some features switched off (a subset of the host, so the JIT
// can run it): the lowerings the host's widest one hides.
Target host_without(const std::vector<std::string>& off) {
  Target t = host();
  for (const std::string& f : off) {
    std::erase(t.features, "+" + f);
    t.features.push_back("-" + f);
  }
  std::sort(t.features.begin(), t.features.end());
  return t;
}

struct Case {
  std::string what;
  Target target;
  std::string lowering16, lowering8;  // dot4_u8i8_lowering for 16 and 8 lanes
};

// The x86 lowerings a Zen 4 / Ice Lake class host runs, each checked to be the
// one the target selects.
std::vector<Case> runnable_cases() {
  std::vector<Case> c;
  const Target& h = host();
  if (h.arch() != "x86_64") return c;
  if (h.has_feature("avx512vnni") && h.has_feature("avx512vl"))
    c.push_back({"host avx512vnni", h, "vpdpbusd.512", "vpdpbusd.256"});
  if (h.has_feature("avx512bw"))
    c.push_back({"avx512bw without vnni", host_without({"avx512vnni", "avxvnni"}), "pmaddwd.512",
                 "pmaddwd.256"});
  if (h.has_feature("avx2"))
    c.push_back(
        {"haswell (avx2)", Target::parse("llvm -mcpu=haswell"), "pmaddwd.256", "pmaddwd.256"});
  if (h.has_feature("ssse3"))
    c.push_back({"x86-64 + ssse3", Target::parse("llvm -mcpu=x86-64 -mattr=+ssse3"), "pmaddwd.128",
                 "pmaddwd.128"});
  c.push_back({"x86-64 generic", Target::parse("llvm -mcpu=x86-64"), "generic", "generic"});
  return c;
}

// out[0:n] = dot4_u8i8(acc[0:n], bytes of a, bytes of b) in one of three forms:
//   0: the 3-argument form, a uint8x4n;  1: 3-argument, a uint8x4 (splat);
//   2: the byte form as the vectorizer leaves it (ramps of stride 4);
//   3: the byte form with the parts in reversed order (no single load: shuffles).
// narrow: dot4_u8i8_narrow_b (b promised within [-64, 64]) instead.
LoweredFunc dot_kernel(int n, int form, bool narrow = false) {
  Buffer acc = make_buffer("acc", DataType::i32(), {n});
  Buffer a = make_buffer("a", DataType::u8(), {4 * n});
  Buffer b = make_buffer("b", DataType::i8(), {4 * n});
  Buffer out = make_buffer("out", DataType::i32(), {n});
  auto vidx = [&](Expr base, int64_t stride, int lanes) {
    return lanes == 1 ? base : ramp(std::move(base), make_int(stride), lanes);
  };
  Expr av = load(acc, vidx(make_int(0), 1, n));
  Expr value;
  auto dot3 = [&](Expr x, Expr y, Expr z) {
    return narrow ? dot4_u8i8_narrow_b(std::move(x), std::move(y), std::move(z))
                  : dot4_u8i8(std::move(x), std::move(y), std::move(z));
  };
  if (form == 0) {
    value = dot3(av, load(a, ramp(make_int(0), 1, 4 * n)), load(b, ramp(make_int(0), 1, 4 * n)));
  } else if (form == 1) {
    value = dot3(av, load(a, ramp(make_int(0), 1, 4)), load(b, ramp(make_int(0), 1, 4 * n)));
  } else {
    std::vector<Expr> pa, pb;
    for (int j = 0; j < 4; ++j) {
      int jj = form == 3 ? 3 - j : j;
      pa.push_back(load(a, vidx(make_int(jj), 4, n)));
      pb.push_back(load(b, vidx(make_int(jj), 4, n)));
    }
    if (form == 3) {
      std::reverse(pa.begin(), pa.end());
      std::reverse(pb.begin(), pb.end());
    }
    value = narrow ? dot4_u8i8_narrow_b(av, pa, pb) : dot4_u8i8(av, pa, pb);
  }
  return {"dot4_n" + std::to_string(n) + "_f" + std::to_string(form) + (narrow ? "_narrow" : ""),
          {acc, a, b, out},
          make_store(out, value, vidx(make_int(0), 1, n))};
}

std::vector<int32_t> expected(const std::vector<int32_t>& acc, const std::vector<uint8_t>& a,
                              const std::vector<int8_t>& b, int n, bool splat) {
  std::vector<int32_t> r(n);
  for (int i = 0; i < n; ++i) r[i] = dot4_u8i8_value(acc[i], &a[splat ? 0 : 4 * i], &b[4 * i]);
  return r;
}

// Random bytes, then the extremes that break a saturating int16 pair sum
// (a = 255 with b = -128 or 127 everywhere) and the int32 wrap-around.
void run_case(const Target& t, int n, int form, const std::string& what) {
  SCOPED_TRACE(what + ", " + std::to_string(n) + " lanes, form " + std::to_string(form));
  LoweredFunc f = dot_kernel(n, form);
  Compiled k = jit(f, t);
  std::mt19937_64 rng(n * 10 + form);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int32_t> acc(n), out(n, 0x5a5a5a5a);
    std::vector<uint8_t> a(4 * n);
    std::vector<int8_t> b(4 * n);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int32_t> word(-(1 << 30), 1 << 30);
    for (auto& x : acc) x = word(rng);
    for (auto& x : a) x = uint8_t(byte(rng));
    for (auto& x : b) x = int8_t(byte(rng) - 128);
    if (trial == 1 || trial == 2) {
      std::fill(a.begin(), a.end(), 255);
      std::fill(b.begin(), b.end(), trial == 1 ? -128 : 127);
    }
    if (trial == 3) std::fill(acc.begin(), acc.end(), 2147483647);  // wraps
    if (trial == 4) std::fill(a.begin(), a.end(), 128);             // only the top bit
    ASSERT_EQ(k({acc.data(), a.data(), b.data(), out.data()}), 0);
    EXPECT_EQ(out, expected(acc, a, b, n, form == 1)) << "trial " << trial;
  }
}

TEST(Dot4U8I8, EveryRunnableLoweringIsBitExact) {
  auto cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "not an x86_64 host";
  for (const Case& c : cases) {
    EXPECT_EQ(detail::dot4_u8i8_lowering(c.target, 16), c.lowering16) << c.what;
    EXPECT_EQ(detail::dot4_u8i8_lowering(c.target, 8), c.lowering8) << c.what;
    // 1 (scalar), 3 (remainder only), 4, 8, 16, 32 lanes and 28 = 16 + 8 + 4 chunks.
    for (int n : {1, 3, 4, 8, 16, 28, 32})
      for (int form : {0, 1, 2, 3}) run_case(c.target, n, form, c.what);
  }
}

// Four neighbouring byte loads become one vector load (no gather, no byte
// inserts) and acc + dot4_u8i8(0, ...) one vpdpbusd.
TEST(Dot4U8I8, ByteFormIsOneLoadAndAccumulates) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  Buffer acc = make_buffer("acc", DataType::i32(), {16});
  Buffer a = make_buffer("a", DataType::u8(), {4});
  Buffer b = make_buffer("b", DataType::i8(), {64});
  std::vector<Expr> pa, pb;
  for (int j = 0; j < 4; ++j) {
    pa.push_back(load(a, make_int(j)));
    pb.push_back(load(b, ramp(make_int(j), make_int(4), 16)));
  }
  Expr idx = ramp(make_int(0), make_int(1), 16);
  Expr sum = load(acc, idx) + dot4_u8i8(make_int(0, DataType::i32()), pa, pb);
  LoweredFunc f{"dot4_acc", {acc, a, b}, make_store(acc, sum, idx)};
  std::string ir = emit_llvm_ir({f}, t, /*optimized=*/false);
  EXPECT_NE(ir.find("load <64 x i8>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("load <4 x i8>"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("gather"), std::string::npos) << ir;
  std::string as = emit_assembly({f}, t);
  EXPECT_NE(as.find("vpdpbusd"), std::string::npos) << as;
  EXPECT_EQ(as.find("vpaddd"), std::string::npos) << "the add was not folded into vpdpbusd\n" << as;
}

// The instruction each target's features select, in its assembly: the
// lowerings this machine cannot run (AVX-VNNI, Arm) included.
TEST(Dot4U8I8, AssemblyHasTheTargetsInstruction) {
  struct A {
    const char* target;
    int lanes;
    const char* want;
    const char* also;  // a second string the assembly has (the register width)
    const char* absent;
  };
  const A cases[] = {
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server", 16, "vpdpbusd\t", "%zmm", nullptr},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server", 8, "vpdpbusd\t", "%ymm", "%zmm"},
      // AVX-VNNI: the VEX encoding of the same instruction.
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=alderlake", 8, "{vex}\tvpdpbusd", "%ymm", "%zmm"},
      // Without VNNI: vpmaddwd on int16 pairs, no vpmaddubsw (see dot_product.h).
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 16, "vpmaddwd\t", "%zmm",
       "vpmaddubsw"},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 8, "vpmaddwd\t", "%ymm", "vpmaddubsw"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod", 4, "sdot\t", "eor",
       "usdot"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod,+i8mm", 4, "usdot\t",
       "usdot", "\tsdot"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", 4, "mul", "mul", "sdot"},
  };
  for (const A& c : cases) {
    SCOPED_TRACE(std::string(c.target) + ", " + std::to_string(c.lanes) + " lanes");
    std::string as = emit_assembly({dot_kernel(c.lanes, 0)}, Target::parse(c.target));
    EXPECT_NE(as.find(c.want), std::string::npos) << as;
    EXPECT_NE(as.find(c.also), std::string::npos) << as;
    if (c.absent) {
      EXPECT_EQ(as.find(c.absent), std::string::npos) << as;
    }
  }
}

// Without VNNI the dot costs two multiplies per vector of int32 lanes (vpmaddwd
// on the even and the odd bytes widened to int16), not four (pmaddubsw on the
// 7-bit halves of the u8 operand, each followed by a pmaddwd).
TEST(Dot4U8I8, Avx2LoweringIsTwoMultipliesPerVector) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  auto count = [](const std::string& as, const std::string& what) {
    int n = 0;
    for (size_t p = as.find(what); p != std::string::npos; p = as.find(what, p + 1)) ++n;
    return n;
  };
  for (int lanes : {8, 16, 32})
    for (int form : {0, 1}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes, form " + std::to_string(form));
      std::string as = emit_assembly({dot_kernel(lanes, form)}, t);
      EXPECT_EQ(count(as, "vpmaddwd\t"), 2 * lanes / 8) << as;
      EXPECT_EQ(count(as, "vpmaddubsw"), 0) << as;
    }
}

// ---- dot4_u8i8_narrow_b: b within [-64, 64] (pmaddubsw + pmaddwd(ones) without VNNI)

// Random u8 and b in [-64, 64], then the worst cases of pmaddubsw's saturating
// int16 pair sums: 255 next to +-64 everywhere (pairs of +-32640), alternating
// signs (pairs that cancel), and the int32 wrap-around of the accumulator.
void run_narrow_case(const Target& t, int n, int form, const std::string& what) {
  SCOPED_TRACE(what + ", narrow b, " + std::to_string(n) + " lanes, form " + std::to_string(form));
  Compiled k = jit(dot_kernel(n, form, /*narrow=*/true), t);
  std::mt19937_64 rng(n * 10 + form + 7);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<int32_t> acc(n), out(n, 0x5a5a5a5a);
    std::vector<uint8_t> a(4 * n);
    std::vector<int8_t> b(4 * n);
    std::uniform_int_distribution<int> byte(0, 255), weight(-64, 64);
    std::uniform_int_distribution<int32_t> word(-(1 << 30), 1 << 30);
    for (auto& x : acc) x = word(rng);
    for (auto& x : a) x = uint8_t(byte(rng));
    for (auto& x : b) x = int8_t(weight(rng));
    if (trial == 1 || trial == 2) {
      std::fill(a.begin(), a.end(), 255);
      std::fill(b.begin(), b.end(), trial == 1 ? -64 : 64);
    }
    if (trial == 3)
      for (size_t i = 0; i < b.size(); ++i) {
        a[i] = 255;
        b[i] = i % 2 ? 64 : -64;
      }
    if (trial == 4) std::fill(acc.begin(), acc.end(), 2147483647);  // wraps
    if (trial == 5)  // 255s next to +-64s at random places
      for (size_t i = 0; i < b.size(); ++i)
        if (byte(rng) < 128) {
          a[i] = 255;
          b[i] = byte(rng) < 128 ? 64 : -64;
        }
    ASSERT_EQ(k({acc.data(), a.data(), b.data(), out.data()}), 0);
    EXPECT_EQ(out, expected(acc, a, b, n, form == 1)) << "trial " << trial;
  }
}

// The narrow lowering where the target has no dot instruction, the usual one
// (the promise ignored) where it has one; bit-exact either way.
TEST(Dot4U8I8NarrowB, EveryRunnableLoweringIsBitExact) {
  auto cases = runnable_cases();
  if (cases.empty()) GTEST_SKIP() << "not an x86_64 host";
  for (Case c : cases) {
    auto narrow = [](std::string l) {
      return l.rfind("pmaddwd", 0) == 0 ? "pmaddubsw" + l.substr(7) : l;
    };
    EXPECT_EQ(detail::dot4_u8i8_lowering(c.target, 16, true), narrow(c.lowering16)) << c.what;
    EXPECT_EQ(detail::dot4_u8i8_lowering(c.target, 8, true), narrow(c.lowering8)) << c.what;
    // Without the promise nothing changes.
    EXPECT_EQ(detail::dot4_u8i8_lowering(c.target, 16), c.lowering16) << c.what;
    for (int n : {1, 3, 4, 8, 12, 16, 28, 32})
      for (int form : {0, 1, 2, 3}) run_narrow_case(c.target, n, form, c.what);
  }
}

// The named targets: haswell and skylake-avx512 (AVX-512BW, no VNNI) take
// pmaddubsw; icelake-server (VNNI) keeps vpdpbusd; a target string with VNNI
// switched off takes pmaddubsw again.
TEST(Dot4U8I8NarrowB, LoweringFollowsTheTargetsFeatures) {
  EXPECT_EQ(detail::dot4_u8i8_lowering(Target::parse("llvm -mcpu=haswell"), 8, true),
            "pmaddubsw.256");
  EXPECT_EQ(detail::dot4_u8i8_lowering(Target::parse("llvm -mcpu=skylake-avx512"), 16, true),
            "pmaddubsw.512");
  EXPECT_EQ(detail::dot4_u8i8_lowering(Target::parse("llvm -mcpu=skylake-avx512"), 8, true),
            "pmaddubsw.256");
  EXPECT_EQ(detail::dot4_u8i8_lowering(Target::parse("llvm -mcpu=icelake-server"), 16, true),
            "vpdpbusd.512");
  EXPECT_EQ(detail::dot4_u8i8_lowering(Target::parse("llvm -mcpu=icelake-server"), 8, true),
            "vpdpbusd.256");
  EXPECT_EQ(detail::dot4_u8i8_lowering(
                Target::parse("llvm -mcpu=icelake-server -mattr=-avx512vnni"), 16, true),
            "pmaddubsw.512");
  EXPECT_EQ(detail::dot4_u8i8_lowering(
                Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod"),
                4, true),
            "sdot");
}

// Two multiplies per 32 products and no widening: one vpmaddubsw and one
// vpmaddwd per vector of int32 lanes, no shifts.
TEST(Dot4U8I8NarrowB, AssemblyIsPmaddubswThenPmaddwd) {
  auto count = [](const std::string& as, const std::string& what) {
    int n = 0;
    for (size_t p = as.find(what); p != std::string::npos; p = as.find(what, p + 1)) ++n;
    return n;
  };
  struct A {
    const char* target;
    int width;  // int32 lanes per vector
    const char* reg;
  };
  for (A c : {A{"llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 8, "%ymm"},
              A{"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 16, "%zmm"}})
    for (int lanes : {16, 32})
      for (int form : {0, 1}) {
        SCOPED_TRACE(std::string(c.target) + ", " + std::to_string(lanes) + " lanes, form " +
                     std::to_string(form));
        std::string as = emit_assembly({dot_kernel(lanes, form, true)}, Target::parse(c.target));
        EXPECT_EQ(count(as, "vpmaddubsw\t"), lanes / c.width) << as;
        EXPECT_EQ(count(as, "vpmaddwd\t"), lanes / c.width) << as;
        EXPECT_EQ(count(as, "vpsraw"), 0) << as;
        EXPECT_NE(as.find(c.reg), std::string::npos) << as;
      }
  // VNNI ignores the promise.
  std::string as =
      emit_assembly({dot_kernel(16, 0, true)},
                    Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server"));
  EXPECT_NE(as.find("vpdpbusd"), std::string::npos) << as;
  EXPECT_EQ(as.find("vpmaddubsw"), std::string::npos) << as;
}

// Why the promise matters: outside [-64, 64] the haswell sequence saturates
// (255 * -128 twice is -65280, pmaddubsw gives -32768), while the exact lowering
// does not. This is what the graph's range check keeps away from the kernels.
TEST(Dot4U8I8NarrowB, OutsideThePromiseTheAvx2SequenceSaturates) {
  if (!host().has_feature("avx2")) GTEST_SKIP() << "the host has no AVX2";
  Target hsw = Target::parse("llvm -mcpu=haswell");
  Compiled narrow = jit(dot_kernel(8, 0, true), hsw);
  Compiled exact = jit(dot_kernel(8, 0), hsw);
  std::vector<int32_t> acc(8, 0), got(8), want(8);
  std::vector<uint8_t> a(32, 255);
  std::vector<int8_t> b(32, -128);
  ASSERT_EQ(narrow({acc.data(), a.data(), b.data(), got.data()}), 0);
  ASSERT_EQ(exact({acc.data(), a.data(), b.data(), want.data()}), 0);
  EXPECT_EQ(want, std::vector<int32_t>(8, 4 * 255 * -128));
  EXPECT_EQ(got, std::vector<int32_t>(8, 2 * -32768));
}

TEST(Dot4U8I8NarrowB, FoldsAndPrintsLikeDot4) {
  std::vector<Expr> a = {make_int(255, DataType::u8()), make_int(1, DataType::u8()),
                         make_int(0, DataType::u8()), make_int(128, DataType::u8())};
  std::vector<Expr> b = {make_int(-64, DataType::i8()), make_int(64, DataType::i8()),
                         make_int(5, DataType::i8()), make_int(-1, DataType::i8())};
  Expr e = simplify(dot4_u8i8_narrow_b(make_int(7, DataType::i32()), a, b));
  const int64_t* v = as_const_int(e);
  ASSERT_NE(v, nullptr) << e;
  EXPECT_EQ(*v, 7 + 255 * -64 + 64 + 0 - 128);
  EXPECT_THROW(dot4_u8i8_narrow_b(make_int(0, DataType::i32()), b, a), std::invalid_argument);
  Buffer x = make_buffer("x", DataType::u8(), {64});
  Buffer y = make_buffer("y", DataType::i8(), {64});
  Expr ok = dot4_u8i8_narrow_b(make_int(0, DataType::i32()), load(x, ramp(make_int(0), 1, 4)),
                               load(y, ramp(make_int(0), 1, 32)));
  EXPECT_EQ(ok.dtype(), DataType::i32(8));
  std::ostringstream os;
  os << ok;
  EXPECT_NE(os.str().find("dot4_u8i8_narrow_b("), std::string::npos) << os.str();
}

TEST(Dot4U8I8, SimplifierFoldsConstantsAndCallChecksTypes) {
  std::vector<Expr> a = {make_int(255, DataType::u8()), make_int(1, DataType::u8()),
                         make_int(0, DataType::u8()), make_int(128, DataType::u8())};
  std::vector<Expr> b = {make_int(-128, DataType::i8()), make_int(127, DataType::i8()),
                         make_int(5, DataType::i8()), make_int(-1, DataType::i8())};
  Expr e = simplify(dot4_u8i8(make_int(7, DataType::i32()), a, b));
  const int64_t* v = as_const_int(e);
  ASSERT_NE(v, nullptr) << e;
  EXPECT_EQ(*v, 7 + 255 * -128 + 127 + 0 - 128);
  EXPECT_EQ(e.dtype(), DataType::i32());
  // Wrong element types and lanes are one error naming the intrinsic.
  EXPECT_THROW(dot4_u8i8(make_int(0, DataType::i32()), b, a), std::invalid_argument);
  Buffer x = make_buffer("x", DataType::u8(), {64});
  Buffer y = make_buffer("y", DataType::i8(), {64});
  EXPECT_THROW(dot4_u8i8(load(make_buffer("z", DataType::i32(), {8}), ramp(make_int(0), 1, 8)),
                         load(x, ramp(make_int(0), 1, 16)), load(y, ramp(make_int(0), 1, 16))),
               std::invalid_argument);
  Expr ok = dot4_u8i8(make_int(0, DataType::i32()), load(x, ramp(make_int(0), 1, 4)),
                      load(y, ramp(make_int(0), 1, 32)));
  EXPECT_EQ(ok.dtype(), DataType::i32(8));  // a scalar acc broadcasts
  std::ostringstream os;
  os << ok;
  EXPECT_NE(os.str().find("dot4_u8i8("), std::string::npos) << os.str();
}

TEST(RoundEven, HalvesGoToEven) {
  const std::vector<float> xs = {0.5f,  1.5f, 2.5f,   -0.5f,  -1.5f, -2.5f, 0.49999997f, 3.7f,
                                 -3.7f, 1e9f, 255.5f, 254.5f, 0.0f,  -0.0f, 8.5f,        -8.5f};
  for (int lanes : {1, 16}) {
    int64_t n = int64_t(xs.size());
    Buffer A = make_buffer("A", DataType::f32(), {n}), C = make_buffer("C", DataType::f32(), {n});
    Var i("i");
    Expr idx = lanes == 1 ? Expr(i) : ramp(i * lanes, 1, lanes);
    auto f = jit({"round_even_" + std::to_string(lanes),
                  {A, C},
                  serial(i, 0, n / lanes, make_store(C, round_even(load(A, idx)), idx))});
    std::vector<float> out(n);
    ASSERT_EQ(f({const_cast<float*>(xs.data()), out.data()}), 0);
    for (size_t k = 0; k < xs.size(); ++k) {
      EXPECT_EQ(out[k], std::nearbyint(xs[k])) << xs[k] << " lanes " << lanes;
      EXPECT_EQ(std::signbit(out[k]), std::signbit(std::nearbyint(xs[k]))) << xs[k];
    }
  }
}

// The Arm lowerings run: each kernel compiled for aarch64 into an object,
// linked statically with a small C driver that checks it against the scalar
// definition, run under qemu-aarch64 with a CPU that has dotprod and i8mm.
TEST(Dot4U8I8, ArmLoweringsRunUnderQemu) {
  const char* cc = "aarch64-linux-gnu-gcc";
  std::string qemu = std::system("command -v qemu-aarch64-static >/dev/null 2>&1") == 0
                         ? "qemu-aarch64-static"
                     : std::system("command -v qemu-aarch64 >/dev/null 2>&1") == 0 ? "qemu-aarch64"
                                                                                   : "";
  if (qemu.empty()) GTEST_SKIP() << "qemu-aarch64 is not installed (Debian: qemu-user-static)";
  if (std::system((std::string("command -v ") + cc + " >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << cc << " is not installed (Debian: gcc-aarch64-linux-gnu)";
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln-dot4-arm-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // The driver: random and extreme bytes through each kernel, compared with the
  // scalar definition; prints one line per kernel and exits non-zero on a mismatch.
  std::ofstream(dir / "driver.c") << R"(
#include <stdint.h>
#include <stdio.h>
#include <string.h>
typedef int32_t (*fn_t)(void**);
extern int32_t dot4_n4_f0(void**), dot4_n16_f0(void**), dot4_n8_f1(void**), dot4_n12_f2(void**),
    dot4_n4_f3(void**);
static uint64_t s = 88172645463325252ull;
static uint32_t rnd(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (uint32_t)s; }
static int check(const char* name, fn_t f, int n, int splat) {
  int32_t acc[64], out[64]; uint8_t a[256]; int8_t b[256];
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < n; ++i) acc[i] = (int32_t)rnd();
    for (int i = 0; i < 4 * n; ++i) { a[i] = t == 1 ? 255 : (uint8_t)rnd(); b[i] = t == 1 ? -128 : (int8_t)rnd(); }
    void* args[4] = {acc, a, b, out};
    if (f(args) != 0) return 1;
    for (int i = 0; i < n; ++i) {
      uint32_t r = (uint32_t)acc[i];
      for (int j = 0; j < 4; ++j) r += (uint32_t)((int32_t)a[splat ? j : 4 * i + j] * (int32_t)b[4 * i + j]);
      if ((int32_t)r != out[i]) { printf("%s: lane %d got %d want %d\n", name, i, out[i], (int32_t)r); return 1; }
    }
  }
  printf("%s ok\n", name);
  return 0;
}
int main(void) {
  int bad = 0;
  bad |= check("n4_f0", dot4_n4_f0, 4, 0);
  bad |= check("n16_f0", dot4_n16_f0, 16, 0);
  bad |= check("n8_f1", dot4_n8_f1, 8, 1);
  bad |= check("n12_f2", dot4_n12_f2, 12, 0);
  bad |= check("n4_f3", dot4_n4_f3, 4, 0);
  return bad;
}
)";
  const char* targets[] = {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod,+i8mm",
                           "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod",
                           "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"};
  const char* lowerings[] = {"usdot", "sdot", "generic"};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(targets[i]);
    Target t = Target::parse(targets[i]);
    EXPECT_EQ(detail::dot4_u8i8_lowering(t, 4), lowerings[i]);
    std::string obj = compile_object({dot_kernel(4, 0), dot_kernel(16, 0), dot_kernel(8, 1),
                                      dot_kernel(12, 2), dot_kernel(4, 3)},
                                     t);
    std::ofstream(dir / "k.o", std::ios::binary) << obj;
    std::string exe = (dir / "t").string();
    std::string build = std::string(cc) + " -static -O1 -o " + exe + " " +
                        (dir / "driver.c").string() + " " + (dir / "k.o").string() + " -lm 2> " +
                        (dir / "cc.log").string();
    ASSERT_EQ(std::system(build.c_str()), 0) << "linking the aarch64 driver failed: " << build;
    std::string run = qemu + " -cpu max " + exe + " > " + (dir / "run.log").string() + " 2>&1";
    int rc = std::system(run.c_str());
    std::ifstream log(dir / "run.log");
    std::stringstream text;
    text << log.rdbuf();
    EXPECT_EQ(rc, 0) << text.str();
    EXPECT_NE(text.str().find("n4_f3 ok"), std::string::npos) << text.str();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::codegen::test
