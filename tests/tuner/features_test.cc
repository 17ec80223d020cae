// Features of lowered kernels (tuner/features.h): hand-built loop nests whose
// every feature is known, and kernels of every registered template under
// their fallback and random configs (fixed length, finite, deterministic,
// sensitive to the config, showing the vector width).
#include "tuner/features.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ir/stmt.h"
#include "ops/batch_matmul_int8.h"
#include "ops/dense.h"
#include "ops/dense_bf16.h"
#include "ops/dense_int8.h"
#include "ops/op_template.h"
#include "ops/workload.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using ir::Expr;
using ir::ForKind;
using schedule::Config;
using tuner::kArithOffset;
using tuner::kBufferFeatures;
using tuner::kBufferOffset;
using tuner::kKernelOffset;
using tuner::kLoopFeatures;

float lg(double x) { return static_cast<float>(std::log2(1.0 + x)); }

// Feature indices by name, so that the checks read like the layout.
int at(const std::string& name) {
  static const std::vector<std::string> names = tuner::feature_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  ADD_FAILURE() << "no feature named " << name;
  return 0;
}

ops::Workload conv(int64_t c, int64_t hw, int64_t oc, int64_t k, int64_t stride) {
  return ops::Workload{"conv2d_NCHWc.x86",
                       {{"data", {1, c, hw, hw}},
                        {"kernel", {oc, c, k, k}},
                        {"strides", {stride, stride}},
                        {"pads", {k / 2, k / 2, k / 2, k / 2}},
                        {"dilation", {1, 1}}}};
}

// One small, odd workload per registered template.
std::vector<ops::Workload> sample_workloads() {
  return {conv(16, 7, 32, 3, 1),
          ops::Workload{"depthwise_conv2d_NCHWc.x86",
                        {{"data", {1, 24, 9, 9}},
                         {"kernel", {24, 1, 3, 3}},
                         {"strides", {2, 2}},
                         {"pads", {1, 1, 1, 1}},
                         {"dilation", {1, 1}}}},
          ops::dense_workload("dense_pack.x86", {33, 40, 29}),
          ops::dense_workload("dense_nopack.x86", {7, 48, 13}),
          ops::Workload{"batch_matmul.x86", {{"a", {2, 7, 13}}, {"b", {2, 13, 20}}}},
          ops::Workload{"group_conv2d_NCHWc.x86",
                        {{"data", {1, 32, 9, 11}},
                         {"kernel", {32, 4, 3, 3}},
                         {"strides", {1, 1}},
                         {"pads", {1, 1, 1, 1}},
                         {"dilation", {1, 1}}}},
          ops::dense_int8_workload(33, 40, 29),
          ops::batch_matmul_int8_workload(2, 1, 9, 24, 29),
          ops::Workload{"conv2d_NCHWc_int8.x86",
                        {{"data", {1, 12, 9, 11}},
                         {"kernel", {20, 12, 3, 3}},
                         {"strides", {1, 1}},
                         {"pads", {1, 1, 1, 1}},
                         {"dilation", {1, 1}},
                         {"pad_value", {9}}},
                        "uint8"},
          ops::dense_bf16_workload(33, 40, 29),
          ops::Workload{"conv2d_NCHWc_bf16.x86",
                        {{"data", {1, 12, 9, 11}},
                         {"kernel", {20, 12, 3, 3}},
                         {"strides", {1, 1}},
                         {"pads", {1, 1, 1, 1}},
                         {"dilation", {1, 1}}},
                        "bfloat16"}};
}

ir::LoweredFunc lower_config(const ops::Workload& w, const Config& cfg) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  ops::Kernel k = ops::make_kernel(t, w, cfg);
  return schedule::lower(k.sch, k.args, k.name);
}

// dense_pack.x86 with its register tile set by hand.
Config dense_config(const ops::Workload& w, int64_t rows, int64_t cols, int64_t k_inner) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  const auto& d = w.get("data");
  const auto& b = w.get("weight");
  return ops::detail::KnobValues()
      .split("tile_y", d[0], {1, rows})
      .split("tile_x", b[1], {1, cols})
      .split("tile_k", d[1], {k_inner})
      .knob("tile_order", 1)
      .in(t.space(w));
}

// for (i, 0, 64) C[i] = A[i * 7] * B[i] + C[i]: every feature is known.
TEST(Features, HandBuiltScalarLoop) {
  auto A = ir::make_buffer("A", ir::DataType::f32(), {Expr(448)});
  auto B = ir::make_buffer("B", ir::DataType::f32(), {Expr(64)});
  auto C = ir::make_buffer("C", ir::DataType::f32(), {Expr(64)});
  ir::Var i("i");
  Expr value = ir::load(A, Expr(i) * 7) * ir::load(B, i) + ir::load(C, i);
  ir::LoweredFunc f{
      "k", {A, B, C}, ir::make_for(i, 0, 64, ForKind::Serial, ir::make_store(C, value, i))};
  std::vector<float> x = tuner::extract_features(f);
  ASSERT_EQ(x.size(), static_cast<size_t>(tuner::kLoweredFeatures));

  EXPECT_EQ(x[at("loop0.extent")], lg(64));
  EXPECT_EQ(x[at("loop0.serial")], 1.0f);
  EXPECT_EQ(x[at("loop0.parallel")], 0.0f);
  EXPECT_EQ(x[at("loop0.depth")], 0.0f);
  EXPECT_EQ(x[at("loop0.trip")], lg(64));
  EXPECT_EQ(x[at("loop0.stores")], lg(1));
  EXPECT_EQ(x[at("loop1.extent")], 0.0f);  // no enclosing loop: padding

  // All three buffers touch 256 bytes; C (read and written) has the most accesses.
  EXPECT_EQ(x[at("buf0.read")], 1.0f);
  EXPECT_EQ(x[at("buf0.write")], 1.0f);
  EXPECT_EQ(x[at("buf0.bytes")], lg(256));
  EXPECT_EQ(x[at("buf0.accesses")], lg(128));
  EXPECT_EQ(x[at("buf0.reuse")], lg(2));
  EXPECT_EQ(x[at("buf0.inner_stride")], lg(1));
  // Then A (stride 7) and B (stride 1), in argument order.
  EXPECT_EQ(x[at("buf1.write")], 0.0f);
  EXPECT_EQ(x[at("buf1.bytes")], lg(256));
  EXPECT_EQ(x[at("buf1.reuse")], lg(1));
  EXPECT_EQ(x[at("buf1.inner_stride")], lg(7));
  EXPECT_EQ(x[at("buf2.inner_stride")], lg(1));
  EXPECT_EQ(x[at("buf2.lanes")], 0.0f);
  EXPECT_EQ(x[at("buf3.bytes")], 0.0f);  // only three buffers

  EXPECT_EQ(x[at("arith.fadd")], lg(64));
  EXPECT_EQ(x[at("arith.fmul")], lg(64));
  EXPECT_EQ(x[at("arith.fma")], lg(64));
  EXPECT_EQ(x[at("arith.fdiv")], 0.0f);
  EXPECT_EQ(x[at("arith.loads")], lg(192));
  EXPECT_EQ(x[at("arith.stores")], lg(64));
  EXPECT_EQ(x[at("arith.flops")], lg(128));
  EXPECT_EQ(x[at("arith.scalar_flops")], lg(128));
  EXPECT_EQ(x[at("arith.vector_ops")], 0.0f);
  EXPECT_EQ(x[at("arith.int")], lg(64));  // i * 7

  EXPECT_EQ(x[at("kernel.widest_store")], 1.0f);
  EXPECT_EQ(x[at("kernel.parallel_loops")], 0.0f);
  EXPECT_EQ(x[at("kernel.loops")], lg(1));
  EXPECT_EQ(x[at("kernel.max_depth")], 1.0f);
  EXPECT_EQ(x[at("kernel.hot_trip")], lg(64));
  EXPECT_EQ(x[at("kernel.intensity")], lg(128.0 / 768.0));
}

// parallel (o, 0, 8) for (i, 0, 4)
//   C[ramp(o*64 + i*16, 1, 16)] = A[ramp(o*64*3 + i*48, 3, 16)] + x16(B[o])
TEST(Features, HandBuiltVectorNest) {
  auto A = ir::make_buffer("A", ir::DataType::f32(), {Expr(1536)});
  auto B = ir::make_buffer("B", ir::DataType::f32(), {Expr(8)});
  auto C = ir::make_buffer("C", ir::DataType::f32(), {Expr(512)});
  ir::Var o("o"), i("i");
  Expr a = ir::load(A, ir::ramp(Expr(o) * 192 + Expr(i) * 48, 3, 16));
  Expr value = a + ir::broadcast(ir::load(B, o), 16);
  ir::Stmt store = ir::make_store(C, value, ir::ramp(Expr(o) * 64 + Expr(i) * 16, 1, 16));
  ir::LoweredFunc f{
      "k",
      {A, B, C},
      ir::make_for(o, 0, 8, ForKind::Parallel, ir::make_for(i, 0, 4, ForKind::Serial, store))};
  std::vector<float> x = tuner::extract_features(f);

  EXPECT_EQ(x[at("loop0.extent")], lg(4));
  EXPECT_EQ(x[at("loop0.depth")], 1.0f);
  EXPECT_EQ(x[at("loop0.trip")], lg(32));
  EXPECT_EQ(x[at("loop1.extent")], lg(8));
  EXPECT_EQ(x[at("loop1.parallel")], 1.0f);
  EXPECT_EQ(x[at("loop1.depth")], 0.0f);

  // A and C both touch 512 floats (A's lanes 3 apart) and are accessed as often: argument
  // order decides (A first). B: 8 elements, each reused over i.
  EXPECT_EQ(x[at("buf0.read")], 1.0f);
  EXPECT_EQ(x[at("buf0.write")], 0.0f);
  EXPECT_EQ(x[at("buf0.bytes")], lg(2048));
  EXPECT_EQ(x[at("buf0.lane_stride")], lg(3));
  EXPECT_EQ(x[at("buf0.inner_stride")], lg(48));
  EXPECT_EQ(x[at("buf0.outer_bytes")], lg(256));  // one parallel task: 4 x 16 floats
  EXPECT_EQ(x[at("buf0.inner_bytes")], lg(256));
  EXPECT_EQ(x[at("buf0.lanes")], 4.0f);
  EXPECT_EQ(x[at("buf1.write")], 1.0f);
  EXPECT_EQ(x[at("buf1.bytes")], lg(2048));
  EXPECT_EQ(x[at("buf1.lane_stride")], lg(1));
  EXPECT_EQ(x[at("buf1.inner_stride")], lg(16));
  EXPECT_EQ(x[at("buf2.bytes")], lg(32));
  EXPECT_EQ(x[at("buf2.reuse")], lg(4));
  EXPECT_EQ(x[at("buf2.inner_stride")], 0.0f);  // B[o] does not move with i
  EXPECT_EQ(x[at("buf2.outer_bytes")], lg(4));

  EXPECT_EQ(x[at("arith.fadd")], lg(512));
  EXPECT_EQ(x[at("arith.fma")], 0.0f);
  EXPECT_EQ(x[at("arith.vector_ops")], lg(32 * 3));  // add, vector load, vector store
  EXPECT_EQ(x[at("kernel.widest_store")], 16.0f);
  EXPECT_EQ(x[at("kernel.hot_lanes")], 16.0f);
  EXPECT_EQ(x[at("kernel.parallel_extent")], lg(8));
  EXPECT_EQ(x[at("kernel.parallel_loops")], 1.0f);
  EXPECT_EQ(x[at("kernel.max_depth")], 2.0f);
}

TEST(Features, NamesCoverTheLayout) {
  std::vector<std::string> names = tuner::feature_names();
  ASSERT_EQ(names.size(), static_cast<size_t>(tuner::kFeatures));
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_EQ(names[tuner::kBufferOffset], "buf0.read");
  EXPECT_EQ(names[tuner::kArithOffset], "arith.fadd");
  EXPECT_EQ(names[tuner::kKernelOffset], "kernel.widest_store");
  EXPECT_EQ(names[tuner::kLoweredFeatures], "knob0.v0");
}

// Every template, fallback and random configs: fixed length, finite, the same
// floats from a second lowering, and (for distinct configs) distinct vectors.
TEST(Features, TemplatesFixedLengthFiniteDeterministic) {
  std::mt19937_64 rng(7);
  for (const ops::Workload& w : sample_workloads()) {
    SCOPED_TRACE(w.key());
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    schedule::ConfigSpace space = t.space(w);
    std::vector<Config> configs = {t.fallback(w, codegen::Target::host().isa())};
    for (int i = 0; i < 6; ++i) configs.push_back(space.random(rng));
    std::set<int64_t> indices;
    std::set<std::vector<float>> vectors;
    for (const Config& cfg : configs) {
      SCOPED_TRACE(cfg.to_json());
      std::vector<float> x = tuner::combined_features(lower_config(w, cfg), cfg);
      ASSERT_EQ(x.size(), static_cast<size_t>(tuner::kFeatures));
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_TRUE(std::isfinite(x[i])) << tuner::feature_names()[i];
      EXPECT_EQ(tuner::combined_features(lower_config(w, cfg), cfg), x);
      // A real kernel has loops, stores and float arithmetic (a parallel loop of one
      // iteration is simplified away, so parallel loops may be absent).
      EXPECT_GT(x[at("loop0.extent")], 0.0f);
      EXPECT_GT(x[at("arith.flops")], 0.0f);
      EXPECT_GT(x[at("buf0.bytes")], 0.0f);
      indices.insert(cfg.index());
      vectors.insert(x);
    }
    EXPECT_EQ(vectors.size(), indices.size());
  }
}

// The vector width of dense_pack's register tile (tile_x[2] columns) shows in
// the widest store and the hottest loop's store, and rows show in the tile.
TEST(Features, DensePackShowsVectorWidthAndTile) {
  ops::Workload w = ops::dense_workload("dense_pack.x86", {32, 64, 48});
  for (int64_t cols : {4, 8, 16, 32}) {
    for (int64_t rows : {1, 4}) {
      SCOPED_TRACE("cols " + std::to_string(cols) + " rows " + std::to_string(rows));
      Config cfg = dense_config(w, rows, cols, 4);
      std::vector<float> x = tuner::extract_features(lower_config(w, cfg));
      EXPECT_EQ(x[at("kernel.widest_store")], static_cast<float>(cols));
      EXPECT_EQ(x[at("kernel.hot_lanes")], static_cast<float>(cols));
      // The local register tile: rows x cols floats.
      EXPECT_EQ(x[at("kernel.local_bytes")], lg(4.0 * rows * cols));
      // The hottest loop is the k loop (48 / 4 iterations) with rows x 4 unrolled stores.
      EXPECT_EQ(x[at("loop0.extent")], lg(12));
      EXPECT_EQ(x[at("loop0.stores")], lg(rows * 4));
    }
  }
  // Different register tiles, different lowered features (not only knob features).
  std::vector<float> a = tuner::extract_features(lower_config(w, dense_config(w, 4, 16, 4)));
  std::vector<float> b = tuner::extract_features(lower_config(w, dense_config(w, 4, 16, 2)));
  EXPECT_NE(a, b);
}

TEST(Features, KnobFeatures) {
  ops::Workload w = ops::dense_workload("dense_pack.x86", {32, 64, 48});
  Config cfg = dense_config(w, 4, 16, 8);
  std::vector<float> k = tuner::knob_features(cfg);
  ASSERT_EQ(k.size(), static_cast<size_t>(tuner::kKnobFeatures));
  const int n = tuner::kKnobSlotFeatures;
  // tile_y = [8, 1, 4], tile_x = [4, 1, 16], tile_k = [6, 8], tile_order = 1.
  EXPECT_EQ(k[0], lg(8));
  EXPECT_EQ(k[1], lg(1));
  EXPECT_EQ(k[2], lg(4));
  EXPECT_EQ(k[3], 0.0f);
  EXPECT_EQ(k[n + 2], lg(16));
  EXPECT_EQ(k[2 * n + 0], lg(6));
  EXPECT_EQ(k[2 * n + 1], lg(8));
  EXPECT_EQ(k[3 * n + 0], lg(1));
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(k[s * n + 4], lg(static_cast<double>(cfg.choice_indices()[s])));
  for (int i = 4 * n; i < tuner::kKnobFeatures; ++i) EXPECT_EQ(k[i], 0.0f);
  // The empty config: all zeros.
  EXPECT_EQ(tuner::knob_features(Config()), std::vector<float>(tuner::kKnobFeatures, 0.0f));
  EXPECT_NE(tuner::knob_features(dense_config(w, 4, 16, 4)), k);
}

}  // namespace
}  // namespace kiln::test
