// 3-D Conv, MaxPool and AveragePool (NCDHW) end to end: each runs as 2-D
// kernels after graph::passes::lower_3d_windows, and the package must match
// the interpreter's 3-D reference over strides, pads, dilations, groups,
// kernel depths 1..3, auto_pad, ceil_mode and count_include_pad, on sizes
// that the kernels' tiles do not divide.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "driver_harness.h"

namespace kiln::test {
namespace {

using Ints = std::vector<int64_t>;

std::vector<std::string> dims(const Ints& s) {
  std::vector<std::string> d;
  for (int64_t v : s) d.push_back(std::to_string(v));
  return d;
}

struct Conv3d {
  Ints x, w;  // [N, C, D, H, W], [M, C / group, KD, KH, KW]
  Ints strides = {1, 1, 1}, dilations = {1, 1, 1}, pads = {0, 0, 0, 0, 0, 0};
  int64_t group = 1;
  bool bias = true;
  std::string auto_pad;
};

// Returns the number of kernels on a 2-D convolution template.
size_t check_conv(const Conv3d& c, const std::string& name) {
  SCOPED_TRACE(name);
  std::mt19937 rng(7);
  OnnxBuilder b;
  b.input("x", dims(c.x));
  output_any(b, "y", 5);
  b.init_f32("w", c.w, uniform(numel(c.w), rng));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    b.init_f32("b", {c.w[0]}, uniform(static_cast<size_t>(c.w[0]), rng));
    ins.push_back("b");
  }
  auto* n = b.node("Conv", "conv", ins, {"y"});
  OnnxBuilder::attr_ints(n, "kernel_shape", {c.w[2], c.w[3], c.w[4]});
  OnnxBuilder::attr_ints(n, "strides", c.strides);
  OnnxBuilder::attr_ints(n, "dilations", c.dilations);
  if (c.auto_pad.empty())
    OnnxBuilder::attr_ints(n, "pads", c.pads);
  else
    attr_string(n, "auto_pad", c.auto_pad);
  OnnxBuilder::attr_int(n, "group", c.group);
  E2EResult r = check_end_to_end(b, name);
  // The taps run on the 2-D convolution templates, not a generic loop nest.
  size_t templated = 0;
  for (const auto& k : r.mod.at("kernels"))
    templated += k.at("workload").get<std::string>().find("conv2d") != std::string::npos;
  EXPECT_GE(templated, 1u);
  return templated;
}

TEST(Windows3d, ConvPlain) { check_conv({{1, 3, 5, 7, 9}, {8, 3, 3, 3, 3}}, "conv_plain"); }

TEST(Windows3d, ConvPaddedStridedDilated) {
  Conv3d c{{2, 4, 9, 10, 11}, {6, 4, 3, 3, 2}};
  c.pads = {1, 2, 0, 2, 1, 1};
  c.strides = {2, 1, 3};
  c.dilations = {2, 1, 2};
  check_conv(c, "conv_padded_strided_dilated");
}

TEST(Windows3d, ConvKernelDepthsOneAndTwo) {
  Conv3d c1{{1, 5, 4, 6, 7}, {7, 5, 1, 3, 3}};
  c1.pads = {0, 1, 1, 0, 1, 1};
  check_conv(c1, "conv_kd1");
  Conv3d c2{{1, 5, 6, 6, 7}, {7, 5, 2, 1, 3}};
  c2.strides = {3, 1, 1};
  c2.pads = {1, 0, 0, 1, 0, 0};
  c2.bias = false;
  check_conv(c2, "conv_kd2");
}

TEST(Windows3d, ConvGroupedAndDepthwise) {
  Conv3d g{{1, 6, 5, 8, 8}, {9, 2, 3, 3, 3}};
  g.group = 3;
  g.pads = {1, 1, 1, 1, 1, 1};
  check_conv(g, "conv_grouped");
  Conv3d dw{{1, 8, 5, 9, 7}, {8, 1, 3, 3, 3}};
  dw.group = 8;
  dw.pads = {1, 1, 1, 1, 1, 1};
  dw.strides = {2, 2, 2};
  check_conv(dw, "conv_depthwise");
}

TEST(Windows3d, ConvAutoPad) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    Conv3d c{{1, 3, 6, 7, 5}, {4, 3, 2, 3, 2}};
    c.auto_pad = mode;
    c.strides = {2, 2, 1};
    check_conv(c, std::string("conv_") + mode);
  }
}

// A depth pad wider than the kernel: the first output depth reads only
// padding (its tap is dropped), and it is the bias alone.
TEST(Windows3d, ConvTapsInPaddingOnly) {
  Conv3d c{{1, 2, 3, 5, 5}, {3, 2, 2, 3, 3}};
  c.pads = {3, 1, 1, 3, 1, 1};
  check_conv(c, "conv_pad_only_taps");
}

struct ConvTranspose3d {
  Ints x, w;  // [N, C, D, H, W], [C, M / group, KD, KH, KW]
  Ints strides = {1, 1, 1}, dilations = {1, 1, 1}, pads = {0, 0, 0, 0, 0, 0};
  Ints output_padding, output_shape;
  int64_t group = 1;
  bool bias = true;
  std::string auto_pad;
};

void check_conv_transpose(const ConvTranspose3d& c, const std::string& name) {
  SCOPED_TRACE(name);
  std::mt19937 rng(9);
  OnnxBuilder b;
  b.input("x", dims(c.x));
  output_any(b, "y", 5);
  b.init_f32("w", c.w, uniform(numel(c.w), rng));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    b.init_f32("b", {c.w[1] * c.group}, uniform(static_cast<size_t>(c.w[1] * c.group), rng));
    ins.push_back("b");
  }
  auto* n = b.node("ConvTranspose", "deconv", ins, {"y"});
  OnnxBuilder::attr_ints(n, "strides", c.strides);
  OnnxBuilder::attr_ints(n, "dilations", c.dilations);
  if (!c.auto_pad.empty())
    attr_string(n, "auto_pad", c.auto_pad);
  else if (c.output_shape.empty())
    OnnxBuilder::attr_ints(n, "pads", c.pads);
  if (!c.output_padding.empty()) OnnxBuilder::attr_ints(n, "output_padding", c.output_padding);
  if (!c.output_shape.empty()) OnnxBuilder::attr_ints(n, "output_shape", c.output_shape);
  OnnxBuilder::attr_int(n, "group", c.group);
  check_end_to_end(b, name);
}

TEST(Windows3d, ConvTranspose) {
  check_conv_transpose({{1, 3, 3, 4, 5}, {3, 4, 3, 3, 3}}, "deconv_plain");
  ConvTranspose3d s{{2, 4, 3, 5, 4}, {4, 3, 3, 3, 2}};
  s.strides = {2, 2, 1};
  s.pads = {1, 1, 0, 0, 1, 1};
  s.output_padding = {1, 0, 0};
  s.group = 2;
  check_conv_transpose(s, "deconv_strided_grouped");
  ConvTranspose3d d{{1, 2, 4, 3, 3}, {2, 5, 2, 2, 3}};
  d.strides = {3, 1, 2};
  d.dilations = {2, 2, 1};
  d.bias = false;
  check_conv_transpose(d, "deconv_dilated");
  ConvTranspose3d o{{1, 3, 2, 3, 4}, {3, 2, 3, 2, 2}};
  o.strides = {2, 3, 2};
  o.output_shape = {6, 10, 9};
  check_conv_transpose(o, "deconv_output_shape");
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    ConvTranspose3d a{{1, 2, 3, 4, 3}, {2, 3, 2, 3, 3}};
    a.strides = {2, 2, 1};
    a.auto_pad = mode;
    check_conv_transpose(a, std::string("deconv_") + mode);
  }
}

struct Pool3d {
  std::string op;
  Ints x, kernel;
  Ints strides = {1, 1, 1}, dilations = {1, 1, 1}, pads = {0, 0, 0, 0, 0, 0};
  int64_t ceil_mode = 0, count_include_pad = 0;
  std::string auto_pad;
};

void check_pool(const Pool3d& p, const std::string& name) {
  SCOPED_TRACE(name);
  OnnxBuilder b(18);  // kiln's newest opset: AveragePool has no dilations yet
  b.input("x", dims(p.x));
  output_any(b, "y", 5);
  auto* n = b.node(p.op, "pool", {"x"}, {"y"});
  OnnxBuilder::attr_ints(n, "kernel_shape", p.kernel);
  OnnxBuilder::attr_ints(n, "strides", p.strides);
  if (p.dilations != Ints{1, 1, 1}) OnnxBuilder::attr_ints(n, "dilations", p.dilations);
  if (p.auto_pad.empty())
    OnnxBuilder::attr_ints(n, "pads", p.pads);
  else
    attr_string(n, "auto_pad", p.auto_pad);
  OnnxBuilder::attr_int(n, "ceil_mode", p.ceil_mode);
  if (p.op == "AveragePool") OnnxBuilder::attr_int(n, "count_include_pad", p.count_include_pad);
  check_end_to_end(b, name);
}

TEST(Windows3d, Pools) {
  for (const char* op : {"MaxPool", "AveragePool"}) {
    const std::string o = op;
    check_pool({o, {1, 3, 6, 7, 9}, {2, 2, 2}, {2, 2, 2}}, o + "_2x2x2");
    Pool3d p{o, {2, 4, 7, 9, 10}, {3, 3, 2}, {2, 1, 2}};
    p.pads = {1, 1, 0, 1, 0, 1};
    check_pool(p, o + "_padded");
    p.count_include_pad = 1;
    check_pool(p, o + "_count_include_pad");
    Pool3d c{o, {1, 3, 8, 7, 6}, {3, 2, 3}, {2, 2, 2}};
    c.pads = {1, 0, 1, 0, 1, 0};
    c.ceil_mode = 1;
    check_pool(c, o + "_ceil");
    c.count_include_pad = 1;
    check_pool(c, o + "_ceil_count_include_pad");
    if (o == "MaxPool") {
      Pool3d d{o, {1, 2, 9, 8, 9}, {2, 3, 2}, {1, 2, 1}};
      d.dilations = {2, 1, 3};
      d.pads = {1, 1, 0, 0, 1, 2};
      check_pool(d, o + "_dilated");
    }
    for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
      Pool3d a{o, {1, 3, 7, 6, 5}, {3, 2, 3}, {2, 2, 1}};
      a.auto_pad = mode;
      check_pool(a, o + "_" + mode);
    }
  }
}

// Conv3d -> Relu -> MaxPool3d -> Conv3d -> GlobalAveragePool (an
// action-recognition stem): the rewrites chain.
TEST(Windows3d, SmallC3dStem) {
  std::mt19937 rng(11);
  OnnxBuilder b;
  b.input("x", {"1", "3", "8", "12", "12"});
  output_any(b, "y", 5);
  b.init_f32("w1", {8, 3, 3, 3, 3}, uniform(8 * 81, rng));
  b.init_f32("b1", {8}, uniform(8, rng));
  b.init_f32("w2", {6, 8, 3, 3, 3}, uniform(6 * 8 * 27, rng));
  auto* c1 = b.node("Conv", "c1", {"x", "w1", "b1"}, {"c1"});
  OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1, 1, 1});
  b.node("Relu", "r1", {"c1"}, {"r1"});
  auto* p = b.node("MaxPool", "p1", {"r1"}, {"p1"});
  OnnxBuilder::attr_ints(p, "kernel_shape", {1, 2, 2});
  OnnxBuilder::attr_ints(p, "strides", {1, 2, 2});
  auto* c2 = b.node("Conv", "c2", {"p1", "w2"}, {"y"});
  OnnxBuilder::attr_ints(c2, "pads", {1, 1, 1, 1, 1, 1});
  OnnxBuilder::attr_ints(c2, "strides", {2, 1, 1});
  b.node("GlobalAveragePool", "gap", {"y"}, {"g"});  // AdaptiveAvgPool3d(1)
  output_any(b, "g", 5);
  // Two 216-term sums in a row, split per depth tap in another order than
  // the reference's: float32 rounding reaches 1e-5 of an element.
  E2EOptions opt;
  opt.rel = 1e-4;
  check_end_to_end(b, "c3d_stem", opt);
}

// Conv3d -> BatchNorm3d -> Relu -> AvgPool3d (BatchNorm folds into the
// Conv before the rewrite), and a Conv3d whose weight is a graph input.
TEST(Windows3d, BatchNormAndComputedWeight) {
  std::mt19937 rng(13);
  OnnxBuilder b;
  b.input("x", {"1", "4", "5", "6", "7"});
  b.input("wx", {"3", "4", "2", "2", "2"});
  output_any(b, "y", 5);
  output_any(b, "z", 5);
  b.init_f32("w", {6, 4, 3, 3, 3}, uniform(6 * 4 * 27, rng));
  for (const char* p : {"scale", "bias", "mean"}) b.init_f32(p, {6}, uniform(6, rng));
  b.init_f32("var", {6}, uniform(6, rng, 0.5f, 2.f));
  auto* c = b.node("Conv", "c", {"x", "w"}, {"c"});
  OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1, 1, 1});
  b.node("BatchNormalization", "bn", {"c", "scale", "bias", "mean", "var"}, {"bn"});
  b.node("Relu", "r", {"bn"}, {"r"});
  auto* p = b.node("AveragePool", "p", {"r"}, {"y"});
  OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2, 2});
  OnnxBuilder::attr_ints(p, "strides", {2, 2, 2});
  auto* c2 = b.node("Conv", "c2", {"x", "wx"}, {"z"});
  OnnxBuilder::attr_ints(c2, "strides", {2, 1, 2});
  check_end_to_end(b, "bn_and_computed_weight");
}

}  // namespace
}  // namespace kiln::test
