// conv2d_NCHWc.x86 with a heavy fused epilogue, SiLU (z * sigmoid(z), z =
// conv + bias[channel]) as EfficientNet's expansions have it: the copy-out of
// the register tile runs column by column, as in the lane-window convs
// (depthwise_epilogue_test.cc). Checked against the template's reference
// with the epilogue applied after it, on widths the column tile does not
// divide, for the fallbacks of three ISA rows and random configs; and as AVX2
// code the sigmoid runs in a loop over the columns. Unrolled over the tile,
// EfficientNet-B0's 24 -> 144 expansion held 35 spill stores and 85 reloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "codegen/codegen.h"
#include "codegen/target.h"
#include "harness.h"
#include "ops/conv2d.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/lower.h"
#include "silu_epilogue.h"

namespace kiln::test {
namespace {

using ops::Workload;
using schedule::Config;

const ops::OpTemplate& tmpl() { return ops::get_template("conv2d_NCHWc.x86"); }

Workload conv_1x1(int64_t c, int64_t h, int64_t w, int64_t oc) {
  return Workload{"conv2d_NCHWc.x86",
                  {{"data", {1, c, h, w}},
                   {"kernel", {oc, c, 1, 1}},
                   {"strides", {1, 1}},
                   {"pads", {0, 0, 0, 0}},
                   {"dilation", {1, 1}}}};
}

int64_t element_product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void expect_silu_matches_reference(const Workload& w, const Config& cfg, std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  auto shapes = tmpl().input_shapes(w, cfg);
  auto data = random_floats(element_product(shapes[0]), rng);
  auto weight = random_floats(element_product(shapes[1]), rng);
  const std::vector<int64_t> out_shape = tmpl().output_shape(w, cfg);
  const int64_t ocb = out_shape.back(), plane = out_shape[2] * out_shape[3];
  auto bias = random_floats(out_shape[1] * ocb, rng);
  std::vector<float> expected(element_product(out_shape)), got(expected.size(), NAN);
  tmpl().reference(w, cfg, {data.data(), weight.data()}, expected.data());
  for (size_t i = 0; i < expected.size(); ++i) {
    const int64_t block = int64_t(i) / (plane * ocb), lane = int64_t(i) % ocb;
    double z = double(expected[i]) + bias[block * ocb + lane];
    expected[i] = static_cast<float>(z / (1.0 + std::exp(-z)));
  }
  SiluKernel k = silu_kernel(tmpl(), w, cfg);
  auto mod = codegen::jit_compile({schedule::lower(k.sch, k.args, "conv_silu")}, host_target());
  std::vector<void*> args = {data.data(), weight.data(), bias.data(), got.data()};
  ASSERT_EQ(mod->get_function("conv_silu")(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), expected.size()), 1e-5);
}

// Widths of 13, 9 and 56 (the fallbacks' tiles of 4 or 6 columns leave
// partial ones), reductions of one block and of several.
const Workload kWorkloads[] = {conv_1x1(24, 5, 13, 40), conv_1x1(16, 3, 9, 96),
                               conv_1x1(40, 2, 56, 48)};

TEST(Conv2dEpilogue, SiluMatchesTheReferenceOnEveryIsaRow) {
  std::mt19937_64 rng(59);
  const char* targets[] = {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512",
                           "llvm -mtriple=x86_64-linux-gnu -mcpu=znver3",
                           "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"};
  for (const Workload& w : kWorkloads) {
    for (const char* t : targets)
      expect_silu_matches_reference(w, tmpl().fallback(w, codegen::Target::parse(t).isa()), rng);
    for (int i = 0; i < configs_per_shape(2); ++i)
      expect_silu_matches_reference(w, tmpl().space(w).random(rng), rng);
  }
}

// The sigmoid's division is the copy-out's. Column by column, every one of
// them sits in a loop over the columns, one per vector of a column (LLVM may
// unroll the loop of column tiles around it, copying that loop); unrolled
// over the tile, they were straight-line code in the column-tile loop, one
// per vector of the tile, and with them the tile, the temporaries and the
// constants went to the stack (85 reloads a tile of 1 x 4 in the first of
// these, 21 column by column).
TEST(Conv2dEpilogue, Avx2SiluRunsColumnByColumn) {
  codegen::Target znver3 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  // EfficientNet-B0's 24 -> 144 and 16 -> 96 expansions.
  for (const Workload& w : {conv_1x1(24, 56, 56, 144), conv_1x1(16, 112, 112, 96)}) {
    Config cfg = tmpl().fallback(w, znver3.isa());
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    const int64_t vectors_per_column = tmpl().output_shape(w, cfg).back() / 8;
    ASSERT_GT(cfg.split("tile_ow").back(), 2);
    SiluKernel k = silu_kernel(tmpl(), w, cfg);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "conv_silu")}, znver3);
    const auto is_division = [](const std::string& l) { return l.find("vdivps") != l.npos; };
    int64_t total = 0, in_loops = 0;
    std::istringstream in(as);
    for (std::string line; std::getline(in, line);) total += is_division(line);
    for (const auto& loop : innermost_loops(as)) {
      const int64_t n = std::count_if(loop.begin(), loop.end(), is_division);
      EXPECT_LE(n, vectors_per_column);
      in_loops += n;
    }
    EXPECT_GT(total, 0);
    EXPECT_EQ(in_loops, total);
  }
}

}  // namespace
}  // namespace kiln::test
