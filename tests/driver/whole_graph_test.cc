// Whole models, end to end: each model is built with the ONNX protobuf API,
// saved, imported, compiled by driver::build_module into a tar and a
// self-contained .so, run with runtime::GraphExecutor on random inputs, and
// compared with graph::run_graph (the registry's reference implementations)
// on the imported graph. Shapes are drawn at random from odd sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <regex>

#include "driver_harness.h"
#include "ir/printer.h"
#include "ops/group_conv2d_lanes.h"

namespace kiln::test {
namespace {

using Shape = std::vector<int64_t>;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

// The seed of a test's shapes, weights and inputs: fixed, but shifted by
// $KILN_DRIVER_TEST_SEED to sweep other shapes by hand.
unsigned seed(unsigned base) {
  const char* env = std::getenv("KILN_DRIVER_TEST_SEED");
  return base + (env ? static_cast<unsigned>(std::strtoul(env, nullptr, 10)) : 0u);
}

// A size drawn from odd values (and a few that are not powers of two).
int64_t odd_size(std::mt19937& rng, std::vector<int64_t> choices = {5, 7, 9, 11, 13}) {
  return choices[rng() % choices.size()];
}

std::string dim(int64_t d) { return std::to_string(d); }

std::vector<std::string> dims(const Shape& s) {
  std::vector<std::string> out;
  for (int64_t d : s) out.push_back(dim(d));
  return out;
}

E2EOptions ranges(std::map<std::string, InputRange> r) {
  E2EOptions o;
  o.ranges = std::move(r);
  return o;
}

E2EOptions shapes(frontend::InputShapes s) {
  E2EOptions o;
  o.input_shapes = std::move(s);
  return o;
}

// Kernels in mod.json.
size_t kernel_count(const E2EResult& r) { return r.mod.at("kernels").size(); }

// The kernels that compute (not only a layout transform), in order.
std::vector<nlohmann::json> compute_kernels(const E2EResult& r) {
  std::vector<nlohmann::json> out;
  for (const auto& k : r.mod.at("kernels"))
    if (k.at("op_types") != nlohmann::json({"kiln.LayoutTransform"})) out.push_back(k);
  return out;
}

// Kernels that only move data between NCHW and NCHW[x]c.
size_t transform_count(const E2EResult& r) {
  return r.mod.at("kernels").size() - compute_kernels(r).size();
}

// Whether a kernel's first operator is a convolution anchor: the ONNX Conv
// (generic schedule) or a conv template.
bool starts_with_conv(const nlohmann::json& k) {
  std::string first = k.at("op_types").at(0);
  return first == "Conv" || first.find("conv2d") != std::string::npos;
}

// How often `op` appears in a kernel's op_types.
size_t count_op(const nlohmann::json& k, const std::string& op) {
  size_t n = 0;
  for (const auto& t : k.at("op_types")) n += t == op;
  return n;
}

// ---- CNN blocks -------------------------------------------------------------------

// A ResNet basic block with a stride-2 downsample:
//   x -> conv3x3/2 -> BN -> relu -> conv3x3 -> BN --+--> add -> relu
//   x -> conv1x1/2 -> BN ----------------------------+
TEST(WholeGraph, ResNetBlockStride2) {
  std::mt19937 rng(seed(11));
  int64_t cin = odd_size(rng, {3, 5}), cout = odd_size(rng, {6, 10}), h = odd_size(rng),
          w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, cin, h, w}));
  output_any(b, "y", 4);
  conv(b, "conv1", "x", "c1", {cin, cout, 3, 3, 2, 1}, rng);
  batch_norm(b, "bn1", "c1", "b1", cout, rng);
  b.node("Relu", "relu1", {"b1"}, {"r1"});
  conv(b, "conv2", "r1", "c2", {cout, cout, 3, 3, 1, 1, 1, 1, false}, rng);
  batch_norm(b, "bn2", "c2", "b2", cout, rng);
  conv(b, "down", "x", "cd", {cin, cout, 1, 1, 2, 0, 1, 1, false}, rng);
  batch_norm(b, "bnd", "cd", "bd", cout, rng);
  b.node("Add", "add", {"b2", "bd"}, {"s"});
  b.node("Relu", "relu2", {"s"}, {"y"});
  E2EResult r = check_end_to_end(b, "resnet_block");
  // BN folds into the convs; bias, relu and the residual add fuse into them:
  // three conv kernels (plus, with NCHW[x]c layouts, layout transforms).
  EXPECT_LT(kernel_count(r), r.graph_nodes);
  std::vector<nlohmann::json> ks = compute_kernels(r);
  ASSERT_EQ(ks.size(), 3u) << r.mod.at("kernels").dump();
  for (const auto& k : ks) EXPECT_TRUE(starts_with_conv(k)) << k.dump();
  EXPECT_EQ(count_op(ks[0], "Relu") + count_op(ks[1], "Relu") + count_op(ks[2], "Relu"), 2u);
  // Activations stay in NCHW[x]c inside the block: one transform in (shared
  // by both convs reading x), one out.
  EXPECT_LE(transform_count(r), 2u) << r.mod.at("kernels").dump();
}

// A conv-relu chain: three convs with their epilogues are three computing
// kernels (layout transforms aside): each holds its conv and relu, the last
// also the residual add.
TEST(WholeGraph, ConvReluChainFusesIntoOneKernelPerConv) {
  std::mt19937 rng(seed(12));
  int64_t c = odd_size(rng, {3, 5, 7}), h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  b.output("y", dims({1, c, h, w}));
  conv(b, "conv1", "x", "c1", {c, c}, rng);
  b.node("Relu", "relu1", {"c1"}, {"r1"});
  conv(b, "conv2", "r1", "c2", {c, c}, rng);
  b.node("Relu", "relu2", {"c2"}, {"r2"});
  conv(b, "conv3", "r2", "c3", {c, c}, rng);
  b.node("Add", "add", {"c3", "r1"}, {"s"});
  b.node("Relu", "relu3", {"s"}, {"y"});
  E2EResult r = check_end_to_end(b, "conv_relu_chain");
  ASSERT_EQ(r.graph_nodes, 7u);
  std::vector<nlohmann::json> ks = compute_kernels(r);
  ASSERT_EQ(ks.size(), 3u) << r.mod.at("kernels").dump();
  // At most one layout transform in and one out.
  EXPECT_LE(kernel_count(r), 5u) << r.mod.at("kernels").dump();
  for (const auto& k : ks) {
    EXPECT_TRUE(starts_with_conv(k)) << k.dump();
    EXPECT_EQ(count_op(k, "Relu"), 1u) << k.dump();
  }
  // The bias is an Add of the template kernels (in Conv itself otherwise);
  // the residual add is one more.
  EXPECT_EQ(count_op(ks[2], "Add"), count_op(ks[0], "Add") + 1) << ks[2].dump();
}

// MobileNet: conv3x3/2 + BN + Clip(0, 6), depthwise 3x3 + BN + Clip,
// pointwise 1x1 + BN.
TEST(WholeGraph, MobileNetDepthwisePointwise) {
  std::mt19937 rng(seed(13));
  int64_t cin = 3, c = odd_size(rng, {6, 10}), c2 = odd_size(rng, {5, 7}), h = odd_size(rng),
          w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, cin, h, w}));
  output_any(b, "y", 4);
  b.init_f32("zero", {}, {0.f});
  b.init_f32("six", {}, {6.f});
  conv(b, "stem", "x", "c0", {cin, c, 3, 3, 2, 1, 1, 1, false}, rng);
  batch_norm(b, "bn0", "c0", "b0", c, rng);
  b.node("Clip", "clip0", {"b0", "zero", "six"}, {"r0"});
  conv(b, "dw", "r0", "c1", {c, c, 3, 3, 1, 1, c, 1, false}, rng);
  batch_norm(b, "bn1", "c1", "b1", c, rng);
  b.node("Clip", "clip1", {"b1", "zero", "six"}, {"r1"});
  conv(b, "pw", "r1", "c2", {c, c2, 1, 1, 1, 0, 1, 1, false}, rng);
  batch_norm(b, "bn2", "c2", "y", c2, rng);
  E2EResult r = check_end_to_end(b, "mobilenet", ranges({{"x", {-3, 3}}}));
  EXPECT_LT(kernel_count(r), r.graph_nodes);
}

// A grouped conv (groups = 2) with a non-square kernel, stride and dilation.
TEST(WholeGraph, GroupedConv) {
  std::mt19937 rng(seed(14));
  int64_t h = odd_size(rng, {9, 11, 13}), w = odd_size(rng, {9, 11, 13});
  OnnxBuilder b;
  b.input("x", dims({2, 6, h, w}));
  output_any(b, "y", 4);
  init_conv_weight(b, "w", {4, 3, 3, 2}, rng);
  init_random(b, "bias", {4}, rng);
  auto* n = b.node("Conv", "gconv", {"x", "w", "bias"}, {"c"});
  OnnxBuilder::attr_int(n, "group", 2);
  OnnxBuilder::attr_ints(n, "strides", {1, 2});
  OnnxBuilder::attr_ints(n, "pads", {1, 0, 2, 1});
  OnnxBuilder::attr_ints(n, "dilations", {2, 1});
  b.node("Relu", "relu", {"c"}, {"y"});
  E2EResult r = check_end_to_end(b, "grouped_conv");
  // The template covers it (dilation, asymmetric pads and all).
  std::vector<nlohmann::json> ks = compute_kernels(r);
  ASSERT_EQ(ks.size(), 1u) << r.mod.at("kernels").dump();
  EXPECT_EQ(ks[0].at("op_types").at(0), "group_conv2d_NCHWc.x86") << ks[0].dump();
}

// A ResNeXt bottleneck with a stride-2 projection shortcut:
//   x -> conv1x1 -> BN -> relu -> grouped conv3x3/2 (G groups of cg channels)
//     -> BN -> relu -> conv1x1 -> BN --+--> add -> relu
//   x -> conv1x1/2 -> BN -------------+
// The grouped conv runs as a group template (group_conv2d_lanes_NCHWc.x86
// where a block holds whole groups, else group_conv2d_NCHWc.x86) with its BN
// folded and its relu fused, and the whole block matches the interpreter.
TEST(WholeGraph, ResNeXtBottleneckGroupedConv) {
  std::mt19937 rng(seed(24));
  int64_t groups = std::vector<int64_t>{4, 8}[rng() % 2], cg = odd_size(rng, {3, 4, 8});
  int64_t cin = odd_size(rng, {5, 16}), width = groups * cg, cout = 2 * width;
  int64_t h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, cin, h, w}));
  output_any(b, "y", 4);
  conv(b, "reduce", "x", "c1", {cin, width, 1, 1, 1, 0, 1, 1, false}, rng);
  batch_norm(b, "bn1", "c1", "b1", width, rng);
  b.node("Relu", "relu1", {"b1"}, {"r1"});
  conv(b, "grouped", "r1", "c2", {width, width, 3, 3, 2, 1, groups, 1, false}, rng);
  batch_norm(b, "bn2", "c2", "b2", width, rng);
  b.node("Relu", "relu2", {"b2"}, {"r2"});
  conv(b, "expand", "r2", "c3", {width, cout, 1, 1, 1, 0, 1, 1, false}, rng);
  batch_norm(b, "bn3", "c3", "b3", cout, rng);
  conv(b, "down", "x", "cd", {cin, cout, 1, 1, 2, 0, 1, 1, false}, rng);
  batch_norm(b, "bnd", "cd", "bd", cout, rng);
  b.node("Add", "add", {"b3", "bd"}, {"s"});
  b.node("Relu", "relu3", {"s"}, {"y"});
  E2EResult r = check_end_to_end(b, "resnext_block");
  std::vector<nlohmann::json> ks = compute_kernels(r);
  ASSERT_EQ(ks.size(), 4u) << r.mod.at("kernels").dump();
  // Several whole groups per channel block where the block holds two or more.
  ops::reference::Conv2DAttrs ga{1, width, h, w, width, 3, 3};
  ga.groups = groups;
  const std::string grouped_template = ops::group_conv2d_lanes_applies(ga)
                                           ? "group_conv2d_lanes_NCHWc.x86"
                                           : "group_conv2d_NCHWc.x86";
  size_t grouped = 0;
  for (const auto& k : ks) {
    EXPECT_TRUE(starts_with_conv(k)) << k.dump();
    if (k.at("op_types").at(0) == grouped_template) {
      ++grouped;
      EXPECT_EQ(count_op(k, "Relu"), 1u) << k.dump();
    }
  }
  EXPECT_EQ(grouped, 1u) << r.mod.at("kernels").dump();
}

// Pooling: MaxPool and AveragePool with ceil_mode (and count_include_pad
// both ways), GlobalAveragePool, Flatten, Gemm.
TEST(WholeGraph, PoolingFlattenGemm) {
  std::mt19937 rng(seed(15));
  int64_t c = 5, h = odd_size(rng, {10, 12, 14}), w = odd_size(rng, {9, 11, 13}), classes = 7;
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  b.output("y", dims({1, classes}));
  output_any(b, "avg_excl", 4);
  conv(b, "conv", "x", "c0", {c, c}, rng);
  auto* mp = b.node("MaxPool", "maxpool", {"c0"}, {"m"});
  OnnxBuilder::attr_ints(mp, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(mp, "strides", {2, 2});
  OnnxBuilder::attr_ints(mp, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(mp, "ceil_mode", 1);
  auto* ap = b.node("AveragePool", "avgpool_incl", {"m"}, {"a"});
  OnnxBuilder::attr_ints(ap, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(ap, "strides", {2, 2});
  OnnxBuilder::attr_ints(ap, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(ap, "ceil_mode", 1);
  OnnxBuilder::attr_int(ap, "count_include_pad", 1);
  auto* ap2 = b.node("AveragePool", "avgpool_excl", {"c0"}, {"avg_excl"});
  OnnxBuilder::attr_ints(ap2, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(ap2, "strides", {2, 2});
  OnnxBuilder::attr_ints(ap2, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(ap2, "ceil_mode", 1);
  b.node("GlobalAveragePool", "gap", {"a"}, {"g"});
  OnnxBuilder::attr_int(b.node("Flatten", "flatten", {"g"}, {"f"}), "axis", 1);
  init_random(b, "fc.w", {classes, c}, rng);
  init_random(b, "fc.b", {classes}, rng);
  auto* gemm = b.node("Gemm", "fc", {"f", "fc.w", "fc.b"}, {"y"});
  OnnxBuilder::attr_int(gemm, "transB", 1);
  OnnxBuilder::attr_float(gemm, "alpha", 0.5f);
  OnnxBuilder::attr_float(gemm, "beta", 2.0f);
  check_end_to_end(b, "pooling");
}

// A classifier at batch 3: the dense's register tile has several rows, so
// its fallback takes whole-vector column blocks and a partial last one (40
// classes: 32 + 8 as AVX-512 code, 16 + 16 + 8 as AVX2), not 2.5 vectors.
TEST(WholeGraph, ClassifierAtBatchThree) {
  std::mt19937 rng(seed(35));
  int64_t c = 24, h = odd_size(rng, {5, 7}), w = odd_size(rng, {6, 8}), classes = 40;
  OnnxBuilder b;
  b.input("x", {"batch", dim(c), dim(h), dim(w)});
  b.output("y", {"batch", dim(classes)});
  conv(b, "conv", "x", "c0", {c, c}, rng);
  b.node("GlobalAveragePool", "gap", {"c0"}, {"g"});
  OnnxBuilder::attr_int(b.node("Flatten", "flatten", {"g"}, {"f"}), "axis", 1);
  init_random(b, "fc.w", {classes, c}, rng);
  init_random(b, "fc.b", {classes}, rng);
  OnnxBuilder::attr_int(b.node("Gemm", "fc", {"f", "fc.w", "fc.b"}, {"y"}), "transB", 1);
  check_end_to_end(b, "classifier", shapes({{"x", {3, c, h, w}}}));
}

// PyTorch's ceil_mode pooling of x [1, C, H, W] (kernel 2, stride 2, pad 1,
// dilation dh along H): a window starts inside the input or its left padding,
// taps outside the input are skipped (AveragePool: count_include_pad 0).
graph::Initializer ceil_mode_pool_reference(const graph::Initializer& x, int64_t dh, bool max) {
  const Shape& s = x.type.shape;
  int64_t C = s[1], H = s[2], W = s[3], k = 2, st = 2, p = 1;
  auto out_size = [&](int64_t in, int64_t d) {
    int64_t extent = (k - 1) * d + 1, o = (in + 2 * p - extent + st - 1) / st + 1;
    return (o - 1) * st >= in + p ? o - 1 : o;
  };
  int64_t OH = out_size(H, dh), OW = out_size(W, 1);
  std::vector<float> in = x.as<float>(), out;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        float acc = max ? -INFINITY : 0.f;
        int n = 0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            int64_t h = oh * st - p + i * dh, w = ow * st - p + j;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            float v = in[static_cast<size_t>((c * H + h) * W + w)];
            acc = max ? std::max(acc, v) : acc + v;
            ++n;
          }
        out.push_back(max ? acc : acc / static_cast<float>(n));
      }
  graph::Initializer r;
  r.type.dtype = "float32";
  r.type.shape = {1, C, OH, OW};
  r.data.resize(out.size() * sizeof(float));
  std::memcpy(r.data.data(), out.data(), r.data.size());
  return r;
}

// Pooling with ceil_mode where the last window would start in the right
// padding (kernel 2, stride 2, pad 1 on an odd axis): PyTorch, ONNX since 1.16
// and kiln's operators drop that window; ONNX 1.12's shape inference kept it
// until the frontend lowered the end pad (frontend/pool_ceil_mode.h). Both
// axes odd, with and without dilation.
TEST(WholeGraph, PoolCeilModeWindowStartingInPadding) {
  for (int dilated = 0; dilated < 2; ++dilated) {
    SCOPED_TRACE(dilated ? "dilated" : "plain");
    OnnxBuilder b;
    b.input("x", dims({1, 3, 7, 9}));
    output_any(b, "y", 4);
    output_any(b, "z", 4);
    for (const char* op : {"MaxPool", "AveragePool"}) {
      bool max = op == std::string("MaxPool");
      auto* n = b.node(op, op, {"x"}, {max ? "y" : "z"});
      OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
      OnnxBuilder::attr_ints(n, "strides", {2, 2});
      OnnxBuilder::attr_ints(n, "pads", {1, 1, 1, 1});
      OnnxBuilder::attr_int(n, "ceil_mode", 1);
      // AveragePool's dilations need opset 19; MaxPool has them since 10.
      if (dilated && max) OnnxBuilder::attr_ints(n, "dilations", {2, 1});
    }
    std::string name = dilated ? "pool_ceil_pad_dilated" : "pool_ceil_pad";
    check_end_to_end(b, name);
    // The imported graph against PyTorch's rule on the original pads.
    ScratchDir dir;
    write_bytes(dir.file(name + ".onnx"), b.bytes());
    graph::Graph g = frontend::import_onnx(dir.file(name + ".onnx"), {});
    std::mt19937 rng(seed(40) + unsigned(dilated));
    graph::Initializer x = random_input(*g.type_of("x"), InputRange{}, rng);
    auto got = graph::run_graph(g, {{"x", x}});
    int64_t dh = dilated ? 2 : 1;
    expect_close(ceil_mode_pool_reference(x, dh, true), to_ndarray(got.at("y")), "MaxPool", 0);
    expect_close(ceil_mode_pool_reference(x, 1, false), to_ndarray(got.at("z")), "AveragePool",
                 1e-6);
    // H 7: ONNX 1.12 gave 5 rows (4 with dilation 2, whose last window starts in
    // the data); W 9: 6 columns, the last starting in the padding.
    EXPECT_EQ(got.at("y").type.shape, (Shape{1, 3, 4, 5}));
    EXPECT_EQ(got.at("z").type.shape, (Shape{1, 3, 4, 5}));
  }
}

// SqueezeNet's fire module: squeeze 1x1 + relu, then expand 1x1 and 3x3
// branches (+ relu) concatenated on channels.
TEST(WholeGraph, SqueezeNetFireConcat) {
  std::mt19937 rng(seed(16));
  int64_t cin = 6, s = 3, e1 = 5, e3 = 7, h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", {"batch", dim(cin), dim(h), dim(w)});
  output_any(b, "y", 4);
  conv(b, "squeeze", "x", "sq", {cin, s, 1, 1, 1, 0}, rng);
  b.node("Relu", "squeeze_relu", {"sq"}, {"sr"});
  conv(b, "expand1", "sr", "e1", {s, e1, 1, 1, 1, 0}, rng);
  b.node("Relu", "expand1_relu", {"e1"}, {"r1"});
  conv(b, "expand3", "sr", "e3", {s, e3, 3, 3, 1, 1}, rng);
  b.node("Relu", "expand3_relu", {"e3"}, {"r3"});
  OnnxBuilder::attr_int(b.node("Concat", "concat", {"r1", "r3"}, {"y"}), "axis", 1);
  // The batch axis is dynamic: bound at import.
  check_end_to_end(b, "fire", shapes({{"x", {3, cin, h, w}}}));
}

// A fire module whose branches share a channel block: the concat runs on the
// blocked tensors, and only the module's input and output change layout.
TEST(WholeGraph, FireConcatStaysBlocked) {
  std::mt19937 rng(seed(17));
  int64_t cin = 32, s = 16, e = 16, h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, cin, h, w}));
  output_any(b, "y", 4);
  conv(b, "squeeze", "x", "sq", {cin, s, 1, 1, 1, 0}, rng);
  b.node("Relu", "squeeze_relu", {"sq"}, {"sr"});
  conv(b, "expand1", "sr", "e1", {s, e, 1, 1, 1, 0}, rng);
  b.node("Relu", "expand1_relu", {"e1"}, {"r1"});
  conv(b, "expand3", "sr", "e3", {s, e, 3, 3, 1, 1}, rng);
  b.node("Relu", "expand3_relu", {"e3"}, {"r3"});
  OnnxBuilder::attr_int(b.node("Concat", "concat", {"r1", "r3"}, {"c"}), "axis", 1);
  conv(b, "next", "c", "y", {2 * e, s, 1, 1, 1, 0}, rng);
  E2EResult r = check_end_to_end(b, "fire_blocked");
  EXPECT_LE(transform_count(r), 2u) << r.mod.at("kernels").dump();
  for (const auto& k : compute_kernels(r))
    EXPECT_EQ(count_op(k, "kiln.LayoutTransform"), 0u) << k.dump();
}

// ConvTranspose with stride 2, pads and output_padding, then bias-free relu.
TEST(WholeGraph, ConvTranspose) {
  std::mt19937 rng(seed(17));
  int64_t cin = 5, cout = 3, h = odd_size(rng, {5, 7}), w = odd_size(rng, {6, 9});
  OnnxBuilder b;
  b.input("x", dims({1, cin, h, w}));
  output_any(b, "y", 4);
  init_conv_weight(b, "w", {cin, cout, 3, 4}, rng);
  init_random(b, "bias", {cout}, rng);
  auto* n = b.node("ConvTranspose", "deconv", {"x", "w", "bias"}, {"d"});
  OnnxBuilder::attr_ints(n, "strides", {2, 3});
  OnnxBuilder::attr_ints(n, "pads", {1, 0, 1, 2});
  OnnxBuilder::attr_ints(n, "output_padding", {1, 2});
  b.node("Relu", "relu", {"d"}, {"y"});
  check_end_to_end(b, "conv_transpose");
}

// Activation chains fused into a conv: HardSwish, HardSigmoid, SiLU.
TEST(WholeGraph, HardSwishHardSigmoidSiLU) {
  std::mt19937 rng(seed(18));
  int64_t c = 5, h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  b.output("y", dims({1, c, h, w}));
  conv(b, "conv", "x", "c0", {c, c}, rng);
  b.node("HardSwish", "hswish", {"c0"}, {"h1"});
  auto* hs = b.node("HardSigmoid", "hsig", {"h1"}, {"h2"});
  OnnxBuilder::attr_float(hs, "alpha", 0.3f);
  OnnxBuilder::attr_float(hs, "beta", 0.4f);
  b.node("Mul", "gate", {"c0", "h2"}, {"g"});
  b.node("Sigmoid", "sig", {"g"}, {"s"});
  b.node("Mul", "silu", {"g", "s"}, {"y"});
  E2EResult r = check_end_to_end(b, "activations", ranges({{"x", {-4, 4}}}));
  // c0 has two readers, both in HardSwish..gate: a diamond, joined to the
  // conv's epilogue. g's diamond (SiLU) shares its group with the transform
  // of the graph output back to NCHW, which an epilogue cannot take.
  std::vector<nlohmann::json> k = compute_kernels(r);
  ASSERT_EQ(k.size(), 2u) << r.mod.at("kernels").dump();
  EXPECT_EQ(k[0].at("op_types"),
            nlohmann::json({"conv2d_NCHWc.x86", "Add", "HardSwish", "HardSigmoid", "Mul"}));
}

// ---- transformer pieces --------------------------------------------------------------

// ConvNeXt's MLP: MatMul on a 4-D channels-last activation [1, H, W, C]
// (dense_pack writes [H*W, N]), a bias and an Erf-GELU. The epilogue is fused
// and computed in the template's flat [H*W, N] space: fused through the
// reshape's div/mod instead, the whole output became the "register tile"
// and LLVM took minutes on one kernel.
TEST(WholeGraph, MatMulOnChannelsLastActivation) {
  std::mt19937 rng(seed(31));
  int64_t h = odd_size(rng, {5, 7, 9}), w = odd_size(rng, {3, 5, 7}), c = 12, n = 20;
  OnnxBuilder b;
  b.input("x", dims({1, h, w, c}));
  b.output("y", dims({1, h, w, n}));
  init_random(b, "W", {c, n}, rng);
  init_random(b, "bias", {n}, rng);
  b.init_f32("two", {}, {2.0f});
  b.init_f32("one", {}, {1.0f});
  b.init_f32("half", {}, {0.5f});
  b.node("MatMul", "mm", {"x", "W"}, {"m"});
  b.node("Add", "add_bias", {"m", "bias"}, {"a"});
  b.node("Div", "div", {"a", "two"}, {"d"});
  b.node("Erf", "erf", {"d"}, {"e"});
  b.node("Add", "add_one", {"e", "one"}, {"e1"});
  b.node("Mul", "mul", {"a", "e1"}, {"g"});
  b.node("Mul", "gelu", {"g", "half"}, {"y"});
  E2EResult r = check_end_to_end(b, "matmul_channels_last");
  size_t dense_ops = 0;
  for (const auto& k : r.mod.at("kernels"))
    if (k.at("workload").get<std::string>().rfind("dense_pack.x86", 0) == 0)
      dense_ops = k.at("op_types").size();
  // The bias add and the GELU-like tail (a diamond: the biased value has two
  // readers, both in the tail) are the MatMul's epilogue, in its flat space.
  EXPECT_EQ(dense_ops, 7u) << r.mod.at("kernels").dump();
  EXPECT_EQ(kernel_count(r), 1u) << r.mod.at("kernels").dump();
  // Every local buffer of every kernel is a register tile, not an output.
  ScratchDir dir;
  write_bytes(dir.file("m.onnx"), b.bytes());
  driver::BuiltModule m = driver::build_module(frontend::import_onnx(dir.file("m.onnx")), {});
  std::regex local(R"(allocate \S+\[float32 \* (\d+)\] local)");
  for (const ir::LoweredFunc& f : m.funcs) {
    std::string text = ir::to_string(f.body);
    for (std::sregex_iterator it(text.begin(), text.end(), local), end; it != end; ++it)
      EXPECT_LT(std::stoll((*it)[1]), h * w * n) << f.name << " keeps a whole output local";
  }
}

// A Linear with PyTorch's exported GELU (Div by sqrt 2, Erf, Add, Mul, Mul):
// fuse_gelu makes it one Gelu, which joins the MatMul's epilogue with the
// bias, so the whole layer is one kernel (the pattern reads the MatMul's
// value twice, which ended the group before). Rows that 8 does not divide.
TEST(WholeGraph, LinearGeluIsOneKernel) {
  std::mt19937 rng(seed(37));
  int64_t rows = odd_size(rng, {49, 51, 53}), c = 24, n = 40;
  OnnxBuilder b;
  b.input("x", dims({rows, c}));
  b.output("y", dims({rows, n}));
  init_random(b, "W", {c, n}, rng);
  init_random(b, "bias", {n}, rng);
  b.init_f32("sqrt2", {}, {std::sqrt(2.0f)});
  b.init_f32("one", {}, {1.0f});
  b.init_f32("half", {}, {0.5f});
  b.node("MatMul", "mm", {"x", "W"}, {"m"});
  b.node("Add", "add_bias", {"m", "bias"}, {"a"});
  b.node("Div", "div", {"a", "sqrt2"}, {"d"});
  b.node("Erf", "erf", {"d"}, {"e"});
  b.node("Add", "add_one", {"e", "one"}, {"e1"});
  b.node("Mul", "mul", {"a", "e1"}, {"g"});
  b.node("Mul", "gelu", {"g", "half"}, {"y"});
  E2EResult r = check_end_to_end(b, "linear_gelu");
  ASSERT_EQ(kernel_count(r), 1u) << r.mod.at("kernels").dump();
  std::vector<std::string> ops = r.mod.at("kernels")[0].at("op_types");
  EXPECT_EQ(ops, (std::vector<std::string>{"dense_pack.x86", "Add", "Gelu"}));
}

// One encoder layer: multi-head self-attention (MatMul, Reshape, Transpose,
// Div by sqrt(d), Softmax), residual + LayerNormalization, an Erf-GELU MLP,
// residual. Batch and sequence axes are dynamic, bound at import.
TEST(WholeGraph, AttentionBlock) {
  std::mt19937 rng(seed(19));
  const int64_t heads = 2, dh = 3, d = heads * dh, ff = 10;
  const int64_t batch = 2, seq = odd_size(rng, {5, 7});
  OnnxBuilder b;
  b.input("x", {"batch", "seq", dim(d)});
  b.output("y", {"batch", "seq", dim(d)});
  float s = 1.f / std::sqrt(static_cast<float>(d));
  for (const char* p : {"q", "k", "v", "o"}) {
    init_random(b, std::string("W") + p, {d, d}, rng, -s, s);
    init_random(b, std::string("b") + p, {d}, rng, -0.1f, 0.1f);
  }
  b.init_i64("heads_shape", {4}, {0, 0, heads, dh});  // 0 copies the input's axis
  b.init_i64("merge_shape", {3}, {0, 0, -1});
  b.init_f32("sqrt_dh", {}, {std::sqrt(static_cast<float>(dh))});
  for (const char* p : {"q", "k", "v"}) {
    std::string t = p;
    b.node("MatMul", "mm_" + t, {"x", "W" + t}, {t + "0"});
    b.node("Add", "add_" + t, {t + "0", "b" + t}, {t + "1"});
    b.node("Reshape", "split_heads_" + t, {t + "1", "heads_shape"}, {t + "2"});
  }
  OnnxBuilder::attr_ints(b.node("Transpose", "tq", {"q2"}, {"q3"}), "perm", {0, 2, 1, 3});
  OnnxBuilder::attr_ints(b.node("Transpose", "tk", {"k2"}, {"k3"}), "perm", {0, 2, 3, 1});
  OnnxBuilder::attr_ints(b.node("Transpose", "tv", {"v2"}, {"v3"}), "perm", {0, 2, 1, 3});
  b.node("MatMul", "scores", {"q3", "k3"}, {"sc"});
  b.node("Div", "scale", {"sc", "sqrt_dh"}, {"scs"});
  OnnxBuilder::attr_int(b.node("Softmax", "softmax", {"scs"}, {"p"}), "axis", -1);
  b.node("MatMul", "context", {"p", "v3"}, {"ctx"});
  OnnxBuilder::attr_ints(b.node("Transpose", "tctx", {"ctx"}, {"ctx2"}), "perm", {0, 2, 1, 3});
  b.node("Reshape", "merge_heads", {"ctx2", "merge_shape"}, {"ctx3"});
  b.node("MatMul", "mm_o", {"ctx3", "Wo"}, {"o0"});
  b.node("Add", "add_o", {"o0", "bo"}, {"o1"});
  b.node("Add", "residual1", {"o1", "x"}, {"res1"});
  init_random(b, "ln1.g", {d}, rng, 0.5f, 1.5f);
  init_random(b, "ln1.b", {d}, rng, -0.5f, 0.5f);
  auto* ln = b.node("LayerNormalization", "ln1", {"res1", "ln1.g", "ln1.b"}, {"h"});
  OnnxBuilder::attr_int(ln, "axis", -1);
  OnnxBuilder::attr_float(ln, "epsilon", 1e-5f);
  init_random(b, "W1", {d, ff}, rng, -s, s);
  init_random(b, "b1", {ff}, rng, -0.1f, 0.1f);
  init_random(b, "W2", {ff, d}, rng, -0.3f, 0.3f);
  init_random(b, "b2", {d}, rng, -0.1f, 0.1f);
  b.init_f32("sqrt2", {}, {std::sqrt(2.f)});
  b.init_f32("one", {}, {1.f});
  b.init_f32("half", {}, {0.5f});
  b.node("MatMul", "mm1", {"h", "W1"}, {"f0"});
  b.node("Add", "add1", {"f0", "b1"}, {"f1"});
  b.node("Div", "gelu_div", {"f1", "sqrt2"}, {"g0"});
  b.node("Erf", "gelu_erf", {"g0"}, {"g1"});
  b.node("Add", "gelu_add", {"g1", "one"}, {"g2"});
  b.node("Mul", "gelu_mul", {"f1", "g2"}, {"g3"});
  b.node("Mul", "gelu_half", {"g3", "half"}, {"g4"});
  b.node("MatMul", "mm2", {"g4", "W2"}, {"f2"});
  b.node("Add", "add2", {"f2", "b2"}, {"f3"});
  b.node("Add", "residual2", {"f3", "h"}, {"y"});
  E2EResult r = check_end_to_end(b, "attention", shapes({{"x", {batch, seq, d}}}));
  // Bias adds, the scale, GELU and residuals fuse into the MatMuls.
  EXPECT_LT(kernel_count(r), r.graph_nodes / 2) << r.mod.at("kernels").dump();
}

// Token and position embeddings: Gather rows of a table by int64 ids
// (negative ids count from the end), plus a position table.
TEST(WholeGraph, GatherEmbedding) {
  std::mt19937 rng(seed(20));
  const int64_t vocab = 13, d = 5, seq = odd_size(rng, {7, 9});
  OnnxBuilder b;
  b.input("ids", {"batch", dim(seq)}, onnx::TensorProto::INT64);
  b.output("y", {"batch", dim(seq), dim(d)});
  init_random(b, "emb", {vocab, d}, rng);
  init_random(b, "pos", {seq, d}, rng);
  OnnxBuilder::attr_int(b.node("Gather", "lookup", {"emb", "ids"}, {"e"}), "axis", 0);
  b.node("Add", "add_pos", {"e", "pos"}, {"y"});
  E2EOptions opt = shapes({{"ids", {3, seq}}});
  opt.ranges = {{"ids", {-vocab, vocab}}};
  check_end_to_end(b, "embedding", opt);
}

// Pad (reflect) -> Resize nearest by scales (asymmetric, floor), and
// Resize linear to odd sizes (half_pixel) from the padded tensor.
TEST(WholeGraph, ResizeAndReflectPad) {
  std::mt19937 rng(seed(21));
  const int64_t c = 3, h = odd_size(rng, {5, 7}), w = odd_size(rng, {6, 9});
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  output_any(b, "up", 4);
  output_any(b, "lin", 4);
  b.init_i64("pads", {8}, {0, 0, 1, 2, 0, 0, 2, 1});
  attr_string(b.node("Pad", "pad", {"x", "pads"}, {"p"}), "mode", "reflect");
  b.init_f32("scales", {4}, {1.f, 1.f, 2.f, 3.f});
  auto* rn = b.node("Resize", "resize_nearest", {"p", "", "scales"}, {"up"});
  attr_string(rn, "mode", "nearest");
  attr_string(rn, "coordinate_transformation_mode", "asymmetric");
  attr_string(rn, "nearest_mode", "floor");
  b.init_i64("sizes", {4}, {1, c, 2 * h + 1, w + 4});
  auto* rl = b.node("Resize", "resize_linear", {"p", "", "", "sizes"}, {"lin"});
  attr_string(rl, "mode", "linear");
  check_end_to_end(b, "resize_pad");
}

// Bilinear upsamples of a blocked convolution's output: one read by another
// convolution (its fused kernel writes NCHW[b]c: one stage), one a graph
// output (NCHW: the rows interpolated first, then whole rows; sizes the
// scales round down, unequal scales).
TEST(WholeGraph, BilinearUpsampleBetweenConvsAndToAnOutput) {
  std::mt19937 rng(seed(23));
  const int64_t c = 16, h = odd_size(rng, {5, 7}), w = odd_size(rng, {6, 9});
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  output_any(b, "y", 4);
  output_any(b, "head", 4);
  conv(b, "conv1", "x", "c1", {c, c}, rng);
  b.init_f32("up4", {4}, {1.f, 1.f, 4.f, 4.f});
  attr_string(b.node("Resize", "upsample_mid", {"c1", "", "up4"}, {"u"}), "mode", "linear");
  conv(b, "conv2", "u", "y", {c, c}, rng);
  b.init_f32("up_head", {4}, {1.f, 1.f, 3.f, 5.5f});
  attr_string(b.node("Resize", "upsample_head", {"c1", "", "up_head"}, {"head"}), "mode", "linear");
  check_end_to_end(b, "bilinear_upsample");
}

// ---- shape manipulation and logic ------------------------------------------------------

// Split -> Slice (stride 2, and reversed with a negative step) ->
// Squeeze/Unsqueeze -> Expand -> Cast to int64 -> Equal -> Where.
TEST(WholeGraph, SplitSliceSqueezeExpandWhereCast) {
  std::mt19937 rng(seed(22));
  const int64_t w = odd_size(rng, {5, 7, 9});
  OnnxBuilder b;
  b.input("x", dims({1, 6, w}));
  output_any(b, "sel", 3);
  output_any(b, "ints", 3, onnx::TensorProto::INT64);
  output_any(b, "rev", 3);
  b.init_i64("split", {2}, {2, 4});
  OnnxBuilder::attr_int(b.node("Split", "split", {"x", "split"}, {"a", "bb"}), "axis", 1);
  b.init_i64("s_starts", {1}, {1});
  b.init_i64("s_ends", {1}, {kInt64Max});
  b.init_i64("s_axes", {1}, {1});
  b.init_i64("s_steps", {1}, {2});
  b.node("Slice", "slice_stride", {"bb", "s_starts", "s_ends", "s_axes", "s_steps"}, {"s"});
  b.node("Add", "add_halves", {"a", "s"}, {"ab"});  // [1, 2, w]
  b.init_i64("axes0", {1}, {0});
  b.init_i64("axes1", {1}, {1});
  b.node("Squeeze", "squeeze", {"ab", "axes0"}, {"sq"});      // [2, w]
  b.node("Unsqueeze", "unsqueeze", {"sq", "axes1"}, {"un"});  // [2, 1, w]
  b.init_i64("expand_shape", {3}, {2, 3, 1});
  b.node("Expand", "expand", {"un", "expand_shape"}, {"ex"});  // [2, 3, w]
  b.init_f32("three", {}, {3.f});
  b.node("Mul", "times3", {"ex", "three"}, {"m"});
  OnnxBuilder::attr_int(b.node("Cast", "to_int", {"m"}, {"ints"}), "to", onnx::TensorProto::INT64);
  b.init_i64("zero_i", {}, {0});
  b.node("Equal", "is_zero", {"ints", "zero_i"}, {"z"});
  b.node("Neg", "neg", {"ex"}, {"nx"});
  b.node("Where", "where", {"z", "nx", "ex"}, {"sel"});
  b.init_i64("r_starts", {1}, {-1});
  b.init_i64("r_ends", {1}, {kInt64Min});
  b.init_i64("r_axes", {1}, {2});
  b.init_i64("r_steps", {1}, {-2});
  b.node("Slice", "slice_reverse", {"x", "r_starts", "r_ends", "r_axes", "r_steps"}, {"rev"});
  check_end_to_end(b, "shape_ops", ranges({{"x", {-2, 2}}}));
}

// ReduceMean / ReduceSum / ReduceMax with and without keepdims, and a
// broadcast subtraction of the mean.
TEST(WholeGraph, Reductions) {
  std::mt19937 rng(seed(23));
  const int64_t n = 2, c = odd_size(rng, {3, 5}), h = odd_size(rng), w = 3;
  OnnxBuilder b;
  b.input("x", dims({n, c, h, w}));
  output_any(b, "centered", 4);
  output_any(b, "sum", 3);
  output_any(b, "max", 4);
  auto* rm = b.node("ReduceMean", "mean", {"x"}, {"mu"});
  OnnxBuilder::attr_ints(rm, "axes", {1, 3});
  OnnxBuilder::attr_int(rm, "keepdims", 1);
  b.node("Sub", "center", {"x", "mu"}, {"centered"});
  b.init_i64("sum_axes", {1}, {2});
  OnnxBuilder::attr_int(b.node("ReduceSum", "sum", {"x", "sum_axes"}, {"sum"}), "keepdims", 0);
  auto* rx = b.node("ReduceMax", "max", {"x"}, {"mx"});
  OnnxBuilder::attr_ints(rx, "axes", {-1});
  OnnxBuilder::attr_int(rx, "keepdims", 1);
  b.node("Relu", "relu_max", {"mx"}, {"max"});
  check_end_to_end(b, "reductions");
}

// ---- graph structure -------------------------------------------------------------------

// An output that is also read by later nodes: the executor must hand back
// the intermediate value, not storage reused by what follows.
TEST(WholeGraph, OutputAlsoReadByAnotherNode) {
  std::mt19937 rng(seed(24));
  const int64_t c = 3, h = odd_size(rng), w = odd_size(rng);
  OnnxBuilder b;
  b.input("x", dims({1, c, h, w}));
  b.output("mid", dims({1, c, h, w}));
  b.output("y", dims({1, c, h, w}));
  conv(b, "conv", "x", "c0", {c, c}, rng);
  b.node("Relu", "relu", {"c0"}, {"mid"});
  b.init_f32("k", {}, {0.75f});
  b.node("Mul", "scale", {"mid", "k"}, {"m1"});
  b.node("Tanh", "tanh", {"m1"}, {"m2"});
  conv(b, "conv2", "m2", "c1", {c, c}, rng);
  b.node("Add", "add", {"c1", "mid"}, {"y"});
  check_end_to_end(b, "output_also_read");
}

// Two inputs, two outputs: a dense layer and an elementwise/reduction path
// that reads both inputs.
TEST(WholeGraph, TwoInputsTwoOutputs) {
  std::mt19937 rng(seed(25));
  const int64_t m = odd_size(rng, {3, 5}), k = odd_size(rng, {7, 9}), n = 5;
  OnnxBuilder b;
  b.input("a", dims({m, k}));
  b.input("b", dims({k, n}));
  b.output("prod", dims({m, n}));
  output_any(b, "stat", 2);
  init_random(b, "bias", {n}, rng);
  b.node("MatMul", "mm", {"a", "b"}, {"p0"});
  b.node("Add", "add_bias", {"p0", "bias"}, {"prod"});
  b.node("Sigmoid", "sig", {"a"}, {"sa"});
  b.node("Mul", "sq", {"sa", "sa"}, {"sa2"});
  b.init_i64("ax", {1}, {1});
  OnnxBuilder::attr_int(b.node("ReduceSum", "rs", {"sa2", "ax"}, {"r"}), "keepdims", 1);
  b.node("Transpose", "tb", {"b"}, {"bt"});       // [n, k]
  b.node("ReduceMax", "rmax", {"bt"}, {"bmax"});  // keepdims 1, all axes: [1, 1]
  b.node("Sub", "stat", {"r", "bmax"}, {"stat"});
  check_end_to_end(b, "two_in_two_out");
}

}  // namespace
}  // namespace kiln::test
