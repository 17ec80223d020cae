// The AMX convolution template conv2d_NCHWc_int8_amx.x86
// (ops/conv2d_int8_amx.h): its own loops (through ops::lower_template_kernel,
// what the tuner and the build compile) for every config of its space, with
// the tiles emulated (a target without AMX), bit-exact against a plain
// integer convolution on the logical NCHW data and OIHW weight (padded taps
// read the pad value, the activation zero point) - independent of the
// template's layouts and of its own reference, which must agree too. Shapes:
// 1x1 stride 1 (the direct path, no im2col) and stride 2, 3x3 stride 1 and 2,
// the 7x7 stride-2 stem with 3 channels, asymmetric padding and dilation,
// batch 2, channel counts no 4, 16 or 64 divides, pixel counts no panel
// divides, reductions with and without a 64-byte tail. Also: the space and
// fallback, refused workloads, the Sapphire Rapids assembly, and the tile
// instructions on a CPU with AMX (skipped elsewhere).
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/amx.h"
#include "codegen/helpers.h"
#include "ir/printer.h"
#include "ops/conv2d_int8.h"
#include "ops/conv2d_int8_amx.h"
#include "runtime/amx.h"
#include "runtime/cpu_features.h"

namespace kiln::codegen::test {
namespace {

struct ConvCase {
  ops::Conv2DAttrs a;
  int64_t pad_value;
};

ops::Conv2DAttrs conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t kh,
                      int64_t kw, int64_t sh, int64_t sw, std::vector<int64_t> pads, int64_t dh = 1,
                      int64_t dw = 1) {
  return {n, c, h, w, oc, kh, kw, sh, sw, pads[0], pads[1], pads[2], pads[3], dh, dw, 1};
}

const std::vector<ConvCase> kCases = {
    {conv(1, 20, 9, 7, 36, 1, 1, 1, 1, {0, 0, 0, 0}), 0},          // 1x1 s1: direct
    {conv(2, 130, 5, 6, 17, 1, 1, 1, 1, {0, 0, 0, 0}), 3},         // direct, K tail, batch 2
    {conv(1, 16, 13, 11, 24, 1, 1, 2, 2, {0, 0, 0, 0}), 9},        // 1x1 s2
    {conv(1, 12, 10, 9, 40, 3, 3, 1, 1, {1, 1, 1, 1}), 128},       // 3x3 s1 pad 1
    {conv(1, 40, 15, 13, 70, 3, 3, 2, 2, {1, 1, 1, 1}), 201},      // 3x3 s2 pad 1
    {conv(1, 3, 29, 27, 64, 7, 7, 2, 2, {3, 3, 3, 3}), 117},       // the stem
    {conv(1, 5, 11, 12, 6, 3, 2, 1, 2, {2, 0, 1, 1}, 2, 1), 255},  // asymmetric, dilated
    {conv(2, 8, 7, 6, 20, 3, 3, 1, 1, {1, 1, 1, 1}), 77},          // batch 2
    {conv(1, 64, 6, 6, 33, 3, 3, 1, 1, {1, 1, 1, 1}), 5},          // K = 576: 9 steps
    {conv(1, 7, 4, 4, 3, 1, 1, 1, 1, {1, 1, 1, 1}), 250},          // 1x1 padded: im2col
};

Target without_amx() {
  Target t = host();
  std::erase(t.features, "+amx-tile");
  t.features.push_back("-amx-tile");
  return t;
}

// out[n][oc][oh][ow] on logical NCHW / OIHW, padded taps = pad_value.
std::vector<int32_t> plain_conv(const ops::Conv2DAttrs& a, int64_t pad_value,
                                const std::vector<uint8_t>& x, const std::vector<int8_t>& w) {
  int64_t OH = a.out_height(), OW = a.out_width();
  std::vector<int32_t> y(static_cast<size_t>(a.batch * a.out_channels * OH * OW));
  for (int64_t n = 0; n < a.batch; ++n)
    for (int64_t o = 0; o < a.out_channels; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = 0;
          for (int64_t i = 0; i < a.in_channels; ++i)
            for (int64_t kh = 0; kh < a.kernel_h; ++kh)
              for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                bool inside = ih >= 0 && ih < a.height && iw >= 0 && iw < a.width;
                int64_t v = inside ? x[((n * a.in_channels + i) * a.height + ih) * a.width + iw]
                                   : pad_value;
                acc += v * w[((o * a.in_channels + i) * a.kernel_h + kh) * a.kernel_w + kw];
              }
          y[((n * a.out_channels + o) * OH + oh) * OW + ow] = static_cast<int32_t>(acc);
        }
  return y;
}

// Every config of the template's space (at most `max_configs`, spread over
// it) on c, on target t.
void check_configs(const Target& t, const ConvCase& c, uint32_t seed, int64_t max_configs = 8) {
  const ops::Conv2DAttrs& a = c.a;
  const ops::OpTemplate& tmpl = ops::conv2d_nchwc_int8_amx_template();
  ops::Workload w = ops::conv2d_int8_amx_workload(a, c.pad_value);
  int64_t Cb = (a.in_channels + 3) / 4 * 4, OCb = (a.out_channels + 3) / 4 * 4;
  int64_t OH = a.out_height(), OW = a.out_width();
  auto x = random_vector<uint8_t>(a.batch * a.in_channels * a.height * a.width, 0, 255, seed);
  auto wt = random_vector<int8_t>(a.out_channels * a.in_channels * a.kernel_h * a.kernel_w, -128,
                                  127, seed + 1);
  // The extremes: 255 x -128 over output channel 0's whole window.
  x[0] = 255;
  for (int64_t k = 0; k < a.in_channels * a.kernel_h * a.kernel_w; ++k) wt[k] = -128;
  std::vector<int32_t> want = plain_conv(a, c.pad_value, x, wt);
  // Channels past C hold garbage: their weights are zero.
  auto xc = ops::nchw_to_nchwc_u8(x.data(), a.batch, a.in_channels, a.height, a.width, Cb, 0xa7);
  auto wp = ops::pack_conv2d_int8_amx_weight(wt.data(), a.out_channels, a.in_channels, a.kernel_h,
                                             a.kernel_w);
  schedule::ConfigSpace space = tmpl.space(w);
  ASSERT_GE(space.size(), 1);
  ASSERT_EQ(tmpl.input_shapes(w, space.get(0)).at(0),
            (std::vector<int64_t>{a.batch, 1, a.height, a.width, Cb}));
  int64_t wn = 1;
  std::vector<std::vector<int64_t>> shapes = tmpl.input_shapes(w, space.get(0));
  for (int64_t d : shapes.at(1)) wn *= d;
  ASSERT_EQ(wn, static_cast<int64_t>(wp.size()));
  int64_t step = std::max<int64_t>(1, space.size() / max_configs);
  for (int64_t i = 0; i < space.size(); i += step) {
    schedule::Config cfg = space.get(i);
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    ir::LoweredFunc f = ops::lower_template_kernel(tmpl, w, cfg, schedule::LowerOptions{});
    EXPECT_NE(to_string(f).find("amx_gemm("), std::string::npos);
    std::vector<int32_t> y(static_cast<size_t>(a.batch * OH * OW * OCb), 0x5a5a5a5a);
    Compiled k = jit(f, t);
    ASSERT_EQ(k({xc.data(), wp.data(), y.data()}), 0);
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t o = 0; o < OCb; ++o) {
            int32_t got = y[((n * OH + oh) * OW + ow) * OCb + o];
            int32_t ref = o < a.out_channels ? want[((n * a.out_channels + o) * OH + oh) * OW + ow]
                                             : 0;  // padded channels: zero weights
            ASSERT_EQ(got, ref) << "n " << n << " oh " << oh << " ow " << ow << " oc " << o;
          }
    // The template's own reference agrees (the tuner and the interpreter use it).
    std::vector<int32_t> ref(y.size());
    tmpl.reference_typed(w, cfg, {xc.data(), wp.data()}, ref.data());
    ASSERT_EQ(ref, y);
  }
}

TEST(Conv2dInt8AmxTemplate, EmulatedTilesBitExact) {
  if (host().arch() != "x86_64") GTEST_SKIP() << "not an x86_64 host";
  Target t = without_amx();
  ASSERT_EQ(detail::amx_gemm_lowering(t, ir::AmxOp::DpbusdU8I8), "emulated");
  uint32_t seed = 11;
  for (const ConvCase& c : kCases) check_configs(t, c, seed += 2);
}

// The 1x1 stride-1 path reads the data in place; every other one copies
// patches into a per-task workspace first.
TEST(Conv2dInt8AmxTemplate, DirectPathOnlyFor1x1Stride1Unpadded) {
  const ops::OpTemplate& tmpl = ops::conv2d_nchwc_int8_amx_template();
  for (const ConvCase& c : kCases) {
    ops::Workload w = ops::conv2d_int8_amx_workload(c.a, c.pad_value);
    std::string text = to_string(
        ops::lower_template_kernel(tmpl, w, tmpl.fallback(w, Isa{}), schedule::LowerOptions{}));
    bool direct = c.a.kernel_h == 1 && c.a.kernel_w == 1 && c.a.stride_h == 1 &&
                  c.a.stride_w == 1 && c.a.pad_top == 0 && c.a.pad_bottom == 0 &&
                  c.a.pad_left == 0 && c.a.pad_right == 0;
    EXPECT_EQ(text.find("im2col") == std::string::npos, direct) << w.key() << "\n" << text;
  }
}

TEST(Conv2dInt8AmxTemplate, SpaceFallbackAndRefusals) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_amx_template();
  // ResNet-50's shapes: 56x56 (196 panels) 3x3 64 -> 64, and 7x7 1x1 2048 -> 512.
  ops::Workload r3 =
      ops::conv2d_int8_amx_workload(conv(1, 64, 56, 56, 64, 3, 3, 1, 1, {1, 1, 1, 1}), 0);
  schedule::ConfigSpace s = t.space(r3);
  std::vector<int64_t> knobs;
  for (int64_t i = 0; i < s.size(); ++i) knobs.push_back(s.get(i).knob("panels_per_task"));
  EXPECT_EQ(knobs, (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  // amx_panels_per_task(3136) = 12; a task's workspace 16 * p * 576 bytes
  // within 256 KiB allows p <= 28: 8.
  EXPECT_EQ(t.fallback(r3, Isa{}).knob("panels_per_task"), 8);
  // A deeper reduction, 3x3 x 256 channels = 2304 bytes a row: 8 panels
  // would take 288 KiB, 4 take 144 KiB.
  ops::Workload deep =
      ops::conv2d_int8_amx_workload(conv(1, 256, 56, 56, 64, 3, 3, 1, 1, {1, 1, 1, 1}), 0);
  EXPECT_EQ(t.fallback(deep, Isa{}).knob("panels_per_task"), 4);
  // The direct path has no workspace: amx_panels_per_task alone.
  ops::Workload d1 =
      ops::conv2d_int8_amx_workload(conv(1, 2048, 56, 56, 512, 1, 1, 1, 1, {0, 0, 0, 0}), 0);
  EXPECT_EQ(t.fallback(d1, Isa{}).knob("panels_per_task"), 8);
  // The blocks are the whole (4-rounded) channel counts.
  ops::Workload odd =
      ops::conv2d_int8_amx_workload(conv(1, 3, 9, 9, 30, 3, 3, 1, 1, {1, 1, 1, 1}), 0);
  EXPECT_EQ(ops::layout_blocks(t, odd, t.fallback(odd, Isa{})),
            (std::pair<int64_t, int64_t>{4, 32}));
  EXPECT_EQ(t.fallback(odd, Isa{}).to_json(),
            t.fallback(odd, Target::parse("llvm -mcpu=sapphirerapids").isa()).to_json());
  // Refused: another template's workload, a reduction past the int32 bound, a
  // pad value outside uint8.
  EXPECT_THROW(t.space(ops::conv2d_int8_workload(conv(1, 8, 5, 5, 8, 3, 3, 1, 1, {1, 1, 1, 1}), 0)),
               std::invalid_argument);
  EXPECT_THROW(
      t.space(ops::conv2d_int8_amx_workload(conv(1, 7400, 5, 5, 8, 3, 3, 1, 1, {1, 1, 1, 1}), 0)),
      std::invalid_argument);
  EXPECT_THROW(
      t.space(ops::conv2d_int8_amx_workload(conv(1, 8, 5, 5, 8, 3, 3, 1, 1, {1, 1, 1, 1}), 256)),
      std::invalid_argument);
}

TEST(Conv2dInt8AmxTemplate, SapphireRapidsAssemblyUsesTiles) {
  Target t = Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  ASSERT_TRUE(t.isa().amx_int8);
  const ops::OpTemplate& tmpl = ops::conv2d_nchwc_int8_amx_template();
  for (const ConvCase& c : {kCases[0], kCases[4], kCases[5]}) {
    ops::Workload w = ops::conv2d_int8_amx_workload(c.a, c.pad_value);
    ir::LoweredFunc f =
        ops::lower_template_kernel(tmpl, w, tmpl.fallback(w, t.isa()), schedule::LowerOptions{});
    std::string as = emit_assembly({f}, t);
    for (const char* n : {"ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"})
      EXPECT_NE(as.find(n), std::string::npos) << n << " missing for " << w.key();
  }
}

// The tile instructions themselves: only on a CPU with AMX.
TEST(Conv2dInt8AmxTemplate, TileInstructionsOnThisCpu) {
  if (!runtime::host_has_cpu_feature("amx-int8"))
    GTEST_SKIP() << "needs amx-int8 (this CPU lacks it)";
  ASSERT_EQ(runtime::request_amx_permission(), "");
  ASSERT_EQ(detail::amx_gemm_lowering(host(), ir::AmxOp::DpbusdU8I8), "amx");
  uint32_t seed = 90;
  for (const ConvCase& c : kCases) check_configs(host(), c, seed += 2);
}

}  // namespace
}  // namespace kiln::codegen::test
