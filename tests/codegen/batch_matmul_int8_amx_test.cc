// The template batch_matmul_int8_amx.x86 (ops/batch_matmul_int8_amx.h): its
// own loops (through ops::lower_template_kernel, what the tuner and the
// build compile) for every config of its space, on batched shapes with
// partial row panels, partial column blocks, K with a 64-byte tail, a right
// operand per batch or broadcast, with the tiles emulated (this host, or a
// target without AMX), bit-exact against a plain integer batched product of
// the unpacked operands; B packed by batch_matmul_int8.x86's packer at
// bn = 16 (the layout the graph's run-time transform writes); the space,
// fallback and refusals; the Sapphire Rapids assembly; and the tile
// instructions on a CPU with AMX (skipped elsewhere).
#include "ops/batch_matmul_int8_amx.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/amx.h"
#include "codegen/helpers.h"
#include "ir/printer.h"
#include "ops/batch_matmul_int8.h"
#include "ops/dense_int8_amx.h"
#include "runtime/amx.h"
#include "runtime/cpu_features.h"

namespace kiln::codegen::test {
namespace {

struct Bmm {
  int64_t B, Bb, M, N, K;
};

// M: one row, under a panel, a panel, a partial last panel, enough panels
// for tasks of 2..8 panels with a partial last task per batch. N: under a
// block, a block, an odd block count, a partial block. K: one group, under,
// at and over 64 bytes (a tail), several steps. Batches 1..5, broadcast B.
const std::vector<Bmm> kShapes = {
    {1, 1, 1, 1, 4},    {3, 3, 15, 17, 60},   {2, 2, 16, 16, 64}, {4, 1, 17, 33, 68},
    {5, 5, 40, 100, 8}, {2, 2, 130, 47, 132}, {3, 1, 7, 64, 200}, {2, 2, 64, 5, 256},
};

Target without_amx() {
  Target t = host();
  std::erase(t.features, "+amx-tile");
  t.features.push_back("-amx-tile");
  return t;
}

// C[b, m, n] = sum_k A[b, m, k] * B[b or 0, k, n] on the unpacked operands.
std::vector<int32_t> plain_product(const std::vector<uint8_t>& A, const std::vector<int8_t>& B,
                                   const Bmm& s) {
  std::vector<int32_t> C(static_cast<size_t>(s.B * s.M * s.N));
  for (int64_t b = 0; b < s.B; ++b) {
    int64_t bb = s.Bb == 1 ? 0 : b;
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < s.K; ++k)
          acc += int64_t(A[(b * s.M + m) * s.K + k]) * B[(bb * s.K + k) * s.N + n];
        C[(b * s.M + m) * s.N + n] = static_cast<int32_t>(acc);
      }
  }
  return C;
}

// Every config of the template's space on s, on target t.
void check_every_config(const Target& t, const Bmm& s, uint32_t seed) {
  const ops::OpTemplate& tmpl = ops::batch_matmul_int8_amx_template();
  ops::Workload w = ops::batch_matmul_int8_amx_workload(s.B, s.Bb, s.M, s.N, s.K);
  auto A = random_vector<uint8_t>(s.B * s.M * s.K, 0, 255, seed);
  auto B = random_vector<int8_t>(s.Bb * s.K * s.N, -128, 127, seed + 1);
  // The extremes: 255 x -128 over a whole row and column (the largest sum).
  for (int64_t k = 0; k < s.K; ++k) {
    A[k] = 255;
    B[k * s.N] = -128;
  }
  auto Bp = ops::pack_batch_matmul_int8(B.data(), s.Bb, s.K, s.N, ops::kAmxBlockCols);
  std::vector<int32_t> want = plain_product(A, B, s);
  schedule::ConfigSpace space = tmpl.space(w);
  ASSERT_GE(space.size(), 1);
  for (int64_t i = 0; i < space.size(); ++i) {
    schedule::Config cfg = space.get(i);
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    ASSERT_EQ(tmpl.input_shapes(w, cfg).at(1),
              (std::vector<int64_t>{s.Bb, (s.N + 15) / 16, s.K / 4, 16, 4}));
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    std::string text = to_string(f);
    EXPECT_NE(text.find("amx_gemm("), std::string::npos) << text;
    std::vector<int32_t> C(want.size(), 0x5a5a5a5a);
    Compiled k = jit(f, t);
    ASSERT_EQ(k({A.data(), Bp.data(), C.data()}), 0);
    for (size_t j = 0; j < C.size(); ++j)
      ASSERT_EQ(C[j], want[j]) << "batch " << j / (s.M * s.N) << " row " << (j / s.N) % s.M
                               << " col " << j % s.N;
    // The template's own reference agrees (the tuner verifies against it).
    std::vector<int32_t> ref(C.size());
    tmpl.reference_typed(w, cfg, {A.data(), Bp.data()}, ref.data());
    ASSERT_EQ(ref, want);
  }
}

TEST(BatchMatmulInt8AmxTemplate, EveryConfigEmulatedIsBitExact) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = without_amx();
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::DpbusdU8I8), "emulated");
  uint32_t seed = 7;
  for (const Bmm& s : kShapes) check_every_config(t, s, seed += 2);
}

TEST(BatchMatmulInt8AmxTemplate, SpaceFallbackAndRefusals) {
  const ops::OpTemplate& t = ops::batch_matmul_int8_amx_template();
  auto knobs = [&](int64_t M) {
    ops::Workload w = ops::batch_matmul_int8_amx_workload(2, 2, M, 64, 64);
    std::vector<int64_t> v;
    schedule::ConfigSpace s = t.space(w);
    for (int64_t i = 0; i < s.size(); ++i) v.push_back(s.get(i).knob("panels_per_task"));
    return v;
  };
  EXPECT_EQ(knobs(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(knobs(33), (std::vector<int64_t>{1, 2}));  // 3 panels
  EXPECT_EQ(knobs(4096), (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  // The fallback: the most panels per task that leave 16 tasks over all
  // batches; 1 when the batches times the panels are fewer.
  auto fb = [&](int64_t B, int64_t M) {
    return t.fallback(ops::batch_matmul_int8_amx_workload(B, B, M, 64, 64), Isa{})
        .knob("panels_per_task");
  };
  EXPECT_EQ(fb(1, 1), 1);
  EXPECT_EQ(fb(12, 128), 4);   // 8 panels: 12 x 2 tasks
  EXPECT_EQ(fb(1, 4096), 16);  // 256 panels: 16 tasks, as dense's fallback
  EXPECT_EQ(fb(64, 128), 8);   // one task per batch
  EXPECT_EQ(fb(2, 100), 1);
  ops::Workload w = ops::batch_matmul_int8_amx_workload(12, 12, 128, 64, 64);
  EXPECT_EQ(t.fallback(w, Target::parse("llvm -mcpu=sapphirerapids").isa()).to_json(),
            t.fallback(w, Isa{}).to_json());
  // K % 4 != 0 (the row leaves it on batch_matmul_int8.x86), a batch of b
  // neither 1 nor a's, another template's workload.
  EXPECT_THROW(t.space(ops::batch_matmul_int8_amx_workload(2, 2, 4, 4, 6)), std::invalid_argument);
  EXPECT_THROW(t.space(ops::batch_matmul_int8_amx_workload(3, 2, 4, 4, 8)), std::invalid_argument);
  EXPECT_THROW(t.space(ops::batch_matmul_int8_workload(2, 2, 4, 4, 8)), std::invalid_argument);
  EXPECT_FALSE(ops::batch_matmul_int8_amx_supports(2, 2, 4, 4, 65796));
  EXPECT_TRUE(ops::batch_matmul_int8_amx_supports(2, 1, 4, 4, 65792));
}

TEST(BatchMatmulInt8AmxTemplate, SapphireRapidsAssemblyUsesTiles) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  ASSERT_TRUE(t.isa().amx_int8);
  const ops::OpTemplate& tmpl = ops::batch_matmul_int8_amx_template();
  ops::Workload w = ops::batch_matmul_int8_amx_workload(4, 4, 37, 40, 100);
  for (const schedule::Config& cfg : {tmpl.fallback(w, t.isa()), tmpl.space(w).get(1)}) {
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    std::string as = emit_assembly({f}, t);
    for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
      EXPECT_NE(as.find(n), std::string::npos) << n << " missing for " << cfg.to_json();
  }
}

// The tile instructions themselves, every config: only on a CPU with AMX.
TEST(BatchMatmulInt8AmxTemplate, TileInstructionsOnThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  ASSERT_EQ(runtime::request_amx_permission(), "");
  ASSERT_EQ(detail::amx_gemm_lowering(host(), ir::AmxOp::DpbusdU8I8), "amx");
  uint32_t seed = 70;
  for (const Bmm& s : kShapes) check_every_config(host(), s, seed += 2);
}

}  // namespace
}  // namespace kiln::codegen::test
