// AMX tile GEMM (ir::amx_gemm, codegen/amx.h, ops/dense_int8_amx.h):
//  - the 64-byte tile configuration against one computed here from the
//    instruction set's rules, for shapes with and without tails;
//  - the packed weight against the VNNI layout read byte by byte;
//  - the panel kernel's loops with the tiles emulated in memory (every
//    target without AMX), bit-exact against a scalar reference, for sizes
//    with partial row panels, partial column blocks and K tails;
//  - the assembly for Sapphire Rapids: ldtilecfg, tilezero, tileloadd,
//    tdpbusd / tdpbf16ps, tilestored, tilerelease, in that order;
//  - the tile instructions themselves on a host with AMX (skipped elsewhere).
// The permission to use tiles: tests/runtime/amx_runtime_test.cc.
#include "codegen/amx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "codegen/helpers.h"
#include "ir/printer.h"
#include "ops/dense_int8_amx.h"
#include "runtime/amx.h"
#include "runtime/cpu_features.h"

namespace kiln::codegen::test {
namespace {

using detail::AmxPlan;

struct Gemm {
  int64_t M, N, K;
};

// Sizes that exercise every part of the loops: whole and partial panels of 16
// rows, pairs of 16-column blocks, an odd block, a partial last block, 64-byte
// K steps with and without a tail, a K of a single group, parallel tasks of
// two panels (M = 530: 16 tasks of 32 rows and one of 18, a full and a
// partial panel under two configurations).
const std::vector<Gemm> kSizes = {{16, 32, 64},  {1, 1, 4},     {37, 40, 100},
                                  {16, 16, 128}, {33, 48, 192}, {5, 70, 260},
                                  {48, 64, 36},  {17, 15, 68},  {530, 24, 40}};

// ---- tile configuration ------------------------------------------------------

// The configuration written from the rules, independently of amx_plan: tile i
// at colsb bytes 16 + 2i (little endian) and rows byte 48 + i, palette 1.
std::array<uint8_t, 64> expected_config(int rows, int64_t n, int64_t k, int elem) {
  std::array<uint8_t, 64> c{};
  c[0] = 1;
  auto set = [&](int t, int r, int colsb) {
    c[16 + 2 * t] = colsb & 0xff;
    c[17 + 2 * t] = colsb >> 8;
    c[48 + t] = r;
  };
  int64_t row_bytes = k * elem;
  bool two_blocks = n > 16;
  int tail = static_cast<int>(row_bytes % 64);
  set(0, rows, 64);  // C: rows x 16 int32 / float32
  if (two_blocks) set(1, rows, 64);
  if (row_bytes >= 64) {
    set(2, rows, 64);  // A: 64 bytes of each row
    set(3, 16, 64);    // B: 16 groups of 4 bytes x 16 columns
    if (two_blocks) set(4, 16, 64);
  }
  if (tail) {
    set(5, rows, tail);
    set(6, tail / 4, 64);
    if (two_blocks) set(7, tail / 4, 64);
  }
  return c;
}

TEST(AmxTileConfig, BytesFollowTheRules) {
  for (ir::AmxOp op : {ir::AmxOp::DpbusdU8I8, ir::AmxOp::Dpbf16ps}) {
    int elem = op == ir::AmxOp::Dpbf16ps ? 2 : 1;
    for (const Gemm& g : kSizes)
      for (int rows : {16, int(g.M % 16 ? g.M % 16 : 16), 1}) {
        AmxPlan p = detail::amx_plan(op, rows, g.N, g.K, g.K, g.N);
        EXPECT_EQ(detail::amx_tile_config(p), expected_config(rows, g.N, g.K, elem))
            << "rows " << rows << " N " << g.N << " K " << g.K << " elem " << elem;
      }
  }
  // One configuration spelled out: 7 rows, N = 40 (3 blocks), K = 100 bytes
  // (one 64-byte step and a 36-byte tail).
  auto c = detail::amx_tile_config(detail::amx_plan(ir::AmxOp::DpbusdU8I8, 7, 40, 100, 100, 40));
  const uint8_t want_rows[8] = {7, 7, 7, 16, 16, 7, 9, 9};
  const uint16_t want_colsb[8] = {64, 64, 64, 64, 64, 36, 64, 64};
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[1], 0);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(c[48 + t], want_rows[t]) << t;
    EXPECT_EQ(c[16 + 2 * t] | (c[17 + 2 * t] << 8), want_colsb[t]) << t;
  }
}

TEST(AmxTileConfig, RefusesShapesThatDoNotFit) {
  EXPECT_THROW(detail::amx_plan(ir::AmxOp::DpbusdU8I8, 17, 16, 64, 64, 16), std::invalid_argument);
  EXPECT_THROW(detail::amx_plan(ir::AmxOp::DpbusdU8I8, 16, 16, 66, 66, 16), std::invalid_argument);
  EXPECT_THROW(detail::amx_plan(ir::AmxOp::Dpbf16ps, 16, 16, 33, 33, 16), std::invalid_argument);
  EXPECT_THROW(ops::dense_int8_amx_kernel("k", 4, 4, 6), std::invalid_argument);
  Buffer c = make_buffer("C", DataType::f32(), {make_int(4)});
  Buffer a = make_buffer("A", DataType::u8(), {make_int(4)});
  Buffer b = make_buffer("B", DataType::i8(), {make_int(4)});
  // C of the wrong type for tdpbusd.
  EXPECT_THROW(amx_gemm(ir::AmxOp::DpbusdU8I8, load(c, make_int(0)), load(a, make_int(0)),
                        load(b, make_int(0)), 1, 1, 4, 4, 1),
               std::invalid_argument);
}

// The kernel reads as what it is (KILN_DEBUG_LOWER, --dump-kernels): a
// parallel loop over full 16-row panels and one call for the partial panel.
TEST(AmxKernel, PrintsAsPanelCalls) {
  EXPECT_EQ(ops::amx_panels_per_task(37), 1);
  EXPECT_EQ(ops::amx_panels_per_task(530), 2);
  EXPECT_EQ(ops::amx_panels_per_task(1024), 4);
  std::string ir = to_string(ops::dense_int8_amx_kernel("k", 37, 40, 100));
  size_t first = ir.find("amx_gemm("), second = ir.find("amx_gemm(", first + 1);
  ASSERT_NE(first, std::string::npos) << ir;
  ASSERT_NE(second, std::string::npos) << ir;
  EXPECT_EQ(ir.find("amx_gemm(", second + 1), std::string::npos) << ir;
  EXPECT_NE(ir.find("parallel"), std::string::npos) << ir;
}

// ---- packing -----------------------------------------------------------------

// tdpbusd reads B as K/4 rows of 64 bytes: row kg, bytes 4n..4n+3 are
// B[4kg .. 4kg+3][n] of the block's 16 columns; blocks follow each other.
TEST(AmxPacking, Int8WeightIsTheVnniLayout) {
  for (const Gemm& g : kSizes) {
    auto B = random_vector<int8_t>(g.K * g.N, -128, 127, 7);
    auto p = ops::pack_dense_int8_amx_weight(B.data(), g.K, g.N);
    int64_t blocks = (g.N + 15) / 16, rows = g.K / 4;
    ASSERT_EQ(p.size(), size_t(blocks * rows * 64));
    for (int64_t nb = 0; nb < blocks; ++nb)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t byte = 0; byte < 64; ++byte) {
          int64_t n = nb * 16 + byte / 4, k = 4 * r + byte % 4;
          int8_t want = n < g.N ? B[k * g.N + n] : 0;
          ASSERT_EQ(p[(nb * rows + r) * 64 + byte], want)
              << "N " << g.N << " K " << g.K << " block " << nb << " row " << r << " byte " << byte;
        }
  }
}

TEST(AmxPacking, Bf16WeightIsTheVnniLayout) {
  int64_t K = 50, N = 20;
  auto B = random_vector<uint16_t>(K * N, 0, 65535, 8);
  auto p = ops::pack_dense_bf16_amx_weight(B.data(), K, N);
  ASSERT_EQ(p.size(), size_t(2 * (K / 2) * 32));
  for (int64_t nb = 0; nb < 2; ++nb)
    for (int64_t r = 0; r < K / 2; ++r)
      for (int64_t e = 0; e < 32; ++e) {
        int64_t n = nb * 16 + e / 2, k = 2 * r + e % 2;
        ASSERT_EQ(p[(nb * (K / 2) + r) * 32 + e], n < N ? B[k * N + n] : 0);
      }
}

// ---- the kernel --------------------------------------------------------------

std::vector<int32_t> reference_int8(const std::vector<uint8_t>& A, const std::vector<int8_t>& B,
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

void check_int8_kernel(const Target& t, const Gemm& g, uint32_t seed) {
  auto A = random_vector<uint8_t>(g.M * g.K, 0, 255, seed);
  auto B = random_vector<int8_t>(g.K * g.N, -128, 127, seed + 1);
  // Extremes too: 255 x -128 everywhere in the first row / column.
  for (int64_t k = 0; k < g.K; ++k) {
    A[k] = 255;
    B[k * g.N] = -128;
  }
  auto Bp = ops::pack_dense_int8_amx_weight(B.data(), g.K, g.N);
  std::vector<int32_t> C(g.M * g.N, 0x5a5a5a5a);
  Compiled k = jit(ops::dense_int8_amx_kernel("amx_dense", g.M, g.N, g.K), t);
  ASSERT_EQ(k({A.data(), Bp.data(), C.data()}), 0);
  auto want = reference_int8(A, B, g);
  for (size_t i = 0; i < C.size(); ++i)
    ASSERT_EQ(C[i], want[i]) << "M " << g.M << " N " << g.N << " K " << g.K << " at row " << i / g.N
                             << " col " << i % g.N;
}

// The loops and addresses of the AMX kernel, with the tiles emulated (this
// host has no AMX, or the target hides it): bit-exact.
TEST(AmxKernel, EmulatedTilesAreBitExact) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = host();
  std::erase(t.features, "+amx-tile");
  t.features.push_back("-amx-tile");
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::DpbusdU8I8), "emulated");
  uint32_t seed = 1;
  for (const Gemm& g : kSizes) check_int8_kernel(t, g, seed += 2);
}

// bf16: the instruction's order (even product, then odd, each rounded to
// float32), computed here in scalar code on values without denormals.
TEST(AmxKernel, EmulatedBf16IsBitExactInTheInstructionsOrder) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = host();
  std::erase(t.features, "+amx-tile");
  t.features.push_back("-amx-tile");
  for (const Gemm& g : std::vector<Gemm>{{37, 40, 100}, {16, 16, 32}, {3, 33, 2}, {520, 18, 34}}) {
    auto af = random_vector<float>(g.M * g.K, -2, 2, 11);
    auto bf = random_vector<float>(g.K * g.N, -2, 2, 12);
    std::vector<uint16_t> A(af.size()), B(bf.size());
    for (size_t i = 0; i < A.size(); ++i) A[i] = ir::f32_to_bf16_value(af[i]);
    for (size_t i = 0; i < B.size(); ++i) B[i] = ir::f32_to_bf16_value(bf[i]);
    auto Bp = ops::pack_dense_bf16_amx_weight(B.data(), g.K, g.N);
    std::vector<float> C(g.M * g.N, -1.0f);
    Compiled k = jit(ops::dense_bf16_amx_kernel("amx_bf16", g.M, g.N, g.K), t);
    ASSERT_EQ(k({A.data(), Bp.data(), C.data()}), 0);
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t n = 0; n < g.N; ++n) {
        float acc = 0;
        for (int64_t k2 = 0; k2 < g.K; k2 += 2) {
          volatile float p0 =
              ir::bf16_to_f32_value(A[m * g.K + k2]) * ir::bf16_to_f32_value(B[k2 * g.N + n]);
          acc = acc + p0;
          volatile float p1 = ir::bf16_to_f32_value(A[m * g.K + k2 + 1]) *
                              ir::bf16_to_f32_value(B[(k2 + 1) * g.N + n]);
          acc = acc + p1;
        }
        ASSERT_EQ(C[m * g.N + n], acc)
            << "M " << g.M << " N " << g.N << " K " << g.K << " at " << m << "," << n;
      }
  }
}

// The tile instructions themselves: only on a CPU with AMX.
TEST(AmxKernel, TileInstructionsOnThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  ASSERT_EQ(runtime::request_amx_permission(), "");
  ASSERT_EQ(detail::amx_gemm_lowering(host(), ir::AmxOp::DpbusdU8I8), "amx");
  uint32_t seed = 100;
  for (const Gemm& g : kSizes) check_int8_kernel(host(), g, seed += 2);
}

// ---- assembly ----------------------------------------------------------------

// Positions of each mnemonic's first occurrence in order, or npos where missing.
void expect_in_order(const std::string& as, const std::vector<std::string>& names) {
  size_t at = 0;
  for (const std::string& n : names) {
    size_t p = as.find(n, at);
    ASSERT_NE(p, std::string::npos) << n << " missing after offset " << at << " in:\n" << as;
    at = p + n.size();
  }
}

TEST(AmxAssembly, SapphireRapidsUsesTileInstructionsInOrder) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::DpbusdU8I8), "amx");
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::Dpbf16ps), "amx");
  // 37 x 40 x 100: a parallel loop of full panels and a partial one, a block
  // pair and a partial odd block, a K step and a K tail.
  std::string as = emit_assembly({ops::dense_int8_amx_kernel("amx_i8", 37, 40, 100)}, t);
  if (std::getenv("KILN_TEST_PRINT_ASM")) std::cout << as;  // to read the kernel
  expect_in_order(as,
                  {"ldtilecfg", "tilezero", "tileloadd", "tdpbusd", "tilestored", "tilerelease"});
  EXPECT_EQ(as.find("tdpbf16ps"), std::string::npos);
  std::string bf = emit_assembly({ops::dense_bf16_amx_kernel("amx_bf16", 37, 40, 100)}, t);
  expect_in_order(bf,
                  {"ldtilecfg", "tilezero", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"});
  // The package records that its code may use tiles: the runtime asks Linux
  // for the tile-data permission on that (runtime/amx.h).
  auto req = t.required_features();
  for (const char* f : {"amx-tile", "amx-int8", "amx-bf16"})
    EXPECT_NE(std::find(req.begin(), req.end(), f), req.end()) << f;
  // A target without AMX never sees a tile instruction.
  std::string zen = emit_assembly({ops::dense_int8_amx_kernel("amx_i8", 37, 40, 100)},
                                  Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4"));
  for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilerelease"})
    EXPECT_EQ(zen.find(n), std::string::npos) << n;
  EXPECT_NE(zen.find("vpdpbusd"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen::test
