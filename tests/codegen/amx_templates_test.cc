// The AMX templates dense_int8_amx.x86 and dense_bf16_amx.x86
// (ops/dense_int8_amx_template.h, ops/dense_bf16_amx_template.h): their own
// loops (OpTemplate::build_loops, through ops::lower_template_kernel, what the
// tuner and the build compile) for every config of its space, on shapes with
// partial row panels, partial column blocks and K tails, with the tiles
// emulated (this host, or a target without AMX), bit-exact against a plain
// integer product of the unpacked weight (bf16: within float32 summation of
// exact bf16 products in double); the assembly for Sapphire Rapids;
// and the tile instructions on a CPU with AMX (skipped elsewhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/amx.h"
#include "codegen/helpers.h"
#include "ir/printer.h"
#include "ops/dense_bf16.h"
#include "ops/dense_bf16_amx_template.h"
#include "ops/dense_int8.h"
#include "ops/dense_int8_amx.h"
#include "ops/dense_int8_amx_template.h"
#include "runtime/amx.h"
#include "runtime/cpu_features.h"

namespace kiln::codegen::test {
namespace {

struct Gemm {
  int64_t M, N, K;
};

// M: one row, under a panel, whole panels, a partial last panel, enough
// panels for tasks of 2..32 panels with a partial last task. N: under a
// block, a block pair, an odd block, a partial block. K: one 4-byte group,
// under, at and over 64 bytes (a tail), several 64-byte steps.
const std::vector<Gemm> kShapes = {{1, 1, 4},      {15, 17, 60},   {16, 16, 64},  {17, 33, 68},
                                   {40, 100, 132}, {130, 47, 200}, {530, 24, 40}, {300, 5, 4},
                                   {64, 48, 256},  {3, 64, 192}};

Target without_amx() {
  Target t = host();
  std::erase(t.features, "+amx-tile");
  t.features.push_back("-amx-tile");
  return t;
}

std::vector<int32_t> plain_product(const std::vector<uint8_t>& A, const std::vector<int8_t>& B,
                                   const Gemm& g) {
  std::vector<int32_t> C(g.M * g.N);
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t n = 0; n < g.N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < g.K; ++k) acc += int64_t(A[m * g.K + k]) * B[k * g.N + n];
      C[m * g.N + n] = static_cast<int32_t>(acc);
    }
  return C;
}

// Every config of the template's space on g, on target t.
void check_every_config(const Target& t, const Gemm& g, uint32_t seed) {
  const ops::OpTemplate& tmpl = ops::dense_int8_amx_template();
  ops::Workload w = ops::dense_int8_amx_workload(g.M, g.N, g.K);
  auto A = random_vector<uint8_t>(g.M * g.K, 0, 255, seed);
  auto B = random_vector<int8_t>(g.K * g.N, -128, 127, seed + 1);
  // The extremes: 255 x -128 over a whole row and column (the largest sum).
  for (int64_t k = 0; k < g.K; ++k) {
    A[k] = 255;
    B[k * g.N] = -128;
  }
  // The build packs with dense_int8.x86's packer at bn = 16 (apply_templates).
  auto Bp = ops::pack_dense_int8_weight(B.data(), g.K, g.N, ops::kAmxBlockCols);
  EXPECT_EQ(Bp, ops::pack_dense_int8_amx_weight(B.data(), g.K, g.N));
  std::vector<int32_t> want = plain_product(A, B, g);
  schedule::ConfigSpace space = tmpl.space(w);
  ASSERT_GE(space.size(), 1);
  for (int64_t i = 0; i < space.size(); ++i) {
    schedule::Config cfg = space.get(i);
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    // Tasks of panels_per_task panels: one amx_gemm per task shape.
    std::string text = to_string(f);
    EXPECT_NE(text.find("amx_gemm("), std::string::npos) << text;
    std::vector<int32_t> C(g.M * g.N, 0x5a5a5a5a);
    Compiled k = jit(f, t);
    ASSERT_EQ(k({A.data(), Bp.data(), C.data()}), 0);
    for (size_t j = 0; j < C.size(); ++j)
      ASSERT_EQ(C[j], want[j]) << "row " << j / g.N << " col " << j % g.N;
    // The template's own reference agrees (the tuner verifies against it).
    std::vector<int32_t> ref(C.size());
    tmpl.reference_typed(w, cfg, {A.data(), Bp.data()}, ref.data());
    ASSERT_EQ(ref, want);
  }
}

TEST(DenseInt8AmxTemplate, EveryConfigEmulatedIsBitExact) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = without_amx();
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::DpbusdU8I8), "emulated");
  uint32_t seed = 3;
  for (const Gemm& g : kShapes) check_every_config(t, g, seed += 2);
}

TEST(DenseInt8AmxTemplate, SpaceAndFallback) {
  const ops::OpTemplate& t = ops::dense_int8_amx_template();
  auto knobs = [&](int64_t M) {
    ops::Workload w = ops::dense_int8_amx_workload(M, 64, 64);
    std::vector<int64_t> v;
    schedule::ConfigSpace s = t.space(w);
    for (int64_t i = 0; i < s.size(); ++i) v.push_back(s.get(i).knob("panels_per_task"));
    return v;
  };
  EXPECT_EQ(knobs(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(knobs(33), (std::vector<int64_t>{1, 2}));  // 3 panels
  EXPECT_EQ(knobs(4096), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  // The fallback: amx_panels_per_task(M) (16 tasks once M has 16 panels),
  // rounded down to a power of two, whatever the ISA row.
  for (int64_t M : {1, 37, 256, 530, 1024, 3000, 4096, 100000}) {
    ops::Workload w = ops::dense_int8_amx_workload(M, 64, 64);
    int64_t p = t.fallback(w, Isa{}).knob("panels_per_task");
    int64_t want = std::min<int64_t>(32, ops::amx_panels_per_task(M));
    EXPECT_LE(p, want) << M;
    EXPECT_GT(2 * p, want) << M;
    EXPECT_EQ(t.fallback(w, Target::parse("llvm -mcpu=sapphirerapids").isa()).to_json(),
              t.fallback(w, Isa{}).to_json());
  }
  // K must be a multiple of 4: the row leaves other K on dense_int8.x86.
  EXPECT_THROW(t.space(ops::dense_int8_amx_workload(4, 4, 6)), std::invalid_argument);
  EXPECT_THROW(t.space(ops::dense_int8_workload(4, 4, 8)), std::invalid_argument);
}

TEST(DenseInt8AmxTemplate, SapphireRapidsAssemblyUsesTiles) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  ASSERT_TRUE(t.isa().amx_int8);
  const ops::OpTemplate& tmpl = ops::dense_int8_amx_template();
  ops::Workload w = ops::dense_int8_amx_workload(530, 40, 100);
  for (const schedule::Config& cfg : {tmpl.fallback(w, t.isa()), tmpl.space(w).get(0)}) {
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    std::string as = emit_assembly({f}, t);
    for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
      EXPECT_NE(as.find(n), std::string::npos) << n << " missing for " << cfg.to_json();
  }
  // Zen 4 (no AMX): no tile instruction, the emulation's vpdpbusd.
  EXPECT_FALSE(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4").isa().amx_int8);
}

// The tile instructions themselves, every config: only on a CPU with AMX.
TEST(DenseInt8AmxTemplate, TileInstructionsOnThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  ASSERT_EQ(runtime::request_amx_permission(), "");
  ASSERT_EQ(detail::amx_gemm_lowering(host(), ir::AmxOp::DpbusdU8I8), "amx");
  uint32_t seed = 50;
  for (const Gemm& g : kShapes) check_every_config(host(), g, seed += 2);
}

// ---- bf16 ----------------------------------------------------------------------

// Every config on g: A float32, B rounded to bf16 and packed by dense_bf16's
// packer at bn = 16 (what apply_templates does), C against the products of
// the bf16 values summed in double (independently of the template's
// reference), within float32 summation's error.
void check_bf16_configs(const Target& t, const Gemm& g, uint32_t seed) {
  const ops::OpTemplate& tmpl = ops::dense_bf16_amx_template();
  ops::Workload w = ops::dense_bf16_amx_workload(g.M, g.N, g.K);
  auto A = random_vector<float>(g.M * g.K, -1, 1, seed);
  auto B = random_vector<float>(g.K * g.N, -1, 1, seed + 1);
  auto Bp = ops::pack_dense_bf16_weight(B.data(), g.K, g.N, ops::kAmxBlockCols);
  auto r = [](float x) { return ir::bf16_to_f32_value(ir::f32_to_bf16_value(x)); };
  std::vector<double> want(g.M * g.N);
  double scale = 1;
  for (int64_t m = 0; m < g.M; ++m)
    for (int64_t n = 0; n < g.N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < g.K; ++k) acc += double(r(A[m * g.K + k])) * r(B[k * g.N + n]);
      want[m * g.N + n] = acc;
      scale = std::max(scale, std::abs(acc));
    }
  schedule::ConfigSpace space = tmpl.space(w);
  for (int64_t i = 0; i < space.size(); ++i) {
    schedule::Config cfg = space.get(i);
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    std::vector<float> C(g.M * g.N, -7.0f);
    Compiled k = jit(f, t);
    ASSERT_EQ(k({A.data(), Bp.data(), C.data()}), 0);
    for (size_t j = 0; j < C.size(); ++j)
      ASSERT_LE(std::abs(C[j] - want[j]), 1e-5 * scale * std::sqrt(double(g.K)))
          << "row " << j / g.N << " col " << j % g.N << ": " << C[j] << " vs " << want[j];
  }
}

// Odd K (a zero pair element), K under and over 32 pairs (a 64-byte tail).
const std::vector<Gemm> kBf16Shapes = {{1, 1, 1},     {15, 17, 13},  {16, 16, 32}, {17, 33, 70},
                                       {40, 100, 99}, {530, 24, 40}, {3, 64, 128}};

TEST(DenseBf16AmxTemplate, EveryConfigEmulatedWithinFloatSummation) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = without_amx();
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::Dpbf16ps), "emulated");
  uint32_t seed = 20;
  for (const Gemm& g : kBf16Shapes) check_bf16_configs(t, g, seed += 2);
}

TEST(DenseBf16AmxTemplate, SapphireRapidsAssemblyUsesTiles) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  ASSERT_TRUE(t.isa().amx_bf16);
  const ops::OpTemplate& tmpl = ops::dense_bf16_amx_template();
  ops::Workload w = ops::dense_bf16_amx_workload(37, 40, 99);
  ir::LoweredFunc f =
      ops::lower_template_kernel(tmpl, w, tmpl.fallback(w, t.isa()), schedule::LowerOptions{});
  std::string as = emit_assembly({f}, t);
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"})
    EXPECT_NE(as.find(n), std::string::npos) << n;
  EXPECT_EQ(as.find("tdpbusd"), std::string::npos);
}

TEST(DenseBf16AmxTemplate, TileInstructionsOnThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-bf16"))
    GTEST_SKIP() << "needs amx-bf16 (this CPU lacks it)";
  ASSERT_EQ(runtime::request_amx_permission(), "");
  uint32_t seed = 60;
  for (const Gemm& g : kBf16Shapes) check_bf16_configs(host(), g, seed += 2);
}

}  // namespace
}  // namespace kiln::codegen::test
