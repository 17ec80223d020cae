// The lane-window convolutions (depthwise_conv2d_NCHWc.x86 here) with a heavy
// fused epilogue, SiLU (x * sigmoid(x + bias)) as EfficientNet's blocks have
// it: the copy-out of the register tile runs column by column, so that one
// column's sigmoid at a time sits beside the tile. Checked against the plain
// depthwise convolution with the epilogue applied after it, on widths the
// column tile does not divide and for the fallbacks of three ISA rows; and as
// AVX2 code no innermost loop spills a vector register. Unrolled over the
// tile, the epilogue's loop held 44 spill stores (and 219 reloads) in
// EfficientNet-B0's first depthwise kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/codegen.h"
#include "codegen/target.h"
#include "harness.h"
#include "ops/conv2d.h"
#include "ops/depthwise_conv2d.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/lower.h"
#include "silu_epilogue.h"

namespace kiln::test {
namespace {

using ops::Conv2DAttrs;
using ops::Workload;
using schedule::Config;

const ops::OpTemplate& tmpl() { return ops::get_template("depthwise_conv2d_NCHWc.x86"); }

struct Shape {
  int64_t c, h, w, stride;
};

Workload workload(const Shape& s) {
  return Workload{"depthwise_conv2d_NCHWc.x86",
                  {{"data", {1, s.c, s.h, s.w}},
                   {"kernel", {s.c, 1, 3, 3}},
                   {"strides", {s.stride, s.stride}},
                   {"pads", {1, 1, 1, 1}},
                   {"dilation", {1, 1}}}};
}

void expect_silu_matches_plain(const Workload& w, const Config& cfg, std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kDepthwise);
  const int64_t cb = tmpl().output_shape(w, cfg).back();
  auto data = random_floats(a.in_channels * a.height * a.width, rng);
  auto weight = random_floats(a.in_channels * 9, rng);
  auto bias = random_floats(a.in_channels, rng);
  auto data_c = ops::nchw_to_nchwc(data.data(), 1, a.in_channels, a.height, a.width, cb);
  // [C/cb, 1, 3, 3, 1, cb]: channel c's taps at block c / cb, lane c % cb.
  std::vector<float> weight_c(weight.size());
  for (int64_t c = 0; c < a.in_channels; ++c)
    for (int64_t t = 0; t < 9; ++t) weight_c[((c / cb) * 9 + t) * cb + c % cb] = weight[c * 9 + t];
  SiluKernel k = silu_kernel(tmpl(), w, cfg);
  auto mod = codegen::jit_compile({schedule::lower(k.sch, k.args, "dw_silu")}, host_target());
  const int64_t OH = a.out_height(), OW = a.out_width();
  std::vector<float> out(a.in_channels * OH * OW, NAN);
  std::vector<void*> args = {data_c.data(), weight_c.data(), bias.data(), out.data()};
  ASSERT_EQ(mod->get_function("dw_silu")(args.data()), 0);
  auto got = ops::nchwc_to_nchw(out.data(), 1, a.in_channels, OH, OW, cb);
  std::vector<float> expected(got.size());
  ops::reference::conv2d_nchw_grouped(data.data(), weight.data(), expected.data(), a);
  for (int64_t c = 0; c < a.in_channels; ++c)
    for (int64_t p = 0; p < OH * OW; ++p) {
      float& v = expected[c * OH * OW + p];
      double z = double(v) + bias[c];
      v = static_cast<float>(z / (1.0 + std::exp(-z)));
    }
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), expected.size()), 1e-5);
}

// Widths of 7, 13 and 28 (the fallback's column tiles leave partial ones on
// the first two), stride 2, 24 channels (blocks of 8 or 24).
const Shape kShapes[] = {{32, 7, 7, 1}, {24, 9, 13, 1}, {16, 28, 28, 1}, {32, 14, 14, 2}};

TEST(DepthwiseEpilogue, SiluMatchesPlainConvOnEveryIsaRow) {
  std::mt19937_64 rng(29);
  const char* targets[] = {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                           "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3",
                           "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"};
  for (const Shape& s : kShapes) {
    Workload w = workload(s);
    for (const char* t : targets)
      expect_silu_matches_plain(w, tmpl().fallback(w, codegen::Target::parse(t).isa()), rng);
    expect_silu_matches_plain(w, tmpl().space(w).random(rng), rng);
  }
}

// Vector registers stored to a fixed stack slot inside innermost loops:
// spills where the time goes. (Outside them, such stores are also the
// register tile's own stack buffer, which the column loop reads.)
int inner_loop_spill_stores(const std::string& assembly) {
  int n = 0;
  for (const auto& loop : innermost_loops(assembly))
    for (const std::string& l : loop) n += is_vector_spill_store(l);
  return n;
}

TEST(DepthwiseEpilogue, Avx2SiluDoesNotSpill) {
  codegen::Target znver3 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  for (const Shape& s : {Shape{32, 112, 112, 1}, Shape{96, 112, 112, 2}}) {
    Workload w = workload(s);
    Config cfg = tmpl().fallback(w, znver3.isa());
    SiluKernel k = silu_kernel(tmpl(), w, cfg);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "dw_silu")}, znver3);
    EXPECT_EQ(inner_loop_spill_stores(as), 0) << w.key() << " " << cfg.to_json();
  }
}

}  // namespace
}  // namespace kiln::test
