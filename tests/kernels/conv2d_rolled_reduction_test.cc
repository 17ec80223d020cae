// rolled_reduction (conv2d_NCHWc and group_conv2d_NCHWc): the fallback's
// choice per ISA, the spills it removes from AVX2 code (assembly inspected,
// so these run on any host), and rolled configs against the reference.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "codegen/codegen.h"
#include "codegen/target.h"
#include "harness.h"
#include "ops/conv2d.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "ops/workload.h"

namespace kiln::test {
namespace {

using ops::OpTemplate;
using ops::Workload;
using schedule::Config;

const codegen::Target& znver3() {
  static const codegen::Target t =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  return t;
}

Workload conv_1x1(int64_t c, int64_t hw, int64_t oc) {
  return Workload{"conv2d_NCHWc.x86",
                  {{"data", {1, c, hw, hw}},
                   {"kernel", {oc, c, 1, 1}},
                   {"strides", {1, 1}},
                   {"pads", {0, 0, 0, 0}},
                   {"dilation", {1, 1}}}};
}

Workload group_conv_3x3(int64_t c, int64_t hw, int64_t groups) {
  return Workload{"group_conv2d_NCHWc.x86",
                  {{"data", {1, c, hw, hw}},
                   {"kernel", {c, c / groups, 3, 3}},
                   {"strides", {1, 1}},
                   {"pads", {1, 1, 1, 1}},
                   {"dilation", {1, 1}}}};
}

// The fallback for AVX2 with `columns` output columns per register tile and
// rolled_reduction set to `rolled`.
Config avx2_config(const OpTemplate& t, const Workload& w, int64_t columns, int64_t rolled) {
  Config f = t.fallback(w, znver3().isa());
  std::string j = config_json_with_knob(f, "rolled_reduction", rolled);
  const std::string key = "\"tile_ow\": [";
  size_t at = j.find(key), end = j.find(']', at);
  const int64_t width = w.get("data")[3];  // the output's: 1x1 or padded 3x3, stride 1
  const int64_t tiles = (width + columns - 1) / columns;
  j = j.substr(0, at + key.size()) + std::to_string(tiles) + ", " + std::to_string(columns) +
      j.substr(end);
  return Config::from_json(t.space(w), j);
}

// Whether an assembly line reads a vector from a fixed stack slot
// (`vfmadd231ps 608(%rsp), %ymm5, %ymm3`, `vmovups 32(%rsp), %ymm1`): a
// spilled value read back.
bool is_vector_stack_load(const std::string& line) {
  size_t slot = std::min(line.find("(%rsp)"), line.find("(%rbp)"));
  size_t reg = line.find("%ymm", slot == std::string::npos ? 0 : slot);
  return slot != std::string::npos && reg != std::string::npos && !is_vector_spill_store(line);
}

int inner_loop_stack_loads(const std::string& assembly) {
  int n = 0;
  for (const auto& loop : innermost_loops(assembly))
    for (const std::string& l : loop) n += is_vector_stack_load(l);
  return n;
}

int stack_loads(const OpTemplate& t, const Workload& w, const Config& cfg) {
  ops::Kernel k = ops::make_kernel(t, w, cfg);
  return inner_loop_stack_loads(
      codegen::emit_assembly({schedule::lower(k.sch, k.args, "conv")}, znver3()));
}

// Runs the config on random inputs against the template's reference.
void expect_matches_reference(const OpTemplate& t, const Workload& w, const Config& cfg,
                              std::mt19937_64& rng) {
  SCOPED_TRACE(w.key() + " config " + cfg.to_json());
  std::vector<std::vector<float>> inputs;
  std::vector<const float*> pointers;
  std::vector<float*> buffers;
  for (const auto& shape : t.input_shapes(w, cfg)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    inputs.push_back(random_floats(n, rng));
  }
  for (auto& v : inputs) pointers.push_back(v.data()), buffers.push_back(v.data());
  int64_t size = 1;
  for (int64_t d : t.output_shape(w, cfg)) size *= d;
  std::vector<float> expected(size), got(size, NAN);
  t.reference(w, cfg, pointers, expected.data());
  buffers.push_back(got.data());
  run_jit(ops::make_kernel(t, w, cfg), buffers);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), expected.data(), size), 1e-5);
}

TEST(RolledReduction, FallbackRollsWhereTheIsaHasSixteenRegisters) {
  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  const OpTemplate& gt = ops::get_template("group_conv2d_NCHWc.x86");
  const Workload c = conv_1x1(24, 56, 144), g = group_conv_3x3(64, 14, 4);
  for (const char* target : {"llvm -mtriple=x86_64-linux-gnu -mcpu=znver3",
                             "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4",
                             "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72"}) {
    const Isa isa = codegen::Target::parse(target).isa();
    const int64_t rolled = isa.vector_registers < 32;
    EXPECT_EQ(ct.fallback(c, isa).knob("rolled_reduction"), rolled) << target;
    EXPECT_EQ(gt.fallback(g, isa).knob("rolled_reduction"), rolled) << target;
  }
}

// MobileNetV2's 24 -> 144 on 56 x 56 and EfficientNet's 40 -> 240 on 28 x 28
// in tiles of 1 block x 6 columns (12 ymm accumulators): unrolled, LLVM 16
// hoists the whole reduction's weights out of the column loop into stack
// slots, and the FMAs read them back; rolled, none.
TEST(RolledReduction, ShortReductionsKeepTheirWeightsOutOfStackSlots) {
  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  std::mt19937_64 rng(47);
  for (const Workload& w : {conv_1x1(24, 56, 144), conv_1x1(40, 28, 240)}) {
    SCOPED_TRACE(w.key());
    EXPECT_GT(stack_loads(ct, w, avx2_config(ct, w, 6, 0)), 0);
    Config rolled = avx2_config(ct, w, 6, 1);
    EXPECT_EQ(stack_loads(ct, w, rolled), 0);
    expect_matches_reference(ct, w, rolled, rng);
  }
}

// Rolled reductions of one block (the channels within it) and of several,
// widths that the column tiles do not divide, dense and grouped.
TEST(RolledReduction, RolledConfigsMatchTheReference) {
  const OpTemplate& ct = ops::get_template("conv2d_NCHWc.x86");
  const OpTemplate& gt = ops::get_template("group_conv2d_NCHWc.x86");
  std::mt19937_64 rng(53);
  for (const Workload& w : {conv_1x1(16, 13, 48), conv_1x1(48, 9, 40), conv_1x1(40, 2, 24)})
    for (int64_t columns : {2, 3, 5, 6})
      if (columns <= w.get("data")[3])
        expect_matches_reference(ct, w, avx2_config(ct, w, columns, 1), rng);
  // Groups of 8 channels (one block) and of 32 (two of 16).
  for (const Workload& w : {group_conv_3x3(64, 11, 8), group_conv_3x3(64, 7, 2)})
    for (int64_t columns : {2, 4})
      expect_matches_reference(gt, w, avx2_config(gt, w, columns, 1), rng);
}

}  // namespace
}  // namespace kiln::test
