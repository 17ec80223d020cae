// dot2_bf16 (the bf16 pair dot product accumulate, vdpbf16ps) and the
// float32 -> bfloat16 cast: the generic lowering bit-exact against the scalar
// definition; the AVX512_BF16 lowering (when the host has it) within float32
// rounding of the accumulation order; the instruction in the assembly of an
// avx512bf16 target.
#include "codegen/bf16_dot.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

// out[0:n] = dot2_bf16(acc[0:n], a[0:2n], b[0:2n]); with `fold`, written as a
// reduction's update acc + dot2_bf16(0, a, b) (one accumulating instruction).
LoweredFunc dot_kernel(int n, bool fold = false, bool element_form = false) {
  Buffer acc = make_buffer("acc", DataType::f32(), {n});
  Buffer a = make_buffer("a", DataType::bf16(), {2 * n});
  Buffer b = make_buffer("b", DataType::bf16(), {2 * n});
  Buffer out = make_buffer("out", DataType::f32(), {n});
  auto idx = [](int lanes) {
    return lanes == 1 ? make_int(0) : ramp(make_int(0), make_int(1), lanes);
  };
  Expr av = load(acc, idx(n)), xa = load(a, idx(2 * n)), xb = load(b, idx(2 * n));
  Expr value = fold ? av + dot2_bf16(make_float(0.0), xa, xb) : dot2_bf16(av, xa, xb);
  if (element_form) {
    // Elements as the vectorizer leaves scalar reads: ramps of stride 2.
    auto el = [&](const Buffer& buf, int j) {
      return load(buf, n == 1 ? make_int(j) : ramp(make_int(j), make_int(2), n));
    };
    value = av + dot2_bf16(make_float(0.0), el(a, 0), el(a, 1), el(b, 0), el(b, 1));
  }
  return {"dot2_bf16_n" + std::to_string(n) + (fold ? "_fold" : "") + (element_form ? "_el" : ""),
          {acc, a, b, out},
          make_store(out, value, idx(n))};
}

// Normal bf16 values of both signs over a wide range (no denormals: the
// instruction flushes them and the generic lowering does not).
uint16_t random_bf16(std::mt19937_64& rng) {
  std::uniform_real_distribution<float> mag(-10.0f, 10.0f);
  float x = std::exp2(mag(rng)) * (rng() & 1 ? -1.0f : 1.0f);
  return f32_to_bf16_value(x);
}

struct Data {
  std::vector<float> acc;
  std::vector<uint16_t> a, b;
};

Data random_data(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  for (int i = 0; i < n; ++i) d.acc.push_back(u(rng));
  for (int i = 0; i < 2 * n; ++i) {
    d.a.push_back(random_bf16(rng));
    d.b.push_back(random_bf16(rng));
  }
  return d;
}

std::vector<float> run(const Compiled& k, Data& d, int n) {
  std::vector<float> out(n, -12345.0f);
  EXPECT_EQ(k({d.acc.data(), d.a.data(), d.b.data(), out.data()}), 0);
  return out;
}

TEST(Dot2BF16, ScalarDefinition) {
  // 1.5 * 2 (odd, first) then 3 * -0.5: 10 + 3 - 1.5.
  const uint16_t a[2] = {f32_to_bf16_value(3.0f), f32_to_bf16_value(1.5f)};
  const uint16_t b[2] = {f32_to_bf16_value(-0.5f), f32_to_bf16_value(2.0f)};
  EXPECT_EQ(dot2_bf16_value(10.0f, a, b), 11.5f);
  // Round to nearest even on the bit pattern, ties included.
  EXPECT_EQ(f32_to_bf16_value(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even down
  EXPECT_EQ(f32_to_bf16_value(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even up
  EXPECT_EQ(f32_to_bf16_value(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16_value(NAN), 0x7fc0);
  EXPECT_EQ(bf16_to_f32_value(0xbf80), -1.0f);
}

TEST(Dot2BF16, RejectsBadTypes) {
  Buffer f = make_buffer("f", DataType::f32(), {64});
  Buffer h = make_buffer("h", DataType::bf16(), {64});
  Expr acc = load(f, ramp(make_int(0), make_int(1), 8));
  Expr h16 = load(h, ramp(make_int(0), make_int(1), 16));
  Expr h8 = load(h, ramp(make_int(0), make_int(1), 8));
  Expr f16 = load(f, ramp(make_int(0), make_int(1), 16));
  EXPECT_NO_THROW(dot2_bf16(acc, h16, h16));
  EXPECT_THROW(dot2_bf16(acc, h8, h16), std::invalid_argument);
  EXPECT_THROW(dot2_bf16(acc, f16, h16), std::invalid_argument);
  EXPECT_THROW(dot2_bf16(h8, h16, h16), std::invalid_argument);
  EXPECT_NO_THROW(dot2_bf16(acc, h8, h8, h8, load(h, make_int(0))));
  EXPECT_THROW(dot2_bf16(acc, h16, h8, h8, h8), std::invalid_argument);
}

// The generic lowering (any x86-64, and the host with avx512bf16 switched off)
// equals the scalar definition bit for bit.
TEST(Dot2BF16, GenericLoweringIsBitExact) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = Target::parse("llvm -mcpu=x86-64");
  ASSERT_EQ(detail::dot2_bf16_lowering(t, 16), "generic");
  for (int n : {1, 3, 4, 8, 16, 20, 32}) {
    SCOPED_TRACE(std::to_string(n) + " lanes");
    Compiled k = jit(dot_kernel(n), t);
    // The element form's unfolded equivalent is the 3-argument form: the same bits.
    Compiled ke = jit(dot_kernel(n, false, true), t);
    for (uint64_t trial = 0; trial < 4; ++trial) {
      Data d = random_data(n, 100 * n + trial);
      std::vector<float> zero(n, 0.0f);
      Data dz = d;
      dz.acc = zero;
      std::vector<float> el = run(ke, dz, n);
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(el[i], dot2_bf16_value(0.0f, &d.a[2 * i], &d.b[2 * i])) << "element form " << i;
      std::vector<float> out = run(k, d, n);
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(std::bit_cast<uint32_t>(out[i]),
                  std::bit_cast<uint32_t>(dot2_bf16_value(d.acc[i], &d.a[2 * i], &d.b[2 * i])))
            << "lane " << i << " trial " << trial;
    }
  }
}

// vdpbf16ps on the host, when it has avx512bf16: the products are exact, so
// the only freedom is how the two additions round (the instruction's order, or
// one rounding of the sum): within 2 float32 ulps of the sum of magnitudes.
TEST(Dot2BF16, Avx512Bf16LoweringMatchesDefinition) {
  const Target& h = host();
  if (h.arch() != "x86_64" || !h.has_feature("avx512bf16"))
    GTEST_SKIP() << "the host has no avx512bf16";
  ASSERT_EQ(detail::dot2_bf16_lowering(h, 16), "vdpbf16ps.512");
  int exact = 0, total = 0;
  for (int n : {1, 3, 4, 8, 16, 20, 28, 32}) {
    SCOPED_TRACE(std::to_string(n) + " lanes");
    for (int form = 0; form < 3; ++form) {
      Compiled k = jit(dot_kernel(n, form == 1, form == 2), h);
      for (uint64_t trial = 0; trial < 4; ++trial) {
        Data d = random_data(n, 1000 * n + trial);
        std::vector<float> out = run(k, d, n);
        for (int i = 0; i < n; ++i) {
          float want = dot2_bf16_value(d.acc[i], &d.a[2 * i], &d.b[2 * i]);
          double mag = std::fabs(d.acc[i]);
          for (int j = 0; j < 2; ++j)
            mag += std::fabs(double(bf16_to_f32_value(d.a[2 * i + j])) *
                             bf16_to_f32_value(d.b[2 * i + j]));
          EXPECT_LE(std::fabs(double(out[i]) - want), 2 * 0x1p-23 * mag)
              << "lane " << i << " got " << out[i] << " want " << want;
          exact += out[i] == want;
          ++total;
        }
      }
    }
  }
  std::printf("vdpbf16ps: %d of %d lanes bit-equal to the scalar definition\n", exact, total);
}

// float32 -> bfloat16 casts round to nearest even, bit-exact with the scalar.
TEST(Dot2BF16, CastToBf16RoundsToNearestEven) {
  const int n = 16;
  Buffer in = make_buffer("in", DataType::f32(), {n});
  Buffer out = make_buffer("out", DataType::bf16(), {n});
  Expr idx = ramp(make_int(0), make_int(1), n);
  LoweredFunc f{"to_bf16", {in, out}, make_store(out, cast(DataType::bf16(n), load(in, idx)), idx)};
  Compiled k = jit(f);
  std::vector<uint32_t> bits = {0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,
                                0xbf808000, 0x7f7fffff, 0x00000000, 0x80000000,
                                0x7fc00000, 0x447a0000, 0x3dcccccd, 0xc2c80000,
                                0x3f7fffff, 0x3effff80, 0x3f800000, 0x40490fdb};
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = std::bit_cast<float>(bits[i]);
  std::vector<uint16_t> r(n, 0x1234);
  ASSERT_EQ(k({x.data(), r.data()}), 0);
  for (int i = 0; i < n; ++i) EXPECT_EQ(r[i], f32_to_bf16_value(x[i])) << std::hex << bits[i];
}

// The instruction each target selects, in its assembly; acc + dot2_bf16(0, ..)
// is one vdpbf16ps with no separate add.
TEST(Dot2BF16, AssemblyHasVdpbf16ps) {
  Target zen4 = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  std::string as16 = emit_assembly({dot_kernel(16)}, zen4);
  EXPECT_NE(as16.find("vdpbf16ps"), std::string::npos) << as16;
  EXPECT_NE(as16.find("%zmm"), std::string::npos) << as16;
  std::string as8 = emit_assembly({dot_kernel(8)}, zen4);
  EXPECT_NE(as8.find("vdpbf16ps"), std::string::npos) << as8;
  EXPECT_NE(as8.find("%ymm"), std::string::npos) << as8;
  std::string fold = emit_assembly({dot_kernel(16, true)}, zen4);
  EXPECT_NE(fold.find("vdpbf16ps"), std::string::npos) << fold;
  EXPECT_EQ(fold.find("vaddps"), std::string::npos) << "the add was not folded\n" << fold;
  std::string el = emit_assembly({dot_kernel(16, false, true)}, zen4);
  EXPECT_NE(el.find("vdpbf16ps"), std::string::npos) << el;
  EXPECT_EQ(el.find("vaddps"), std::string::npos) << "the add was not folded\n" << el;
  std::string hsw = emit_assembly({dot_kernel(16)},
                                  Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell"));
  EXPECT_EQ(hsw.find("vdpbf16ps"), std::string::npos) << hsw;
  EXPECT_NE(hsw.find("vfmadd"), std::string::npos) << hsw;
}

}  // namespace
}  // namespace kiln::codegen::test
