// conv2d_winograd_NCHWc.x86 compiled and run through the JIT against the plain
// NCHW convolution (ops::reference::conv2d_nchw_grouped, which shares neither
// the layouts nor the algorithm), with the weight transformed by
// winograd_pack_weight: F(2x2) and F(4x4), output sizes the tile does not
// divide (a partial last tile row and column), asymmetric pads, batch 2,
// channels that are not multiples of the lanes, GEMM row tiles that do not
// divide the tile count; the AVX-512 and AVX2 fallbacks and random points of
// the space. The template's own reference (the algorithm in double from a
// given transformed weight, what the tuner verifies with) agrees too.
#include "ops/winograd_conv2d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "codegen/codegen.h"
#include "codegen/target.h"
#include "harness.h"
#include "ops/conv2d.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using ops::Conv2DAttrs;
using ops::Workload;
using schedule::Config;

const ops::OpTemplate& tmpl() { return ops::get_template("conv2d_winograd_NCHWc.x86"); }

Isa isa_of(const std::string& target) { return codegen::Target::parse(target).isa(); }

struct Shape {
  int64_t n, c, oc, h, w;
  std::vector<int64_t> pads;               // top, left, bottom, right
  std::vector<int64_t> dilation = {1, 1};  // h, w
};

Workload workload(const Shape& s) {
  return Workload{"conv2d_winograd_NCHWc.x86",
                  {{"data", {s.n, s.c, s.h, s.w}},
                   {"kernel", {s.oc, s.c, 3, 3}},
                   {"strides", {1, 1}},
                   {"pads", s.pads},
                   {"dilation", s.dilation}}};
}

// F(4x4) rounds more than the direct sum: its transforms multiply by up to 8
// and 1/24 (Lavin & Gray's error analysis); 1e-4 of the output's range is
// what an end-to-end model must keep.
constexpr double kTolerance = 1e-4;

void expect_matches_plain(const Workload& w, const Config& cfg, std::mt19937_64& rng,
                          bool with_relu_epilogue = false) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  const ops::OpTemplate& t = tmpl();
  Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kDense);
  auto in_shapes = t.input_shapes(w, cfg);
  auto out_shape = t.output_shape(w, cfg);
  int64_t icb = in_shapes[0].back(), ocb = out_shape.back();
  auto data = random_floats(a.batch * a.in_channels * a.height * a.width, rng);
  auto weight = random_floats(a.out_channels * a.in_channels * 9, rng);
  auto data_c = ops::nchw_to_nchwc(data.data(), a.batch, a.in_channels, a.height, a.width, icb);
  auto weight_u = ops::winograd_pack_weight(w, cfg, weight.data());
  int64_t u_elems = 1;
  for (int64_t d : in_shapes[1]) u_elems *= d;
  ASSERT_EQ(static_cast<int64_t>(weight_u.size()), u_elems);

  ops::TemplateInstance inst = t.compute(w, cfg);
  ir::Tensor out_t = inst.anchor;
  if (with_relu_epilogue)
    out_t = ir::compute(
        inst.anchor->shape,
        [&](const std::vector<ir::Var>& i) {
          return ir::max(ir::read(inst.anchor, {i.begin(), i.end()}), ir::make_float(0.0));
        },
        "relu");
  schedule::Schedule sch = schedule::create_schedule({out_t});
  t.schedule(sch, inst, out_t, cfg);
  ir::LoweredFunc f = schedule::lower(sch, {inst.inputs[0], inst.inputs[1], out_t}, "wino");
  auto mod = codegen::jit_compile({f}, host_target());
  std::vector<float> out(a.batch * a.out_channels * a.out_height() * a.out_width(), NAN);
  std::vector<void*> args = {data_c.data(), weight_u.data(), out.data()};
  ASSERT_EQ(mod->get_function("wino")(args.data()), 0);
  auto got =
      ops::nchwc_to_nchw(out.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), ocb);

  std::vector<float> expected(got.size());
  ops::reference::conv2d_nchw_grouped(data.data(), weight.data(), expected.data(), a);
  if (with_relu_epilogue)
    for (float& v : expected) v = std::max(v, 0.0f);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), expected.size()),
            kTolerance);

  std::vector<float> ref(out.size(), NAN);
  t.reference(w, cfg, {data_c.data(), weight_u.data()}, ref.data());
  auto ref_nchw =
      ops::nchwc_to_nchw(ref.data(), a.batch, a.out_channels, a.out_height(), a.out_width(), ocb);
  if (with_relu_epilogue)
    for (float& v : ref_nchw) v = std::max(v, 0.0f);
  EXPECT_LE(ops::reference::max_relative_error(ref_nchw.data(), expected.data(), expected.size()),
            1e-5);
}

// Each shape with the AVX-512 and AVX2 fallbacks and random points of the space.
void expect_fallbacks_and_random_configs_match(const std::vector<Shape>& shapes,
                                               std::mt19937_64& rng) {
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  for (const Shape& s : shapes) {
    Workload w = workload(s);
    auto space = tmpl().space(w);
    std::vector<Config> configs = {tmpl().fallback(w, avx512), tmpl().fallback(w, avx2)};
    for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(space.random(rng));
    for (const Config& cfg : configs) expect_matches_plain(w, cfg, rng);
  }
}

Config with_knobs(const Workload& w, const std::string& knobs) {
  return ops::detail::config_from_knobs(tmpl().space(w), knobs);
}

TEST(WinogradConv2d, MatchesPlainConvOverShapesAndConfigs) {
  const std::vector<Shape> shapes = {
      // ResNet's 3x3 with 'same' padding, narrowed; 14 = 3 tiles of 4 + 2.
      {1, 16, 32, 14, 14, {1, 1, 1, 1}},
      // Odd sizes: 9 x 11 outputs, a partial tile in both directions.
      {1, 8, 16, 9, 11, {1, 1, 1, 1}},
      // No padding, batch 2, 3 input channels (a block of 3 lanes).
      {2, 3, 8, 10, 7, {0, 0, 0, 0}},
      // Asymmetric pads, 12 and 24 channels (blocks of 4/6/12).
      {1, 12, 24, 6, 13, {0, 1, 2, 1}},
      // 7 x 7 maps (ResNet's last stage), 32 channels.
      {1, 32, 32, 7, 7, {1, 1, 1, 1}},
      // One output (a 3x3 input, no padding) and a 2 x 5 output: one tile.
      {1, 16, 16, 3, 3, {0, 0, 0, 0}},
      {2, 16, 16, 2, 5, {1, 1, 1, 1}},
  };
  std::mt19937_64 rng(2026);
  expect_fallbacks_and_random_configs_match(shapes, rng);
}

// Both tile sizes in one and two passes with every GEMM knob away from the
// fallback, and the epilogue path (the anchor inlined into a ReLU output).
TEST(WinogradConv2d, TileSizesAndEpilogue) {
  Workload w = workload({1, 8, 16, 10, 9, {1, 1, 1, 1}});
  std::mt19937_64 rng(7);
  for (const char* m : {"2", "4"})
    for (const char* rows : {"2", "6", "16"})
      for (const char* passes : {"1", "2"}) {
        std::string knobs = std::string(R"("tile_ic": [2, 4], "tile_oc": [2, 8], "wino_m": )") + m +
                            R"(, "p_tile": )" + rows + R"(, "unroll_ci": 0, )" +
                            R"("transform_passes": )" + passes;
        expect_matches_plain(w, with_knobs(w, knobs), rng);
        expect_matches_plain(w, with_knobs(w, knobs), rng, /*with_relu_epilogue=*/true);
      }
}

// U = G g G^T: a weight of one tap at the centre transforms to
// G[:,1] G[:,1]^T, written out for F(2x2) (G[:,1] = 0, 1/2, -1/2, 0).
TEST(WinogradConv2d, PackedWeightIsTheTransform) {
  Workload w = workload({1, 2, 2, 4, 4, {1, 1, 1, 1}});
  Config cfg = with_knobs(w, R"("tile_ic": [1, 2], "tile_oc": [2, 1], "wino_m": 2, )"
                             R"("p_tile": 2, "unroll_ci": 1)");
  std::vector<float> g(2 * 2 * 9, 0.0f);
  g[(1 * 2 + 0) * 9 + 4] = 1.0f;  // oc 1, c 0: the centre tap
  auto u = ops::winograd_pack_weight(w, cfg, g.data());
  ASSERT_EQ(u.size(), 4u * 4 * 2 * 2);
  const double col[4] = {0, 0.5, -0.5, 0};
  // [alpha, alpha, OC/1, C/2, 2, 1]
  for (int e = 0; e < 4; ++e)
    for (int v = 0; v < 4; ++v) {
      EXPECT_FLOAT_EQ(u[((e * 4 + v) * 2 + 1) * 2 + 0], col[e] * col[v]);
      EXPECT_EQ(u[((e * 4 + v) * 2 + 1) * 2 + 1], 0.0f);  // oc 1, c 1
      EXPECT_EQ(u[((e * 4 + v) * 2 + 0) * 2 + 0], 0.0f);  // oc 0
    }
}

TEST(WinogradConv2d, FallbackAndErrors) {
  const auto& t = tmpl();
  Workload big = workload({1, 64, 64, 56, 56, {1, 1, 1, 1}});
  Workload small = workload({1, 512, 512, 7, 7, {1, 1, 1, 1}});
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  EXPECT_EQ(ops::winograd_tile(t.fallback(big, avx512)), 4);
  EXPECT_EQ(ops::winograd_tile(t.fallback(small, avx512)), 2);
  EXPECT_EQ(t.fallback(big, avx512).knob("p_tile"), 16);
  EXPECT_EQ(t.fallback(big, avx2).knob("p_tile"), 6);  // 2 ymm per row of 16 channels
  // 16 channels are 4 NEON vectors: F(2x2), whose unrolled tiles fit the compile budget.
  EXPECT_EQ(ops::winograd_tile(
                t.fallback(big, isa_of("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"))),
            2);
  EXPECT_EQ(ops::winograd_tile(t.fallback(big, avx2)), 4);
  // Two-pass transforms where a tile's vectors outnumber twice the registers:
  // 72 ymm of F(4x4) on AVX2, not 36 zmm on AVX-512 nor 32 ymm of F(2x2).
  EXPECT_EQ(t.fallback(big, avx2).knob("transform_passes"), 2);
  EXPECT_EQ(t.fallback(big, avx512).knob("transform_passes"), 1);
  EXPECT_EQ(t.fallback(small, avx2).knob("transform_passes"), 1);
  // Records stored before the knob keep their one-pass meaning.
  Config old = Config::from_json(
      t.space(big),
      R"({"knobs":{"tile_ic":[4,16],"tile_oc":[4,16],"wino_m":4,"p_tile":6,"unroll_ci":1}})");
  EXPECT_EQ(old.knob("transform_passes"), 1);
  for (const Isa& isa : {avx512, avx2}) {
    Config f = t.fallback(big, isa);
    EXPECT_TRUE(t.fits(big, f, isa));
    EXPECT_EQ(ops::layout_blocks(t, big, f), (std::pair<int64_t, int64_t>{16, 16}));
    EXPECT_EQ(Config::from_json(t.space(big), f.to_json()), f);
  }
  // The effective rate counts the direct convolution's operations.
  EXPECT_DOUBLE_EQ(t.flops(big), 2.0 * 64 * 56 * 56 * 64 * 9);
  auto expect_error = [&](Workload bad, const std::string& text) {
    try {
      t.space(bad);
      ADD_FAILURE() << "no error for " << bad.key();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  Workload strided = big;
  strided.params[2].second = {2, 2};
  expect_error(strided, "3x3 kernel and stride 1");
  Workload five = big;
  five.params[1].second = {64, 64, 5, 5};
  expect_error(five, "3x3 kernel and stride 1");
}

int vector_spill_stores(const std::string& assembly) {
  std::istringstream in(assembly);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += is_vector_spill_store(line);
  return n;
}

// With transform_passes 2, each transform runs in two passes over a local
// buffer (rows then columns of the input tile, columns then rows of the output
// tile), so that no pass holds a whole tile in registers: AVX2 code for 16
// channels (two ymm per value, 16 registers) spills nothing. In one pass, the
// F(4x4) input transform spilled 144 ymm stores and the output transform 88;
// the AVX2 fallback takes two passes there.
TEST(WinogradConv2d, Avx2TwoPassTransformsDoNotSpill) {
  const auto& t = tmpl();
  codegen::Target znver3 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  const Shape shapes[] = {
      {1, 64, 64, 56, 56, {1, 1, 1, 1}},   // F(4x4)
      {1, 48, 192, 13, 13, {1, 1, 1, 1}},  // F(4x4), a partial last tile
      {1, 512, 512, 7, 7, {1, 1, 1, 1}},   // F(2x2)
  };
  for (const Shape& s : shapes) {
    Workload w = workload(s);
    Config fallback = t.fallback(w, znver3.isa());
    EXPECT_EQ(fallback.knob("transform_passes"), ops::winograd_tile(fallback) == 4 ? 2 : 1);
    auto spills = [&](int64_t passes) {
      Config cfg = ops::detail::KnobValues()
                       .split("tile_ic", s.c, {16})
                       .split("tile_oc", s.oc, {16})
                       .knob("wino_m", ops::winograd_tile(fallback))
                       .knob("p_tile", fallback.knob("p_tile"))
                       .knob("unroll_ci", 1)
                       .knob("transform_passes", passes)
                       .in(t.space(w));
      ops::Kernel k = ops::make_kernel(t, w, cfg);
      return vector_spill_stores(
          codegen::emit_assembly({schedule::lower(k.sch, k.args, "wino")}, znver3));
    };
    int one = spills(1), two = spills(2);
    std::printf("%s: %d ymm spill stores in one pass, %d in two\n", w.key().c_str(), one, two);
    EXPECT_EQ(two, 0) << w.key();
    EXPECT_GT(one, 0) << w.key();
  }
}

// A dilated 3x3 convolution is dh x dw ordinary ones, one per output phase
// (rows oh with the same oh % dh read only each other's input rows): the
// template tiles every phase alike. Dilations 2 to 4, unequal ones, phases of
// unequal sizes (output sides the dilation does not divide), phases smaller
// than a tile, asymmetric pads, batch 2, with both tile sizes and the epilogue.
TEST(WinogradConv2d, DilatedMatchesPlainConv) {
  const std::vector<Shape> shapes = {
      // FCN's layer 3, narrowed: dilation 2, 'same' padding, 4 phases of 7 x 7.
      {1, 16, 32, 14, 14, {2, 2, 2, 2}, {2, 2}},
      // Dilation 4 on 28 x 28 (FCN's layer 4): 16 phases of 7 x 7.
      {1, 16, 16, 28, 28, {4, 4, 4, 4}, {4, 4}},
      // Output 13 x 11 with dilation 3: phases of 5 and 4 rows, 4 and 3 columns.
      {2, 8, 16, 15, 13, {2, 1, 2, 2}, {3, 2}},
      // Unequal dilations, asymmetric pads, 12 and 24 channels.
      {1, 12, 24, 9, 17, {0, 1, 3, 2}, {1, 3}},
      // No padding: output 3 x 1 with dilation 2 (a phase of one row).
      {1, 16, 8, 7, 5, {0, 0, 0, 0}, {2, 2}},
  };
  std::mt19937_64 rng(2027);
  expect_fallbacks_and_random_configs_match(shapes, rng);
  Workload w = workload({1, 8, 16, 11, 10, {2, 2, 2, 2}, {2, 2}});
  for (const char* m : {"2", "4"}) {
    std::string knobs = std::string(R"("tile_ic": [2, 4], "tile_oc": [2, 8], "wino_m": )") + m +
                        R"(, "p_tile": 4, "unroll_ci": 0)";
    expect_matches_plain(w, with_knobs(w, knobs), rng, /*with_relu_epilogue=*/true);
  }
}

// Where Winograd's tiles, overhang counted, cost fewer products per output
// than the direct convolution's 9 (at most 6: its transforms are not free).
TEST(WinogradConv2d, PaysWhereThePhasesHoldTiles) {
  auto attrs = [](int64_t hw, int64_t d) {
    Shape s{1, 64, 64, hw, hw, {d, d, d, d}, {d, d}};
    return ops::conv2d_attrs(workload(s), ops::ConvKind::kDense);
  };
  EXPECT_TRUE(ops::winograd_pays(attrs(3, 1)));     // no dilation: always (as before)
  EXPECT_TRUE(ops::winograd_pays(attrs(28, 2)));    // 4 phases of 14 x 14
  EXPECT_TRUE(ops::winograd_pays(attrs(28, 4)));    // 16 phases of 7 x 7
  EXPECT_TRUE(ops::winograd_pays(attrs(65, 4)));    // phases of 17 and 16
  EXPECT_FALSE(ops::winograd_pays(attrs(28, 12)));  // phases of 3 and 2 rows
  EXPECT_FALSE(ops::winograd_pays(attrs(28, 36)));  // 1296 phases, 784 outputs
  Shape strided{1, 64, 64, 28, 28, {1, 1, 1, 1}};
  Workload w = workload(strided);
  w.params[2].second = {2, 2};
  EXPECT_FALSE(ops::winograd_pays(ops::conv2d_attrs(w, ops::ConvKind::kDense)));
}

// F(4x4) where a dilated convolution's phases are many, though each is
// smaller than 8 x 8; without dilation the 7 x 7 rule is unchanged.
TEST(WinogradConv2d, DilatedFallbackTileSize) {
  const auto& t = tmpl();
  const Isa avx512 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  const Isa avx2 = isa_of("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  Workload fcn4 = workload({1, 512, 512, 28, 28, {4, 4, 4, 4}, {4, 4}});  // 16 phases of 7 x 7
  Workload fcn2 = workload({1, 256, 256, 28, 28, {2, 2, 2, 2}, {2, 2}});  // 4 of 14 x 14
  Workload plain7 = workload({1, 512, 512, 7, 7, {1, 1, 1, 1}});
  Workload tiny = workload({1, 64, 64, 6, 6, {2, 2, 2, 2}, {2, 2}});  // 4 phases of 3 x 3
  for (const Isa& isa : {avx512, avx2}) {
    EXPECT_EQ(ops::winograd_tile(t.fallback(fcn4, isa)), 4);
    EXPECT_EQ(ops::winograd_tile(t.fallback(fcn2, isa)), 4);
    EXPECT_EQ(ops::winograd_tile(t.fallback(plain7, isa)), 2);
  }
  // 4 tiles of F(4x4) pad to one 16-row (AVX-512) or 6-row (AVX2) GEMM tile:
  // 16 x 36 and 6 x 36 products against F(2x2)'s 16 x 16 and 18 x 16.
  EXPECT_EQ(ops::winograd_tile(t.fallback(tiny, avx512)), 2);
  EXPECT_EQ(ops::winograd_tile(t.fallback(tiny, avx2)), 4);
}

}  // namespace
}  // namespace kiln::test
