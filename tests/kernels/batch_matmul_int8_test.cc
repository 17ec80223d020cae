// batch_matmul_int8.x86 against plain integer math on the logical layouts:
// random shapes that no tile divides (K not a multiple of 4, N prime), a
// broadcast right operand (Bb = 1), the fallback and random configs of the
// space, on every x86 lowering of dot4_u8i8 this machine runs (VNNI,
// pmaddubsw on AVX-512BW and AVX2, generic). All bit-exact.
#include "ops/batch_matmul_int8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "codegen/dot_product.h"
#include "harness.h"
#include "ops/op_template.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using ir::DataType;
using ops::Workload;
using schedule::Config;

struct IsaRow {
  std::string what;
  codegen::Target target;
};

codegen::Target host_without(const std::vector<std::string>& off) {
  codegen::Target t = host_target();
  for (const std::string& f : off) {
    std::erase(t.features, "+" + f);
    t.features.push_back("-" + f);
  }
  std::sort(t.features.begin(), t.features.end());
  return t;
}

std::vector<IsaRow> isa_rows() {
  const codegen::Target& h = host_target();
  if (h.arch() != "x86_64") return {{"host", h}};
  std::vector<IsaRow> rows;
  rows.push_back({"host (" + codegen::detail::dot4_u8i8_lowering(h, 16) + ")", h});
  if (h.has_feature("avx512vnni") && h.has_feature("avx512bw"))
    rows.push_back({"avx512bw, no vnni", host_without({"avx512vnni", "avxvnni"})});
  if (h.has_feature("avx2"))
    rows.push_back({"avx2 (haswell)", codegen::Target::parse("llvm -mcpu=haswell")});
  rows.push_back({"generic x86-64", codegen::Target::parse("llvm -mcpu=x86-64")});
  return rows;
}

struct S {
  int64_t B, Bb, M, N, K;
};

void check(const S& s, const Config& cfg, const IsaRow& row, std::mt19937_64& rng) {
  const ops::OpTemplate& t = ops::batch_matmul_int8_template();
  Workload w = ops::batch_matmul_int8_workload(s.B, s.Bb, s.M, s.N, s.K);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json());
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> A(static_cast<size_t>(s.B * s.M * s.K));
  std::vector<int8_t> B(static_cast<size_t>(s.Bb * s.K * s.N));
  for (auto& x : A) x = uint8_t(byte(rng));
  for (auto& x : B) x = int8_t(byte(rng) - 128);
  // Extremes too: the largest products must not overflow anything.
  A[0] = 255;
  B[0] = -128;
  int64_t bn = cfg.split("tile_x").back();
  std::vector<int8_t> Bp = ops::pack_batch_matmul_int8(B.data(), s.Bb, s.K, s.N, bn);
  auto shapes = t.input_shapes(w, cfg);
  int64_t packed = 1;
  for (int64_t d : shapes[1]) packed *= d;
  ASSERT_EQ(int64_t(Bp.size()), packed);
  // Plain integer math on the logical layouts.
  std::vector<int32_t> want(static_cast<size_t>(s.B * s.M * s.N));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < s.K; ++k)
          acc += int64_t(A[(b * s.M + m) * s.K + k]) * B[((s.Bb == 1 ? 0 : b) * s.K + k) * s.N + n];
        want[(b * s.M + m) * s.N + n] = int32_t(acc);
      }
  std::vector<int32_t> ref(want.size());
  t.reference_typed(w, cfg, {A.data(), Bp.data()}, ref.data());
  EXPECT_EQ(ref, want);

  ops::Kernel k = ops::make_kernel(t, w, cfg);
  auto mod = codegen::jit_compile({schedule::lower(k.sch, k.args, "bmm8")}, row.target);
  std::vector<int32_t> got(want.size(), 0x5a5a5a5a);
  std::vector<void*> args = {A.data(), Bp.data(), got.data()};
  ASSERT_EQ(mod->get_function("bmm8")(args.data()), 0);
  EXPECT_EQ(got, want);
}

TEST(BatchMatmulInt8, BitExactOnEveryLowering) {
  const ops::OpTemplate& t = ops::batch_matmul_int8_template();
  std::mt19937_64 rng(14);
  const S shapes[] = {{2, 2, 7, 13, 29},
                      {3, 1, 16, 24, 33},
                      {4, 4, 1, 64, 16},
                      {2, 2, 17, 32, 64},
                      {1, 1, 5, 7, 3}};
  for (const IsaRow& row : isa_rows())
    for (const S& s : shapes) {
      Workload w = ops::batch_matmul_int8_workload(s.B, s.Bb, s.M, s.N, s.K);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check(s, cfg, row, rng);
    }
}

// Attention's shapes (4 heads of 64, 128 tokens): the VNNI kernel uses vpdpbusd on zmm.
TEST(BatchMatmulInt8, VnniAssembly) {
  const ops::OpTemplate& t = ops::batch_matmul_int8_template();
  Workload w = ops::batch_matmul_int8_workload(4, 4, 128, 128, 64);
  codegen::Target icx =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  Config cfg = t.fallback(w, icx.isa());
  EXPECT_TRUE(t.fits(w, cfg, icx.isa()));
  ops::Kernel k = ops::make_kernel(t, w, cfg);
  std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "bmm8")}, icx);
  EXPECT_NE(as.find("vpdpbusd\t"), std::string::npos);
  EXPECT_NE(as.find("zmm"), std::string::npos);
  EXPECT_EQ(as.find("vpmaddubsw"), std::string::npos);
}

TEST(BatchMatmulInt8, WorkloadErrors) {
  const ops::OpTemplate& t = ops::batch_matmul_int8_template();
  Workload f = ops::batch_matmul_int8_workload(2, 2, 2, 2, 2);
  f.dtype = "float32";
  EXPECT_THROW(t.space(f), std::invalid_argument);
  EXPECT_THROW(t.space(ops::batch_matmul_int8_workload(2, 3, 2, 2, 2)), std::invalid_argument);
  EXPECT_THROW(t.space(ops::batch_matmul_int8_workload(1, 1, 2, 2, 70000)), std::invalid_argument);
  Workload ok = ops::batch_matmul_int8_workload(2, 1, 3, 4, 5);
  EXPECT_EQ(t.input_dtypes(ok), (std::vector<DataType>{DataType::u8(), DataType::i8()}));
  EXPECT_EQ(t.output_dtype(ok), DataType::i32());
  EXPECT_THROW(t.reference(ok, t.fallback(ok, Isa{}), {}, nullptr), std::logic_error);
  EXPECT_EQ(t.flops(ok), 2.0 * 2 * 3 * 4 * 5);
}

}  // namespace
}  // namespace kiln::test
