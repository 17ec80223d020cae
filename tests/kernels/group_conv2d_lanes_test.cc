// group_conv2d_lanes_NCHWc.x86 compiled and run through the JIT against the
// plain NCHW grouped convolution (ops::reference::conv2d_nchw_grouped):
// groups of 2, 4 and 8 channels, blocks of 2 to 8 groups, strides 1 and 2,
// asymmetric pads, dilation, 1x1, 3x3 and 5x3 kernels, widths the ow tile does
// not divide, batch 2; the fallbacks of the AVX-512, AVX2 and NEON rows and
// random points of the space. The compiled kernel reads each permuted block
// with a vector load and a shuffle, never a gather (codegen's window load),
// on AVX-512, AVX2 and NEON code. And the weight packer, the rule of which
// convolutions the template takes, and its errors.
#include "ops/group_conv2d_lanes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/codegen.h"
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

const ops::OpTemplate& tmpl() { return ops::get_template("group_conv2d_lanes_NCHWc.x86"); }

Isa isa_of(const std::string& target) { return codegen::Target::parse(target).isa(); }

struct Shape {
  int64_t n, groups, cg, h, w, kh, kw, stride;
  std::vector<int64_t> pads;  // top, left, bottom, right
  int64_t dilation = 1;
};

Workload workload(const Shape& s) {
  return Workload{"group_conv2d_lanes_NCHWc.x86",
                  {{"data", {s.n, s.groups * s.cg, s.h, s.w}},
                   {"kernel", {s.groups * s.cg, s.cg, s.kh, s.kw}},
                   {"strides", {s.stride, s.stride}},
                   {"pads", s.pads},
                   {"dilation", {s.dilation, s.dilation}}}};
}

ir::LoweredFunc lowered(const Workload& w, const Config& cfg) {
  ops::Kernel k = ops::make_kernel(tmpl(), w, cfg);
  return schedule::lower(k.sch, k.args, "gconv_lanes");
}

void expect_matches_plain(const Workload& w, const Config& cfg, std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kGrouped);
  const int64_t cb = tmpl().output_shape(w, cfg).back(), cg = a.in_channels / a.groups;
  auto data = random_floats(a.batch * a.in_channels * a.height * a.width, rng);
  auto weight = random_floats(a.out_channels * cg * a.kernel_h * a.kernel_w, rng);
  auto data_c = ops::nchw_to_nchwc(data.data(), a.batch, a.in_channels, a.height, a.width, cb);
  auto weight_p = ops::group_conv2d_lanes_pack_weight(weight.data(), a.in_channels, cg, a.kernel_h,
                                                      a.kernel_w, cb);
  auto mod = codegen::jit_compile({lowered(w, cfg)}, host_target());
  std::vector<float> out(a.batch * a.out_channels * a.out_height() * a.out_width(), NAN);
  std::vector<void*> args = {data_c.data(), weight_p.data(), out.data()};
  ASSERT_EQ(mod->get_function("gconv_lanes")(args.data()), 0);
  auto got =
      ops::nchwc_to_nchw(out.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), cb);
  std::vector<float> expected(got.size());
  ops::reference::conv2d_nchw_grouped(data.data(), weight.data(), expected.data(), a);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), expected.size()), 1e-5);

  std::vector<float> ref(out.size(), NAN);
  tmpl().reference(w, cfg, {data_c.data(), weight_p.data()}, ref.data());
  auto ref_nchw =
      ops::nchwc_to_nchw(ref.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), cb);
  EXPECT_LE(ops::reference::max_relative_error(ref_nchw.data(), expected.data(), expected.size()),
            1e-6);
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      // ResNeXt-50 32x4d's first grouped 3x3 (4 channels per group), narrowed.
      {1, 32, 4, 6, 13, 3, 3, 1, {1, 1, 1, 1}},
      // Its stride-2 transition (8 per group), width 15 -> 8 outputs.
      {1, 16, 8, 7, 15, 3, 3, 2, {1, 1, 1, 1}},
      // 2 per group, batch 2, asymmetric pads, a 5x3 window.
      {2, 8, 2, 7, 9, 5, 3, 1, {2, 0, 1, 2}},
      // 4 per group, dilation 2, a prime width.
      {1, 8, 4, 9, 17, 3, 3, 1, {2, 2, 2, 2}, 2},
      // 8 per group (RegNet's width), 1x1 stride 2.
      {1, 4, 8, 6, 13, 1, 1, 2, {0, 0, 0, 0}},
      // 4 per group over 24 channels: blocks of 8, 12 or 24 (none of 16).
      {1, 6, 4, 5, 7, 3, 3, 1, {1, 1, 1, 1}},
  };
  return s;
}

TEST(GroupConv2dLanes, MatchesPlainGroupedConvOverShapesAndConfigs) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  std::mt19937_64 rng(77);
  for (const Shape& s : shapes()) {
    Workload w = workload(s);
    auto space = tmpl().space(w);
    std::vector<Config> configs = {tmpl().fallback(w, avx512), tmpl().fallback(w, avx2)};
    for (int i = 0; i < configs_per_shape(3); ++i) configs.push_back(space.random(rng));
    for (const Config& cfg : configs) expect_matches_plain(w, cfg, rng);
  }
}

// The two schedule knobs beyond the tile (kw_inner: the window's columns
// innermost; pad_copy: a padded copy read without selects) in all four
// combinations, each shape with its fallback's tile, and the fallback rule:
// AVX-512 takes kw_inner alone, AVX2 both where the taps share columns and
// each input element feeds 32 or more multiplies, and a stride-2 window
// neither.
TEST(GroupConv2dLanes, WindowOrderAndPaddedCopyMatchPlainGroupedConv) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  // ResNeXt-50's 3x3 groups of 8 on 28x28.
  Workload resnext = workload({1, 32, 8, 28, 28, 3, 3, 1, {1, 1, 1, 1}});
  EXPECT_EQ(tmpl().fallback(resnext, avx512).knob("kw_inner"), 1);
  EXPECT_EQ(tmpl().fallback(resnext, avx512).knob("pad_copy"), 0);
  EXPECT_EQ(tmpl().fallback(resnext, avx2).knob("kw_inner"), 1);
  EXPECT_EQ(tmpl().fallback(resnext, avx2).knob("pad_copy"), 1);
  // Its stride-2 transition: 3 x 3 x 8 / 4 = 18 multiplies per element.
  Workload strided = workload({1, 32, 8, 56, 56, 3, 3, 2, {1, 1, 1, 1}});
  EXPECT_EQ(tmpl().fallback(strided, avx2).knob("kw_inner"), 0);
  EXPECT_EQ(tmpl().fallback(strided, avx2).knob("pad_copy"), 0);
  // Its column tile: 4 on both, where AVX-512's accumulators alone would
  // allow 14 and its taps' permuted inputs and weights then spilled.
  EXPECT_EQ(tmpl().fallback(strided, avx512).split("tile_ow").back(), 4);
  EXPECT_EQ(tmpl().fallback(strided, avx2).split("tile_ow").back(), 4);
  EXPECT_EQ(tmpl().fallback(resnext, avx512).split("tile_ow").back(), 14);
  // A record from before the knobs means neither.
  Config old = Config::from_json(tmpl().space(resnext),
                                 R"({"knobs": {"block": 16, "tile_ow": [7, 4], "unroll_kw": 1}})");
  EXPECT_EQ(old.knob("kw_inner"), 0);
  EXPECT_EQ(old.knob("pad_copy"), 0);

  std::mt19937_64 rng(79);
  for (const Shape& s : shapes()) {
    Workload w = workload(s);
    auto space = tmpl().space(w);
    for (const Isa& isa : {avx512, avx2}) {
      Config f = tmpl().fallback(w, isa);
      for (int64_t kw_inner : {0, 1})
        for (int64_t pad_copy : {0, 1}) {
          Config c = f;
          if (f.has_knob("kw_inner")) c = with_knob(space, c, "kw_inner", kw_inner);
          if (f.has_knob("pad_copy")) c = with_knob(space, c, "pad_copy", pad_copy);
          expect_matches_plain(w, c, rng);
        }
    }
  }
}

// Every block of the space holds whole groups, two or more, and divides C.
TEST(GroupConv2dLanes, BlocksAreWholeGroups) {
  for (const Shape& s : shapes()) {
    Workload w = workload(s);
    auto space = tmpl().space(w);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 20; ++i) {
      int64_t cb = tmpl().output_shape(w, space.random(rng)).back();
      EXPECT_EQ(cb % s.cg, 0) << w.key();
      EXPECT_GE(cb, 2 * s.cg) << w.key();
      EXPECT_EQ(s.groups * s.cg % cb, 0) << w.key();
    }
  }
}

// The permuted reads are a vector load and a shuffle on every ISA row, not a
// gather (which would be one scalar load per lane).
TEST(GroupConv2dLanes, PermutedReadsAreLoadsAndShufflesNotGathers) {
  Workload w = workload({1, 32, 4, 6, 13, 3, 3, 1, {1, 1, 1, 1}});
  for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                             "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",
                             "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1"}) {
    SCOPED_TRACE(target);
    codegen::Target t = codegen::Target::parse(target);
    Config cfg = tmpl().fallback(w, t.isa());
    std::string ir = codegen::emit_llvm_ir({lowered(w, cfg)}, t, /*optimized=*/false);
    EXPECT_EQ(ir.find("masked.gather"), std::string::npos);
    EXPECT_NE(ir.find("shufflevector"), std::string::npos);
  }
}

TEST(GroupConv2dLanes, PackedWeightLayout) {
  std::mt19937_64 rng(5);
  const int64_t C = 24, cg = 4, kh = 3, kw = 2, cb = 8;
  auto w = random_floats(C * cg * kh * kw, rng);
  auto p = ops::group_conv2d_lanes_pack_weight(w.data(), C, cg, kh, kw, cb);
  ASSERT_EQ(p.size(), w.size());
  // [C/cb, Cg, KH, KW, cb]
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < cg; ++j)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          ASSERT_EQ(p[((((c / cb) * cg + j) * kh + y) * kw + x) * cb + c % cb],
                    w[((c * cg + j) * kh + y) * kw + x]);
  EXPECT_THROW(ops::group_conv2d_lanes_pack_weight(w.data(), C, cg, kh, kw, 6),
               std::invalid_argument);
  EXPECT_THROW(ops::group_conv2d_lanes_pack_weight(w.data(), C, cg, kh, kw, 16),
               std::invalid_argument);
}

TEST(GroupConv2dLanes, AppliesToGroupsNarrowerThanTheBlock) {
  auto attrs = [](int64_t c, int64_t oc, int64_t groups) {
    Conv2DAttrs a{1, c, 8, 8, oc, 3, 3};
    a.groups = groups;
    return a;
  };
  EXPECT_TRUE(ops::group_conv2d_lanes_applies(attrs(128, 128, 32)));   // 4 per group
  EXPECT_TRUE(ops::group_conv2d_lanes_applies(attrs(256, 256, 32)));   // 8 per group
  EXPECT_FALSE(ops::group_conv2d_lanes_applies(attrs(512, 512, 32)));  // 16: one group a block
  EXPECT_FALSE(ops::group_conv2d_lanes_applies(attrs(64, 64, 64)));    // depthwise
  EXPECT_FALSE(ops::group_conv2d_lanes_applies(attrs(32, 64, 8)));     // 4 in, 8 out per group
  EXPECT_FALSE(ops::group_conv2d_lanes_applies(attrs(24, 24, 3)));     // 8 per group, block 8
}

TEST(GroupConv2dLanes, RejectsUnequalGroupWidthsAndBadBlocks) {
  Workload unequal{"group_conv2d_lanes_NCHWc.x86",
                   {{"data", {1, 32, 5, 5}},
                    {"kernel", {64, 4, 3, 3}},
                    {"strides", {1, 1}},
                    {"pads", {1, 1, 1, 1}},
                    {"dilation", {1, 1}}}};
  EXPECT_THROW(tmpl().space(unequal), std::exception);
  Workload w = workload({1, 8, 4, 5, 5, 3, 3, 1, {1, 1, 1, 1}});
  Config cfg = ops::detail::config_from_knobs(tmpl().space(w),
                                              R"("block": 8, "tile_ow": [1, 5], "unroll_kw": 1)");
  EXPECT_EQ(tmpl().output_shape(w, cfg).back(), 8);
}

}  // namespace
}  // namespace kiln::test
