// depthwise_conv2d_NCHWc_int8.x86 against plain integer math on logical
// layouts: the whole quantized depthwise convolution of a QLinearConv, i.e.
// y = saturate(round_half_even(float(sum_taps (x - zp_x) * w + B[c]) * M[c]) + zp_y),
// computed as the graph computes it (taps outside the image read zp_x, the
// correction -zp_x * sum(w[c]) folded into the bias, the requantization
// fused into the register tile). Random shapes (channel counts the block does
// not divide, 3x3 and 5x5, strides 1 and 2, asymmetric padding, dilation),
// random configs, uint8 and int8 activations (int8 as uint8 + 128), per-tensor
// and per-channel scales, with and without bias, on every x86 ISA row this
// machine runs. All bit-exact.
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "ir/stmt.h"
#include "ops/depthwise_conv2d_int8.h"
#include "ops/op_template.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using ir::DataType;
using ops::Workload;
using schedule::Config;

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<ir::Expr> exprs(const std::vector<int64_t>& s) {
  return std::vector<ir::Expr>(s.begin(), s.end());
}

struct IsaRow {
  std::string what;
  codegen::Target target;
};

// The host, AVX2 without AVX-512 and baseline x86-64 (SSE2): the widening
// multiply-adds lower differently on each.
std::vector<IsaRow> isa_rows() {
  const codegen::Target& h = host_target();
  if (h.arch() != "x86_64") return {{"host", h}};
  std::vector<IsaRow> rows = {{"host", h}};
  if (h.has_feature("avx2"))
    rows.push_back({"avx2 (haswell)", codegen::Target::parse("llvm -mcpu=haswell")});
  rows.push_back({"generic x86-64", codegen::Target::parse("llvm -mcpu=x86-64")});
  return rows;
}

// The requantizing epilogue the graph fuses (kiln.Requantize's computation),
// as two stages over the anchor: acc + bias[c], then scale, round half to
// even, add zp, saturate.
struct Requant {
  ir::Tensor output, bias, scale;
};

Requant make_requant(const ir::Tensor& anchor, int64_t zp, DataType out_type) {
  auto shape = ops::detail::const_shape(anchor);
  std::vector<int64_t> cshape = {shape[1], shape[4]};
  ir::Tensor bias = ir::placeholder(exprs(cshape), DataType::i32(), "bias");
  ir::Tensor scale = ir::placeholder(exprs(cshape), DataType::f32(), "scale");
  ir::Tensor biased = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        return ir::read(anchor, std::vector<ir::Expr>(i.begin(), i.end())) +
               ir::at(bias, i[1], i[4]);
      },
      "biased");
  double lo = out_type == DataType::u8() ? 0 : -128, hi = out_type == DataType::u8() ? 255 : 127;
  ir::Tensor out = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        ir::Expr v =
            ir::cast(DataType::f32(), ir::read(biased, std::vector<ir::Expr>(i.begin(), i.end()))) *
            ir::at(scale, i[1], i[4]);
        ir::Expr r = ir::round_even(v) + ir::make_float(double(zp));
        r = ir::max(ir::min(r, ir::make_float(hi)), ir::make_float(lo));
        return ir::cast(out_type, r);
      },
      "requant");
  return {out, bias, scale};
}

// ONNX QLinearConv's output for one accumulator (float32 arithmetic, ORT's order).
int64_t requant_value(int64_t acc, float scale, int64_t zp, bool u8) {
  float r = std::nearbyint(float(int32_t(acc)) * scale) + float(zp);
  return int64_t(std::max(std::min(r, u8 ? 255.0f : 127.0f), u8 ? 0.0f : -128.0f));
}

struct Shape {
  int64_t n, c, h, w, kh, kw;
  std::vector<int64_t> strides, pads, dilation;
};

struct Quant {
  bool s8_input;     // int8 activations (run as uint8 + 128)
  bool per_channel;  // per-channel weight scales
  bool bias;         // an int32 bias
  bool s8_output;
};

// whole: the whole-channel block's workload (whole_channels=[1]); pad_u8 >= 0
// fixes the padding value (the uint8 zero point), else it is random.
void check(const Shape& s, const Quant& q, const Config* cfg_in, const IsaRow& row,
           std::mt19937_64& rng, bool whole = false, int64_t pad_u8 = -1) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.c,       s.kh,
                     s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                     s.pads[3], s.dilation[0], s.dilation[1], s.c};
  // The logical quantized operator: x and zp_x in the input's type.
  std::uniform_int_distribution<int> byte(0, 255);
  int64_t zp_x = q.s8_input ? byte(rng) - 128 : byte(rng);
  if (pad_u8 >= 0) zp_x = pad_u8 - (q.s8_input ? 128 : 0);
  int64_t zp_u8 = zp_x + (q.s8_input ? 128 : 0);  // what the kernel pads with
  Workload w = ops::depthwise_conv2d_int8_workload(a, zp_u8, whole);
  Config cfg = cfg_in ? *cfg_in : t.space(w).random(rng);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json() + " s8_in " +
               std::to_string(q.s8_input) + " per_channel " + std::to_string(q.per_channel) +
               " bias " + std::to_string(q.bias));
  int64_t cb = cfg.knob("c_bn"), Co = (s.c + cb - 1) / cb;
  int64_t OH = a.out_height(), OW = a.out_width();
  std::vector<int64_t> x(s.n * s.c * s.h * s.w);
  std::vector<int8_t> wt(s.c * s.kh * s.kw);
  for (auto& v : x) v = q.s8_input ? byte(rng) - 128 : byte(rng);
  for (auto& v : wt) v = int8_t(byte(rng) - 128);
  std::vector<int32_t> B(s.c, 0);
  if (q.bias)
    for (auto& b : B) b = std::uniform_int_distribution<int32_t>(-20000, 20000)(rng);
  float xs = std::uniform_real_distribution<float>(0.005f, 0.05f)(rng);
  float ys = std::uniform_real_distribution<float>(0.02f, 0.2f)(rng);
  std::vector<float> ws(q.per_channel ? s.c : 1);
  for (auto& v : ws) v = std::uniform_real_distribution<float>(0.002f, 0.02f)(rng);
  int64_t zp_y = q.s8_output ? byte(rng) - 128 : byte(rng);

  // Plain integer math, NCHW: taps outside the image are x = zp_x (ONNX pads the
  // real value 0, which quantizes to zp_x).
  std::vector<int64_t> want(s.n * s.c * OH * OW);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = B[c];
          for (int64_t y = 0; y < s.kh; ++y)
            for (int64_t z = 0; z < s.kw; ++z) {
              int64_t ih = oh * a.stride_h + y * a.dilation_h - a.pad_top;
              int64_t iw = ow * a.stride_w + z * a.dilation_w - a.pad_left;
              bool in = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
              int64_t v = in ? x[((b * s.c + c) * s.h + ih) * s.w + iw] : zp_x;
              acc += (v - zp_x) * wt[(c * s.kh + y) * s.kw + z];
            }
          float m = xs * ws[q.per_channel ? c : 0] / ys;
          want[((b * s.c + c) * OH + oh) * OW + ow] = requant_value(acc, m, zp_y, !q.s8_output);
        }

  // The graph's form: uint8 data in NCHW[cb]c (channels past C hold 77, they
  // meet zero weights), packed weights, bias' = B - zp_u8 * sum(w), M in float32.
  std::vector<uint8_t> xb(product(t.input_shapes(w, cfg)[0]), 77);
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t i = 0; i < s.h * s.w; ++i)
        xb[((b * Co + c / cb) * s.h * s.w + i) * cb + c % cb] =
            uint8_t(x[(b * s.c + c) * s.h * s.w + i] + (q.s8_input ? 128 : 0));
  std::vector<int8_t> wb = ops::pack_depthwise_int8_weight(wt.data(), s.c, s.kh, s.kw, cb);
  ASSERT_EQ(int64_t(wb.size()), product(t.input_shapes(w, cfg)[1]));
  std::vector<int32_t> bias(Co * cb, 0);
  std::vector<float> mult(Co * cb, 0.0f);
  for (int64_t c = 0; c < s.c; ++c) {
    int64_t wsum = 0;
    for (int64_t j = 0; j < s.kh * s.kw; ++j) wsum += wt[c * s.kh * s.kw + j];
    bias[c] = int32_t(B[c] - zp_u8 * wsum);
    mult[c] = xs * ws[q.per_channel ? c : 0] / ys;
  }

  // The template's reference on the physical layouts agrees with the kernel alone.
  int64_t nout = product(t.output_shape(w, cfg));
  std::vector<int32_t> ref(nout);
  t.reference_typed(w, cfg, {xb.data(), wb.data()}, ref.data());

  DataType out_type = q.s8_output ? DataType::i8() : DataType::u8();
  ops::Kernel plain = ops::make_kernel(t, w, cfg);
  ir::LoweredFunc pf = schedule::lower(plain.sch, plain.args, "plain");
  ops::TemplateInstance inst = t.compute(w, cfg);
  Requant rq = make_requant(inst.anchor, zp_y, out_type);
  schedule::Schedule sch = schedule::create_schedule({rq.output});
  t.schedule(sch, inst, rq.output, cfg);
  std::vector<ir::Tensor> args = inst.inputs;
  args.insert(args.end(), {rq.bias, rq.scale, rq.output});
  ir::LoweredFunc ff = schedule::lower(sch, args, "fused");
  auto mod = codegen::jit_compile({pf, ff}, row.target);

  std::vector<int32_t> acc(nout, 0x5a5a5a5a);
  std::vector<void*> pargs = {xb.data(), wb.data(), acc.data()};
  ASSERT_EQ(mod->get_function("plain")(pargs.data()), 0);
  EXPECT_EQ(acc, ref);

  std::vector<uint8_t> y(nout, 0xA5);
  std::vector<void*> fargs = {xb.data(), wb.data(), bias.data(), mult.data(), y.data()};
  ASSERT_EQ(mod->get_function("fused")(fargs.data()), 0);
  int64_t bad = 0;
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t i = 0; i < OH * OW; ++i) {
        uint8_t got = y[((b * Co + c / cb) * OH * OW + i) * cb + c % cb];
        int64_t g = q.s8_output ? int64_t(int8_t(got)) : int64_t(got);
        int64_t e = want[(b * s.c + c) * OH * OW + i];
        if (g != e && bad++ < 5)
          ADD_FAILURE() << "n " << b << " c " << c << " pixel " << i << ": " << g << " != " << e;
      }
  EXPECT_EQ(bad, 0);
}

const Shape kShapes[] = {
    {1, 32, 14, 14, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // MobileNet's 3x3 stride 1
    {1, 24, 15, 13, 3, 3, {2, 2}, {0, 0, 1, 1}, {1, 1}},  // stride 2, TF-style padding
    {2, 20, 9, 11, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}},   // 5x5, C 20 (blocks 8, 16 do not divide)
    {1, 13, 12, 17, 5, 5, {2, 2}, {2, 1, 2, 3}, {1, 1}},  // 5x5 stride 2, C 13, odd OW
    {1, 7, 10, 10, 3, 3, {1, 2}, {2, 2, 2, 2}, {2, 2}},   // dilation, mixed strides, C 7
    {1, 3, 5, 6, 3, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},     // no padding, 3x1, C 3
};

TEST(DepthwiseConv2dNCHWcInt8, BitExactQuantizedDepthwiseOnEveryIsaRow) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  std::mt19937_64 rng(14);
  const Quant quants[] = {{false, true, true, false},
                          {true, false, false, true},
                          {true, true, false, false},
                          {false, false, true, true}};
  for (const IsaRow& row : isa_rows())
    for (size_t si = 0; si < std::size(kShapes); ++si) {
      const Shape& s = kShapes[si];
      ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.c,       s.kh,
                         s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                         s.pads[3], s.dilation[0], s.dilation[1], s.c};
      Config fb = t.fallback(ops::depthwise_conv2d_int8_workload(a, 0), row.target.isa());
      EXPECT_TRUE(t.fits(ops::depthwise_conv2d_int8_workload(a, 0), fb, row.target.isa()));
      // The fallback (whose blocks do not depend on pad_value) with each way
      // of padding, and random configs.
      for (int64_t pad_mode : {2, 0, 1}) {
        Config c = ops::detail::KnobValues()
                       .knob("c_bn", fb.knob("c_bn"))
                       .split("tile_ow", a.out_width(), {fb.split("tile_ow").back()})
                       .knob("unroll_kw", fb.knob("unroll_kw"))
                       .knob("pad_mode", pad_mode)
                       .in(t.space(ops::depthwise_conv2d_int8_workload(a, 0)));
        if (pad_mode == 2) {
          EXPECT_EQ(c.to_json(), fb.to_json());
        }
        check(s, quants[(si + pad_mode) % std::size(quants)], &c, row, rng);
      }
      for (int i = 0; i < configs_per_shape(2); ++i)
        check(s, quants[(si + i + 1) % std::size(quants)], nullptr, row, rng);
    }
}

// The whole-channel block (the AMX convolutions' layout: one block of C
// rounded up to 4): MobileNet-like channel counts, 3x3 stride 1 and 2, 5x5,
// asymmetric padding, widths the ow tiles do not divide, C not a multiple of
// 4, padding values across 0..255; the fallback with each way of padding,
// every chunk width (a partial last chunk included) and random configs, on
// every ISA row.
const Shape kWholeShapes[] = {
    {1, 24, 11, 13, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // 3x3 s1, OW 13
    {1, 40, 12, 15, 3, 3, {2, 2}, {0, 0, 1, 1}, {1, 1}},  // 3x3 s2, TF-style pads
    {1, 96, 9, 10, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},   // 3x3 s2, OW 5
    {1, 144, 7, 9, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},   // 3x3 s1, OW 9
    {2, 144, 8, 11, 5, 5, {1, 1}, {2, 1, 2, 3}, {1, 1}},  // 5x5 asymmetric, batch 2
    {1, 96, 9, 13, 5, 5, {2, 2}, {2, 2, 1, 2}, {1, 1}},   // 5x5 s2, asymmetric
    {1, 21, 6, 7, 3, 3, {1, 1}, {1, 0, 1, 2}, {1, 1}},    // C 21: block 24
    {1, 40, 7, 6, 3, 3, {1, 2}, {2, 2, 2, 2}, {2, 2}},    // dilation, mixed strides
    {1, 32, 66, 5, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},   // 66 rows: c_parallel 0
};

TEST(DepthwiseConv2dNCHWcInt8, WholeChannelBlockBitExactOnEveryIsaRow) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  std::mt19937_64 rng(41);
  const Quant quants[] = {{false, true, true, false},
                          {true, false, false, true},
                          {true, true, false, false},
                          {false, false, true, true}};
  const int64_t pads[] = {0, 255, 128, 1, 254, 77};
  int k = 0;
  for (const IsaRow& row : isa_rows())
    for (const Shape& s : kWholeShapes) {
      ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.c,       s.kh,
                         s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                         s.pads[3], s.dilation[0], s.dilation[1], s.c};
      Workload w = ops::depthwise_conv2d_int8_workload(a, 0, /*whole_channels=*/true);
      int64_t c4 = (s.c + 3) / 4 * 4;
      Config fb = t.fallback(w, row.target.isa());
      SCOPED_TRACE(row.what + ": " + w.key() + " fallback " + fb.to_json());
      EXPECT_TRUE(t.fits(w, fb, row.target.isa()));
      EXPECT_EQ(ops::layout_blocks(t, w, fb), (std::pair<int64_t, int64_t>{c4, c4}));
      EXPECT_EQ(fb.knob("c_vec") % 4, 0);
      EXPECT_EQ(c4 % fb.knob("c_vec"), 0);
      EXPECT_LE(fb.knob("c_vec"), std::max(4, row.target.isa().lanes()));
      EXPECT_EQ(fb.knob("c_parallel"), s.n * a.out_height() < 64);
      // The fallback, then its ow tile with each chunk width (16 leaves a
      // partial chunk for 24 and 40 channels), the chunks in the parallel
      // loop or not, each with another way of padding.
      check(s, quants[k % std::size(quants)], &fb, row, rng, true, pads[k % std::size(pads)]);
      ++k;
      for (int64_t vec : {4, 8, 16}) {
        if (vec > c4) continue;
        Config c = ops::detail::KnobValues()
                       .knob("c_bn", c4)
                       .knob("c_vec", vec)
                       .knob("c_parallel", vec != 8)
                       .split("tile_ow", a.out_width(), {fb.split("tile_ow").back()})
                       .knob("unroll_kw", fb.knob("unroll_kw"))
                       .knob("pad_mode", k % 3)
                       .in(t.space(w));
        check(s, quants[k % std::size(quants)], &c, row, rng, true, pads[k % std::size(pads)]);
        ++k;
      }
      for (int i = 0; i < configs_per_shape(2); ++i, ++k)
        check(s, quants[k % std::size(quants)], nullptr, row, rng, true);
    }
}

// The whole-channel block's fallback on Zen 4 (AVX-512): chunks of 16 int32
// lanes (a zmm each), whatever the block, the same ow tile as the 16-channel
// block's, and zmm code without a scalar multiply; its key names the block.
TEST(DepthwiseConv2dNCHWcInt8, WholeChannelBlockAvx512) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  codegen::Target zen4 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  for (int64_t c : {32, 96, 144, 960}) {
    ops::Conv2DAttrs a{1, c, 28, 28, c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, c};
    Workload w = ops::depthwise_conv2d_int8_workload(a, 3, true);
    Workload w16 = ops::depthwise_conv2d_int8_workload(a, 3);
    Config cfg = t.fallback(w, zen4.isa());
    Config cfg16 = t.fallback(w16, zen4.isa());
    EXPECT_EQ(cfg.knob("c_bn"), c);
    EXPECT_EQ(cfg.knob("c_vec"), 16);
    EXPECT_EQ(cfg.knob("c_parallel"), 1);  // 28 rows
    EXPECT_EQ(cfg.split("tile_ow"), cfg16.split("tile_ow"));
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "dw_whole")}, zen4);
    EXPECT_NE(as.find("zmm"), std::string::npos);
    EXPECT_EQ(as.find("imull"), std::string::npos);
  }
  ops::Conv2DAttrs a{1, 24, 8, 8, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 24};
  EXPECT_EQ(ops::depthwise_conv2d_int8_workload(a, 5, true).key(),
            "depthwise_conv2d_NCHWc_int8.x86(data=[1,24,8,8],kernel=[24,1,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],pad_value=[5],whole_channels=[1],dtype=uint8)");
  Workload bad = ops::depthwise_conv2d_int8_workload(a, 5, true);
  bad.params.back().second = {2};
  EXPECT_THROW(t.space(bad), std::invalid_argument);
}

// The AVX-512 kernel works on zmm registers, widens bytes with vpmovzxbd /
// vpmovsxbd and has no scalar multiply in its tile.
TEST(DepthwiseConv2dNCHWcInt8, Avx512Assembly) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 144, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 144};
  Workload w = ops::depthwise_conv2d_int8_workload(a, 3);
  codegen::Target zen4 = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4");
  Config cfg = t.fallback(w, zen4.isa());
  EXPECT_EQ(cfg.knob("c_bn"), 16);
  EXPECT_EQ(ops::layout_blocks(t, w, cfg), (std::pair<int64_t, int64_t>{16, 16}));
  ops::Kernel k = ops::make_kernel(t, w, cfg);
  std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "dw_int8")}, zen4);
  EXPECT_NE(as.find("zmm"), std::string::npos);
  EXPECT_NE(as.find("vpmovzxbd"), std::string::npos);
  EXPECT_EQ(as.find("imull"), std::string::npos);
}

TEST(DepthwiseConv2dNCHWcInt8, WorkloadErrors) {
  const ops::OpTemplate& t = ops::depthwise_conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 32, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32};
  Workload w = ops::depthwise_conv2d_int8_workload(a, 0);
  EXPECT_EQ(w.key(),
            "depthwise_conv2d_NCHWc_int8.x86(data=[1,32,8,8],kernel=[32,1,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],pad_value=[0],dtype=uint8)");
  EXPECT_EQ(t.input_dtypes(w), (std::vector<DataType>{DataType::u8(), DataType::i8()}));
  EXPECT_EQ(t.output_dtype(w), DataType::i32());
  EXPECT_EQ(t.flops(w), 2.0 * 32 * 8 * 8 * 9);
  EXPECT_THROW(t.reference(w, t.fallback(w, Isa{}), {}, nullptr), std::logic_error);
  EXPECT_THROW(t.space(ops::depthwise_conv2d_int8_workload(a, 256)), std::invalid_argument);
  Workload f = w;
  f.dtype = "float32";
  EXPECT_THROW(t.space(f), std::invalid_argument);
  Workload dense = w;
  dense.params[1].second = {32, 32, 3, 3};  // not depthwise
  EXPECT_THROW(t.space(dense), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::test
