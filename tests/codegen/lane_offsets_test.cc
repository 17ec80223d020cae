// lane_offsets: a vector index as a scalar base plus constant lane offsets,
// and codegen's window load built on it: a permuted read of a block runs as
// one vector load and a shuffle (masked where the lanes span less than the
// window) and reads exactly the gather's values, on random permutations,
// spans and bases up to the buffer's last element.
#include "codegen/lane_offsets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "codegen/helpers.h"
#include "ir/printer.h"

namespace kiln::codegen::test {
namespace {

Expr x16(Expr e) { return broadcast(std::move(e), 16); }

TEST(LaneOffsets, GroupPermutation) {
  Var s("s");
  // x16(s * 16) + floordiv(ramp(0, 1, 16), 4) * 4 + x16(2): lane l reads
  // s * 16 + (l / 4) * 4 + 2; the broadcast constant joins the offsets, so
  // every j of a group shares the base.
  Expr idx = x16(s * 16) + floordiv(ramp(Expr(0), 1, 16), x16(4)) * x16(4) + x16(2);
  auto lo = lane_offsets(idx);
  ASSERT_TRUE(lo);
  EXPECT_TRUE(lo->base.dtype().is_scalar());
  EXPECT_EQ(to_string(lo->base), to_string(s * 16));
  for (int l = 0; l < 16; ++l) EXPECT_EQ(lo->offsets[l], l / 4 * 4 + 2) << l;
  EXPECT_TRUE(is_multiple_of(lo->base, 16));
}

TEST(LaneOffsets, MultiplesByForm) {
  Var s("s"), t("t");
  EXPECT_TRUE(is_multiple_of(s * 32 + max(min(t, 19), 0) * 48, 16));
  EXPECT_TRUE(is_multiple_of(Expr(int64_t{64}) - s * 16, 16));
  EXPECT_FALSE(is_multiple_of(s * 16 + 1, 16));
  EXPECT_FALSE(is_multiple_of(s * 8, 16));
  EXPECT_FALSE(is_multiple_of(s, 16));
}

TEST(LaneOffsets, RampsScalingAndDifferences) {
  Var s("s");
  auto scaled = lane_offsets(ramp(s, 2, 8) * broadcast(3, 8));
  ASSERT_TRUE(scaled);
  for (int l = 0; l < 8; ++l) EXPECT_EQ(scaled->offsets[l], 6 * l) << l;
  auto diff = lane_offsets(ramp(s, 1, 4) - floormod(ramp(Expr(0), 1, 4), broadcast(2, 4)));
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->offsets, (std::vector<int64_t>{0, 0, 2, 2}));
}

TEST(LaneOffsets, VariableOffsetsAreNotDecomposed) {
  Var s("s"), t("t");
  EXPECT_FALSE(lane_offsets(ramp(s, t, 8)));                             // a variable stride
  EXPECT_FALSE(lane_offsets(floordiv(ramp(s, 1, 8), broadcast(4, 8))));  // a variable quotient
  EXPECT_FALSE(lane_offsets(ramp(s, 1, 8) * broadcast(t, 8)));           // a variable scale
  EXPECT_FALSE(lane_offsets(s));                                         // not a vector
}

// out[i * 8 + l] = in[i * 8 + (l / d) * m + c] over random d, m, c: lanes
// that span the whole window (one plain load), less (a masked load), or
// repeat one element (m = 0); the last row's window ends at the buffer's
// last element. Equal to the indices evaluated by hand, with no gather.
TEST(LaneOffsets, WindowLoadsReadTheGathersValues) {
  std::mt19937_64 rng(11);
  const int lanes = 8;
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t d = 1 + static_cast<int64_t>(rng() % 4), m = static_cast<int64_t>(rng() % 3);
    const int64_t c = static_cast<int64_t>(rng() % 5);
    std::vector<int64_t> perm(lanes);
    for (int l = 0; l < lanes; ++l) perm[l] = (l / d) * m + c;
    if (perm.back() >= lanes) continue;  // wider than a window: a gather
    // The buffer ends at the last row's last read (a masked load where the
    // lanes do not span the window), or is made of whole blocks (then the
    // aligned window is loaded whole).
    const bool whole = trial % 2 == 1;
    const int64_t rows = 6, n = whole ? rows * lanes : (rows - 1) * lanes + perm.back() + 1;
    SCOPED_TRACE(whole ? "whole blocks" : "ends at the last read");
    Buffer in = make_buffer("in", DataType::f32(), {n});
    Buffer out = make_buffer("out", DataType::f32(), {rows * lanes});
    Var i("i");
    Expr idx =
        broadcast(i * int64_t{lanes}, lanes) +
        floordiv(ramp(Expr(0), 1, lanes), broadcast(Expr(d), lanes)) * broadcast(Expr(m), lanes) +
        broadcast(Expr(c), lanes);
    ASSERT_TRUE(lane_offsets(idx));
    Stmt body =
        serial(i, 0, rows, make_store(out, load(in, idx), ramp(i * int64_t{lanes}, 1, lanes)));
    LoweredFunc f{"window", {in, out}, body};
    const std::string ir = emit_llvm_ir({f}, host(), /*optimized=*/false);
    EXPECT_EQ(ir.find("masked.gather"), std::string::npos);
    const bool spans = perm.front() == 0 && perm.back() == lanes - 1;
    EXPECT_EQ(ir.find("masked.load") != std::string::npos, !whole && !spans);
    auto k = jit(f);
    std::vector<float> x(n), y(rows * lanes, -1);
    for (int64_t e = 0; e < n; ++e) x[e] = static_cast<float>(e);
    ASSERT_EQ(k({x.data(), y.data()}), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int l = 0; l < lanes; ++l)
        ASSERT_EQ(y[r * lanes + l], static_cast<float>(r * lanes + perm[l]))
            << "row " << r << " lane " << l << " d " << d << " m " << m << " c " << c;
  }
}

}  // namespace
}  // namespace kiln::codegen::test
