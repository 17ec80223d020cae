// group_conv2d_NCHWc.x86 compiled and run through the JIT against a plain
// NCHW grouped convolution (ops::reference::conv2d_nchw_grouped, which does
// not share the template's layouts or its reference): groups 2/4/8/32,
// 1, 3, 4, 8 and 16 channels per group, strides 1 and 2, symmetric and
// asymmetric pads, dilation, 1x1 and 3x3 kernels, widths the ow tile does not
// divide, a channel multiplier; the fallbacks of the AVX-512 and AVX2 rows and
// random points of the space. And the weight packer against the layout
// written out, and the fallback's blocks across ISA rows.
#include "ops/group_conv2d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/target.h"
#include "harness.h"
#include "ops/conv2d.h"
#include "ops/op_template.h"
#include "ops/reference.h"

namespace kiln::test {
namespace {

using ops::Conv2DAttrs;
using ops::Workload;
using schedule::Config;

const ops::OpTemplate& tmpl() { return ops::get_template("group_conv2d_NCHWc.x86"); }

Isa isa_of(const std::string& target) { return codegen::Target::parse(target).isa(); }

struct Shape {
  int64_t n, groups, icg, ocg, h, w, k, stride;
  std::vector<int64_t> pads;  // top, left, bottom, right
  int64_t dilation = 1;
};

Workload workload(const Shape& s) {
  return Workload{"group_conv2d_NCHWc.x86",
                  {{"data", {s.n, s.groups * s.icg, s.h, s.w}},
                   {"kernel", {s.groups * s.ocg, s.icg, s.k, s.k}},
                   {"strides", {s.stride, s.stride}},
                   {"pads", s.pads},
                   {"dilation", {s.dilation, s.dilation}}}};
}

// Compiles the template for cfg, runs it on random NCHW data and OIHW weights
// laid out by the template's packers, and compares its output, back in NCHW,
// with the plain grouped convolution.
void expect_matches_plain(const Workload& w, const Config& cfg, std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  const ops::OpTemplate& t = tmpl();
  Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kGrouped);
  auto in_shapes = t.input_shapes(w, cfg);
  auto out_shape = t.output_shape(w, cfg);
  int64_t icb = in_shapes[0].back(), ocb = out_shape.back();
  int64_t icg = a.in_channels / a.groups;
  auto data = random_floats(a.batch * a.in_channels * a.height * a.width, rng);
  auto weight = random_floats(a.out_channels * icg * a.kernel_h * a.kernel_w, rng);
  auto data_c = ops::nchw_to_nchwc(data.data(), a.batch, a.in_channels, a.height, a.width, icb);
  auto weight_p = ops::group_conv2d_pack_weight(weight.data(), a.groups, a.out_channels, icg,
                                                a.kernel_h, a.kernel_w, icb, ocb);

  ops::Kernel k = ops::make_kernel(t, w, cfg);
  ir::LoweredFunc f = schedule::lower(k.sch, k.args, "gconv");
  auto mod = codegen::jit_compile({f}, host_target());
  std::vector<float> out(a.batch * a.out_channels * a.out_height() * a.out_width(), NAN);
  std::vector<void*> args = {data_c.data(), weight_p.data(), out.data()};
  ASSERT_EQ(mod->get_function("gconv")(args.data()), 0);
  auto got =
      ops::nchwc_to_nchw(out.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), ocb);

  std::vector<float> expected(got.size());
  ops::reference::conv2d_nchw_grouped(data.data(), weight.data(), expected.data(), a);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), expected.size()), 1e-5);

  // The template's own reference (its layouts, double accumulation) agrees too.
  std::vector<float> ref(out.size(), NAN);
  t.reference(w, cfg, {data_c.data(), weight_p.data()}, ref.data());
  auto ref_nchw =
      ops::nchwc_to_nchw(ref.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), ocb);
  EXPECT_LE(ops::reference::max_relative_error(ref_nchw.data(), expected.data(), expected.size()),
            1e-6);
}

TEST(GroupConv2d, MatchesPlainGroupedConvOverShapesAndConfigs) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const std::vector<Shape> shapes = {
      // ResNeXt-50 32x4d's first grouped 3x3 (4 channels per group), narrowed.
      {1, 32, 4, 4, 6, 13, 3, 1, {1, 1, 1, 1}},
      // Its stride-2 transition (8 per group), width 15 -> 8 outputs.
      {1, 32, 8, 8, 7, 15, 3, 2, {1, 1, 1, 1}},
      // 16 per group, 2 groups, 1x1.
      {1, 2, 16, 16, 5, 11, 1, 1, {0, 0, 0, 0}},
      // 3 per group, 4 groups, asymmetric pads, batch 2.
      {2, 4, 3, 3, 7, 9, 3, 1, {0, 1, 2, 1}},
      // 1 per group with a channel multiplier of 3 (not depthwise).
      {1, 8, 1, 3, 6, 10, 3, 2, {1, 1, 1, 1}},
      // 8 in, 16 out per group, 8 groups, a prime width of 17.
      {1, 8, 8, 16, 3, 17, 3, 1, {1, 1, 1, 1}},
      // 4 in, 8 out per group, dilation 2.
      {1, 4, 4, 8, 9, 9, 3, 1, {2, 2, 2, 2}, 2},
      // 16 per group, 4 groups, stride 2, 1x1 (RegNet's shortcut-like shape).
      {1, 4, 16, 16, 6, 13, 1, 2, {0, 0, 0, 0}},
  };
  std::mt19937_64 rng(2024);
  for (const Shape& s : shapes) {
    Workload w = workload(s);
    auto space = tmpl().space(w);
    std::vector<Config> configs = {tmpl().fallback(w, avx512), tmpl().fallback(w, avx2)};
    for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(space.random(rng));
    for (const Config& cfg : configs) expect_matches_plain(w, cfg, rng);
  }
}

// A register tile of 2 oc blocks x 2 rows, 4 wide over OW = 10 (partial last
// tile), kernel window outermost: every knob away from the fallback at once.
TEST(GroupConv2d, RegisterTileKnobs) {
  Workload w = workload({1, 4, 8, 16, 6, 10, 3, 1, {1, 1, 1, 1}});
  auto cfg = ops::detail::config_from_knobs(tmpl().space(w),
                                            R"("tile_ic": [2, 4], "tile_oc": [4, 4], )"
                                            R"("tile_ow": [3, 4], "unroll_kw": 0, "oc_reg": 2, )"
                                            R"("oh_reg": 2, "kernel_outer": 1)");
  std::mt19937_64 rng(5);
  expect_matches_plain(w, cfg, rng);
}

TEST(GroupConv2d, PackedWeightIsTheGroupedLayout) {
  std::mt19937_64 rng(3);
  int64_t G = 4, ocg = 8, icg = 6, kh = 3, kw = 2, icb = 3, ocb = 4;
  auto w = random_floats(G * ocg * icg * kh * kw, rng);
  auto p = ops::group_conv2d_pack_weight(w.data(), G, G * ocg, icg, kh, kw, icb, ocb);
  ASSERT_EQ(p.size(), w.size());
  // [G, OCg/ocb, ICg/icb, KH, KW, icb, ocb]
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < ocg; ++o)
      for (int64_t i = 0; i < icg; ++i)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x) {
            int64_t at =
                (((((g * (ocg / ocb) + o / ocb) * (icg / icb) + i / icb) * kh + y) * kw + x) * icb +
                 i % icb) *
                    ocb +
                o % ocb;
            ASSERT_EQ(p[at], w[(((g * ocg + o) * icg + i) * kh + y) * kw + x]);
          }
  EXPECT_THROW(ops::group_conv2d_pack_weight(w.data(), G, G * ocg, icg, kh, kw, 4, ocb),
               std::invalid_argument);
  EXPECT_THROW(ops::group_conv2d_pack_weight(w.data(), G, G * ocg, icg, kh, kw, icb, 16),
               std::invalid_argument);
}

// Blocks come from the channels per group on every ISA row (so layouts and
// records agree across targets); register tiles follow the row; every
// fallback is a point of the space; workloads that are not grouped are refused.
TEST(GroupConv2d, FallbackBlocksAndErrors) {
  Workload w = workload({1, 32, 8, 8, 56, 56, 3, 1, {1, 1, 1, 1}});
  const auto& t = tmpl();
  auto blocks = ops::fallback_layout_blocks(t, w);
  EXPECT_EQ(blocks, (std::pair<int64_t, int64_t>{8, 8}));
  for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                             "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",
                             "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"}) {
    Config f = t.fallback(w, isa_of(target));
    EXPECT_EQ(ops::layout_blocks(t, w, f), blocks) << target;
    EXPECT_EQ(Config::from_json(t.space(w), f.to_json()), f) << target;
  }
  // 8 channels: one zmm (24 accumulators: 14 of 56) or one ymm (12: 8 of 56) per column.
  EXPECT_EQ(t.fallback(w, isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512"))
                .split("tile_ow")
                .back(),
            14);
  EXPECT_EQ(
      t.fallback(w, isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell")).split("tile_ow").back(),
      8);
  EXPECT_DOUBLE_EQ(t.flops(w), 2.0 * 256 * 56 * 56 * 8 * 9);
  // The window outermost on AVX2 where a group reduces over two channel
  // blocks or more (ResNeXt-50's 32-channel groups), not with one block nor
  // on AVX-512.
  Workload wide = workload({1, 32, 32, 32, 7, 7, 3, 1, {1, 1, 1, 1}});
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  EXPECT_EQ(t.fallback(wide, avx2).knob("kernel_outer"), 1);
  EXPECT_EQ(t.fallback(wide, avx512).knob("kernel_outer"), 0);
  EXPECT_EQ(t.fallback(w, avx2).knob("kernel_outer"), 0);  // 8 channels: one block
  std::mt19937_64 rng(7);
  expect_matches_plain(workload({1, 4, 32, 32, 5, 7, 3, 1, {1, 1, 1, 1}}),
                       t.fallback(workload({1, 4, 32, 32, 5, 7, 3, 1, {1, 1, 1, 1}}), avx2), rng);
  auto expect_error = [&](const Workload& bad, const std::string& text) {
    try {
      t.space(bad);
      ADD_FAILURE() << "no error for " << bad.key();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Workload dense = workload({1, 1, 8, 8, 5, 5, 3, 1, {0, 0, 0, 0}});
  expect_error(dense, "groups G = C / kernel[1] > 1");
  Workload odd_oc = workload({1, 4, 2, 3, 5, 5, 3, 1, {0, 0, 0, 0}});
  odd_oc.params[1].second[0] = 10;  // 10 output channels over 4 groups
  expect_error(odd_oc, "dividing C and OC");
  Workload other = workload({1, 4, 2, 2, 5, 5, 3, 1, {0, 0, 0, 0}});
  other.template_name = "conv2d_NCHWc.x86";
  try {
    t.output_shape(other, t.fallback(workload({1, 4, 2, 2, 5, 5, 3, 1, {0, 0, 0, 0}}), Isa{}));
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not a group_conv2d_NCHWc.x86"), std::string::npos);
  }
}

// Where FMAs wait on loads (Intel AVX-512 server cores), the fallback's tile
// spans the group's output blocks (up to 4) and each task pads the rows it
// reads (pad_rows); elsewhere one block, with padded rows only where the
// group is one block (a wider group's blocks would each pad its rows again).
// A tile of some of a group's blocks with padded rows does not fit (bound
// inference pads the whole input per task), and every such fallback, at
// widths its columns do not divide, strides 1 and 2 and asymmetric pads,
// matches the plain grouped convolution, as does a padded-rows tile of 2 rows.
TEST(GroupConv2d, TilesSpanTheGroupAndPadTheirRowsWhereFmasWaitOnLoads) {
  const auto& t = tmpl();
  const Isa spr = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  const Isa zen4 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  ASSERT_TRUE(spr.fma_waits_on_loads);
  ASSERT_FALSE(zen4.fma_waits_on_loads);
  struct Expect {
    Shape shape;
    int64_t spr_oc_reg, spr_columns, spr_pad_rows, zen4_pad_rows;
  };
  const std::vector<Expect> cases = {
      // 64 channels a group (4 blocks of 16) on a 7-wide row: 4 x 7, the row whole.
      {{1, 2, 64, 64, 7, 7, 3, 1, {1, 1, 1, 1}}, 4, 7, 1, 0},
      // 32 a group on 14 columns: 2 blocks x 7 (24 accumulators: 12 columns).
      {{1, 2, 32, 32, 14, 14, 3, 1, {1, 1, 1, 1}}, 2, 7, 1, 0},
      // Stride 2 onto 13 columns: 2 x 7, the second tile of 6.
      {{1, 2, 32, 32, 6, 26, 3, 2, {1, 1, 1, 1}}, 2, 7, 1, 0},
      // 16 a group: one block on both, padded rows on both.
      {{1, 4, 16, 16, 9, 28, 3, 2, {1, 1, 1, 1}}, 1, 14, 1, 1},
      // Asymmetric pads, 32 a group on 11 columns: 2 x 11 (within 24 accumulators).
      {{1, 2, 32, 32, 5, 10, 3, 1, {0, 1, 2, 2}}, 2, 11, 1, 0},
      // 32 a group on 20 columns: 2 x 10 in two tiles.
      {{1, 2, 32, 32, 4, 20, 3, 1, {1, 1, 1, 1}}, 2, 10, 1, 0},
  };
  std::mt19937_64 rng(11);
  for (const Expect& e : cases) {
    Workload w = workload(e.shape);
    SCOPED_TRACE(w.key());
    Config f = t.fallback(w, spr);
    EXPECT_EQ(f.knob("oc_reg"), e.spr_oc_reg);
    EXPECT_EQ(f.split("tile_ow").back(), e.spr_columns);
    EXPECT_EQ(f.knob("pad_rows"), e.spr_pad_rows);
    EXPECT_TRUE(t.fits(w, f, spr));
    Config z = t.fallback(w, zen4);
    EXPECT_EQ(z.knob("oc_reg"), 1);
    EXPECT_EQ(z.knob("pad_rows"), e.zen4_pad_rows);
    expect_matches_plain(w, f, rng);
  }
  // 4 blocks a group: a tile of 2 with padded rows does not fit, without them it does.
  Workload w = workload({1, 2, 64, 64, 7, 7, 3, 1, {1, 1, 1, 1}});
  const std::string tile = R"("tile_ic": [4, 16], "tile_oc": [4, 16], "tile_ow": [1, 7], )"
                           R"("unroll_kw": 1, "oc_reg": 2, "oh_reg": 1, "kernel_outer": 0, )"
                           R"("rolled_reduction": 0, "pad_rows": )";
  EXPECT_FALSE(t.fits(w, ops::detail::config_from_knobs(t.space(w), tile + "1"), spr));
  EXPECT_TRUE(t.fits(w, ops::detail::config_from_knobs(t.space(w), tile + "0"), spr));
  // Padded rows under a tile of 2 rows (oh_reg) and one block of a one-block group.
  Workload rows = workload({1, 3, 16, 16, 8, 9, 3, 1, {1, 1, 1, 1}});
  expect_matches_plain(
      rows,
      ops::detail::config_from_knobs(
          t.space(rows), R"("tile_ic": [1, 16], "tile_oc": [1, 16], "tile_ow": [3, 3], )"
                         R"("unroll_kw": 0, "oc_reg": 1, "oh_reg": 2, "kernel_outer": 1, )"
                         R"("rolled_reduction": 1, "pad_rows": 1)"),
      rng);
}

}  // namespace
}  // namespace kiln::test
