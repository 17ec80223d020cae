// dot2_i16 (the int16 pair dot product accumulate of integer Winograd's GEMM):
// every lowering this machine runs (vpdpwssd with VNNI, pmaddwd on zmm / ymm /
// xmm, generic) bit-exact against the scalar definition, on random values and
// on the extremes (-32768 pairs, whose pmaddwd sum wraps to -2^31), in the
// three-argument, element and folded-accumulator forms; the instruction each
// target selects, in its assembly.
#include <gtest/gtest.h>

#include <random>

#include "codegen/dot_product.h"
#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

// out[0:n] = dot2_i16(acc[0:n], a[0:2n], b[0:2n]); form 1: acc + dot2_i16(0, a, b)
// (a reduction's update); form 2: the element form with ramps of stride 2.
LoweredFunc dot_kernel(int n, int form) {
  Buffer acc = make_buffer("acc", DataType::i32(), {n});
  Buffer a = make_buffer("a", DataType::i16(), {2 * n});
  Buffer b = make_buffer("b", DataType::i16(), {2 * n});
  Buffer out = make_buffer("out", DataType::i32(), {n});
  auto idx = [](int lanes) {
    return lanes == 1 ? make_int(0) : ramp(make_int(0), make_int(1), lanes);
  };
  auto el = [&](const Buffer& buf, int j) {
    return load(buf, n == 1 ? make_int(j) : ramp(make_int(j), make_int(2), n));
  };
  Expr av = load(acc, idx(n)), xa = load(a, idx(2 * n)), xb = load(b, idx(2 * n));
  Expr zero = make_int(0, DataType::i32());
  Expr value = form == 0   ? dot2_i16(av, xa, xb)
               : form == 1 ? av + dot2_i16(zero, xa, xb)
                           : av + dot2_i16(zero, el(a, 0), el(a, 1), el(b, 0), el(b, 1));
  return {"dot2_i16_n" + std::to_string(n) + "_f" + std::to_string(form),
          {acc, a, b, out},
          make_store(out, value, idx(n))};
}

struct Data {
  std::vector<int32_t> acc;
  std::vector<int16_t> a, b;
};

// Random values; every third trial the extremes (-32768 and 32767 pairs, accumulators
// near the int32 limits), where the sums wrap.
Data random_data(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  bool extreme = seed % 3 == 0;
  std::uniform_int_distribution<int32_t> acc(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<int> v(-32768, 32767), pick(0, 2);
  Data d;
  for (int i = 0; i < n; ++i) d.acc.push_back(acc(rng));
  for (int i = 0; i < 2 * n; ++i) {
    int16_t edge[3] = {-32768, 32767, -32768};
    d.a.push_back(extreme ? edge[pick(rng)] : int16_t(v(rng)));
    d.b.push_back(extreme ? edge[pick(rng)] : int16_t(v(rng)));
  }
  return d;
}

// The x86 lowerings this host runs, by target.
std::vector<std::pair<std::string, Target>> rows() {
  std::vector<std::pair<std::string, Target>> r;
  const Target& h = host();
  if (h.arch() != "x86_64") return {{"host", h}};
  r.push_back({"host", h});
  if (h.has_feature("avx512bw"))
    r.push_back({"skylake-avx512", Target::parse("llvm -mcpu=skylake-avx512")});
  if (h.has_feature("avx2")) r.push_back({"haswell", Target::parse("llvm -mcpu=haswell")});
  r.push_back({"x86-64", Target::parse("llvm -mcpu=x86-64")});
  return r;
}

TEST(Dot2I16, ScalarDefinitionWraps) {
  const int16_t a[2] = {-32768, -32768}, b[2] = {-32768, -32768};
  EXPECT_EQ(dot2_i16_value(0, a, b), INT32_MIN);  // 2^31 wraps, as pmaddwd's result
  const int16_t c[2] = {3, -7}, d[2] = {5, 11};
  EXPECT_EQ(dot2_i16_value(100, c, d), 100 + 15 - 77);
}

TEST(Dot2I16, RejectsBadTypes) {
  Buffer i = make_buffer("i", DataType::i32(), {64});
  Buffer h = make_buffer("h", DataType::i16(), {64});
  Buffer u = make_buffer("u", DataType::u8(), {64});
  Expr acc = load(i, ramp(make_int(0), make_int(1), 8));
  Expr h16 = load(h, ramp(make_int(0), make_int(1), 16));
  Expr h8 = load(h, ramp(make_int(0), make_int(1), 8));
  EXPECT_NO_THROW(dot2_i16(acc, h16, h16));
  EXPECT_THROW(dot2_i16(acc, h8, h16), std::invalid_argument);
  EXPECT_THROW(dot2_i16(acc, load(u, ramp(make_int(0), make_int(1), 16)), h16),
               std::invalid_argument);
  EXPECT_THROW(dot2_i16(h8, h16, h16), std::invalid_argument);
  EXPECT_NO_THROW(dot2_i16(acc, h8, h8, h8, load(h, make_int(0))));
}

TEST(Dot2I16, EveryLoweringIsBitExact) {
  for (auto& [what, target] : rows())
    for (int n : {1, 3, 4, 8, 12, 16, 20, 32}) {
      SCOPED_TRACE(what + " (" + detail::dot2_i16_lowering(target, n) + "), " + std::to_string(n) +
                   " lanes");
      for (int form = 0; form < 3; ++form) {
        Compiled k = jit(dot_kernel(n, form), target);
        for (uint64_t trial = 0; trial < 6; ++trial) {
          Data d = random_data(n, 100 * n + trial);
          std::vector<int32_t> out(n, 0x5a5a5a5a);
          ASSERT_EQ(k({d.acc.data(), d.a.data(), d.b.data(), out.data()}), 0);
          for (int i = 0; i < n; ++i)
            EXPECT_EQ(out[i], dot2_i16_value(d.acc[i], &d.a[2 * i], &d.b[2 * i]))
                << "form " << form << " lane " << i << " trial " << trial;
        }
      }
    }
}

// The instruction each target picks (features, not the host), and the folded
// accumulator: one vpdpwssd, or pmaddwd + one add.
TEST(Dot2I16, AssemblyPerTarget) {
  struct Row {
    const char* target;
    int lanes;
    const char* lowering;
    const char* want;
    const char* reg;
  };
  const Row rows[] = {
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 8, "pmaddwd.256", "vpmaddwd", "%ymm"},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 16, "pmaddwd.512", "vpmaddwd",
       "%zmm"},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server", 16, "vpdpwssd.512", "vpdpwssd",
       "%zmm"},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=alderlake", 8, "vpdpwssd.256", "vpdpwssd", "%ymm"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", 4, "generic", "smull", "v0.4s"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.target);
    Target t = Target::parse(r.target);
    EXPECT_EQ(detail::dot2_i16_lowering(t, r.lanes), r.lowering);
    std::string as = emit_assembly({dot_kernel(r.lanes, 1)}, t);
    EXPECT_NE(as.find(r.want), std::string::npos) << as;
    EXPECT_NE(as.find(r.reg), std::string::npos) << as;
  }
}

}  // namespace
}  // namespace kiln::codegen::test
