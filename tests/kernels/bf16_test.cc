// The bfloat16 templates dense_bf16.x86 and conv2d_NCHWc_bf16.x86 against
// plain math on logical layouts: float math on bf16-rounded operands (round to
// nearest even) accumulating in double, over random shapes (M, N, K, C, OC, OW
// that the tiles do not divide, odd K and odd channel blocks) and random
// configs, alone and with a float epilogue (bias + relu) fused into the
// register tile, on the lowerings of dot2_bf16 this machine runs (vdpbf16ps
// with avx512bf16, the generic one otherwise).
//
// Tolerance: the kernel's products of two bf16 values are exact in float32,
// so it differs from the reference only by the rounding of its float32
// accumulation (relative to max |ref|, about sqrt(K) * 2^-24 typically and at
// most K * 2^-24 * sum|p| / max|ref|; measured below 1e-6 on these shapes).
// kTol = 2e-5 leaves a wide margin for that, while a kernel that skipped the
// rounding of its float32 activations (each product off by up to 2^-9,
// 1e-3 to 2e-3 relative on these sums) fails it by 50x or more: the test
// checks that too.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/bf16_dot.h"
#include "harness.h"
#include "ir/expr.h"
#include "ops/conv2d_bf16.h"
#include "ops/dense_bf16.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

using ir::DataType;
using ops::Workload;
using schedule::Config;

constexpr double kTol = 2e-5;

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<ir::Expr> exprs(const std::vector<int64_t>& s) {
  return std::vector<ir::Expr>(s.begin(), s.end());
}

double bf(float x) { return ir::bf16_to_f32_value(ir::f32_to_bf16_value(x)); }

struct IsaRow {
  std::string what;
  codegen::Target target;
};

std::vector<IsaRow> isa_rows() {
  const codegen::Target& h = host_target();
  if (h.arch() != "x86_64") return {{"host", h}};
  std::vector<IsaRow> rows = {{"host (" + codegen::detail::dot2_bf16_lowering(h, 16) + ")", h}};
  if (h.has_feature("avx2"))
    rows.push_back({"avx2 (haswell, generic)", codegen::Target::parse("llvm -mcpu=haswell")});
  return rows;
}

// Kernels: the template alone ("plain") and with out = max(anchor + bias[c], 0)
// ("fused"), the epilogue the graph fuses after a Conv / Gemm with a Relu.
struct Kernels {
  std::unique_ptr<codegen::JitModule> mod;
};

Kernels build(const ops::OpTemplate& t, const Workload& w, const Config& cfg,
              const codegen::Target& target) {
  ops::Kernel plain = ops::make_kernel(t, w, cfg);
  ir::LoweredFunc pf = schedule::lower(plain.sch, plain.args, "plain");
  ops::TemplateInstance inst = t.compute(w, cfg);
  auto shape = ops::detail::const_shape(inst.anchor);
  bool conv = shape.size() == 5;
  std::vector<int64_t> cshape =
      conv ? std::vector<int64_t>{shape[1], shape[4]} : std::vector<int64_t>{shape.back()};
  ir::Tensor bias = ir::placeholder(exprs(cshape), DataType::f32(), "bias");
  ir::Tensor biased = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        ir::Expr b = conv ? ir::at(bias, i[1], i[4]) : ir::at(bias, i.back());
        return ir::read(inst.anchor, std::vector<ir::Expr>(i.begin(), i.end())) + b;
      },
      "biased");
  ir::Tensor out = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        return ir::max(ir::read(biased, std::vector<ir::Expr>(i.begin(), i.end())),
                       ir::make_float(0));
      },
      "relu");
  schedule::Schedule sch = schedule::create_schedule({out});
  t.schedule(sch, inst, out, cfg);
  std::vector<ir::Tensor> args = inst.inputs;
  args.insert(args.end(), {bias, out});
  ir::LoweredFunc ff = schedule::lower(sch, args, "fused");
  return {codegen::jit_compile({pf, ff}, target)};
}

// Runs plain and fused on (x, w) and checks them against `want` (logical
// reference mapped to the output layout by the caller) and the template's
// own reference.
void run_and_check(const ops::OpTemplate& t, const Workload& w, const Config& cfg,
                   const IsaRow& row, std::vector<float>& x, std::vector<uint16_t>& wp,
                   const std::vector<float>& want, const std::vector<float>& unrounded,
                   const std::vector<float>& bias, const std::vector<int64_t>& channel_of,
                   std::mt19937_64& rng) {
  int64_t nout = int64_t(want.size());
  std::vector<float> ref(nout);
  t.reference_typed(w, cfg, {x.data(), wp.data()}, ref.data());
  EXPECT_LE(ops::reference::max_relative_error(ref.data(), want.data(), nout), 1e-6)
      << "the template's reference disagrees with the logical one";
  // The rounding is real: without it the result is measurably different.
  EXPECT_GT(ops::reference::max_relative_error(unrounded.data(), want.data(), nout), 25 * kTol);

  Kernels k = build(t, w, cfg, row.target);
  std::vector<float> got(nout, std::nanf(""));
  std::vector<void*> args = {x.data(), wp.data(), got.data()};
  ASSERT_EQ(k.mod->get_function("plain")(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(got.data(), want.data(), nout), kTol);

  std::vector<float> fwant(nout), fgot(nout, std::nanf(""));
  for (int64_t i = 0; i < nout; ++i) fwant[i] = std::max(want[i] + bias[channel_of[i]], 0.0f);
  args = {x.data(), wp.data(), const_cast<float*>(bias.data()), fgot.data()};
  ASSERT_EQ(k.mod->get_function("fused")(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(fgot.data(), fwant.data(), nout), kTol);
  (void)rng;
}

// ---- dense_bf16.x86 --------------------------------------------------------------------

void check_dense(int64_t M, int64_t N, int64_t K, const Config& cfg, const IsaRow& row,
                 std::mt19937_64& rng) {
  const ops::OpTemplate& t = ops::dense_bf16_template();
  Workload w = ops::dense_bf16_workload(M, N, K);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json());
  std::vector<float> A = random_floats(M * K, rng), B = random_floats(K * N, rng);
  std::vector<uint16_t> Bp = ops::pack_dense_bf16_weight(w, cfg, B.data());
  ASSERT_EQ(int64_t(Bp.size()), product(t.input_shapes(w, cfg)[1]));
  std::vector<float> want(M * N), unrounded(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, acc32 = 0;
      for (int64_t k = 0; k < K; ++k) {
        acc += bf(A[m * K + k]) * bf(B[k * N + n]);
        acc32 += double(A[m * K + k]) * B[k * N + n];
      }
      want[m * N + n] = float(acc);
      unrounded[m * N + n] = float(acc32);
    }
  std::vector<float> bias = random_floats(N, rng);
  std::vector<int64_t> channel_of(M * N);
  for (int64_t i = 0; i < M * N; ++i) channel_of[i] = i % N;
  run_and_check(t, w, cfg, row, A, Bp, want, unrounded, bias, channel_of, rng);
}

TEST(DenseBf16, MatchesBf16ReferenceOnRandomShapesAndConfigs) {
  const ops::OpTemplate& t = ops::dense_bf16_template();
  std::mt19937_64 rng(16);
  struct S {
    int64_t M, N, K;
  };
  // N and M the tiles do not divide, odd K (a half pair), GEMV (M = 1).
  const S shapes[] = {{1, 40, 64},  {7, 5, 13},  {33, 17, 29},
                      {16, 48, 40}, {5, 100, 3}, {1, 1000, 512}};
  for (const IsaRow& row : isa_rows())
    for (const S& s : shapes) {
      Workload w = ops::dense_bf16_workload(s.M, s.N, s.K);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_dense(s.M, s.N, s.K, cfg, row, rng);
    }
}

TEST(DenseBf16, WorkloadErrors) {
  const ops::OpTemplate& t = ops::dense_bf16_template();
  Workload f = ops::dense_bf16_workload(2, 2, 2);
  f.dtype = "float32";
  EXPECT_THROW(t.space(f), std::invalid_argument);
  Workload bad = ops::dense_bf16_workload(2, 3, 5);
  bad.params[1].second = {4, 3};
  EXPECT_THROW(t.space(bad), std::invalid_argument);
  Workload ok = ops::dense_bf16_workload(2, 3, 5);
  EXPECT_EQ(t.input_dtypes(ok), (std::vector<DataType>{DataType::f32(), DataType::bf16()}));
  EXPECT_EQ(t.output_dtype(ok), DataType::f32());
  EXPECT_THROW(t.reference(ok, t.fallback(ok, Isa{}), {}, nullptr), std::logic_error);
  EXPECT_EQ(t.flops(ok), 2.0 * 2 * 3 * 5);
  EXPECT_EQ(ok.key().find("bfloat16") != std::string::npos, true) << ok.key();
}

// ---- conv2d_NCHWc_bf16.x86 -------------------------------------------------------------

struct ConvShape {
  int64_t n, c, h, w, oc, kh, kw;
  std::vector<int64_t> strides, pads, dilation;
};

void check_conv(const ConvShape& s, const Config& cfg, const IsaRow& row, std::mt19937_64& rng) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_bf16_template();
  ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                     s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                     s.pads[3], s.dilation[0], s.dilation[1], 1};
  Workload w = ops::conv2d_bf16_workload(a);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json());
  auto shapes = t.input_shapes(w, cfg);
  int64_t icb = shapes[0][4], ocb = shapes[1][5];
  int64_t OH = a.out_height(), OW = a.out_width(), OCo = s.oc / ocb;
  std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, rng);
  std::vector<float> wt = random_floats(s.oc * s.c * s.kh * s.kw, rng);
  std::vector<float> xb = ops::nchw_to_nchwc(x.data(), s.n, s.c, s.h, s.w, icb);
  std::vector<uint16_t> wb =
      ops::pack_conv2d_bf16_weight(wt.data(), s.oc, s.c, s.kh, s.kw, icb, ocb);
  ASSERT_EQ(int64_t(xb.size()), product(shapes[0]));
  ASSERT_EQ(int64_t(wb.size()), product(shapes[1]));
  // Plain convolution, NCHW, on bf16-rounded operands; then into NCHW[ocb]c.
  int64_t nout = product(t.output_shape(w, cfg));
  std::vector<float> want(nout), unrounded(nout);
  std::vector<int64_t> channel_of(nout);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0, acc32 = 0;
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t kh = 0; kh < s.kh; ++kh)
              for (int64_t kw = 0; kw < s.kw; ++kw) {
                int64_t ih = oh * s.strides[0] + kh * s.dilation[0] - s.pads[0];
                int64_t iw = ow * s.strides[1] + kw * s.dilation[1] - s.pads[1];
                if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
                float xv = x[((n * s.c + c) * s.h + ih) * s.w + iw];
                float wv = wt[((o * s.c + c) * s.kh + kh) * s.kw + kw];
                acc += bf(xv) * bf(wv);
                acc32 += double(xv) * wv;
              }
          int64_t i = (((n * OCo + o / ocb) * OH + oh) * OW + ow) * ocb + o % ocb;
          want[i] = float(acc);
          unrounded[i] = float(acc32);
          channel_of[i] = o;
        }
  std::vector<float> bias = random_floats(s.oc, rng);
  // The fused kernel reads the bias in [OC/ocb, ocb]: the same order as OC.
  run_and_check(t, w, cfg, row, xb, wb, want, unrounded, bias, channel_of, rng);
}

TEST(Conv2dBf16, MatchesBf16ReferenceOnRandomShapesAndConfigs) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_bf16_template();
  std::mt19937_64 rng(17);
  const ConvShape shapes[] = {
      {1, 3, 17, 19, 16, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}},   // a stem: C = 3, odd blocks
      {1, 32, 9, 11, 40, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},   // OW 11: partial ow tiles
      {2, 24, 8, 8, 8, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},     // 1x1, no padding
      {1, 10, 12, 13, 12, 3, 3, {2, 1}, {0, 1, 2, 1}, {2, 1}},  // asymmetric, dilated
  };
  for (const IsaRow& row : isa_rows())
    for (const ConvShape& s : shapes) {
      ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                         s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                         s.pads[3], s.dilation[0], s.dilation[1], 1};
      Workload w = ops::conv2d_bf16_workload(a);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_conv(s, cfg, row, rng);
    }
}

// The float template's knobs, fallback and layout blocks: a bf16 conv sits in
// the float graph's layouts.
TEST(Conv2dBf16, SharesTheFloatTemplatesSpaceAndLayout) {
  ops::Conv2DAttrs a{1, 64, 14, 14, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Workload wb = ops::conv2d_bf16_workload(a);
  Workload wf = ops::conv2d_workload("conv2d_NCHWc.x86", a);
  const ops::OpTemplate& tb = ops::conv2d_nchwc_bf16_template();
  const ops::OpTemplate& tf = ops::conv2d_nchwc_template();
  Isa isa = host_target().isa();
  EXPECT_EQ(tb.fallback(wb, isa).to_json(), tf.fallback(wf, isa).to_json());
  EXPECT_EQ(tb.space(wb).size(), tf.space(wf).size());
  EXPECT_EQ(ops::fallback_layout_blocks(tb, wb), ops::fallback_layout_blocks(tf, wf));
  EXPECT_NE(wb.key(), wf.key());
  EXPECT_THROW(tb.space(wf), std::invalid_argument);
}

// With avx512bf16 both templates' register tiles are vdpbf16ps on zmm, the
// data pair an embedded or explicit 32-bit broadcast, no gathers; without it
// (haswell) no vdpbf16ps at all.
TEST(Bf16Templates, VdpbfAssembly) {
  ops::Conv2DAttrs a{1, 32, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const Workload ws[] = {ops::dense_bf16_workload(24, 64, 64), ops::conv2d_bf16_workload(a)};
  codegen::Target spr =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
  codegen::Target hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  for (const Workload& w : ws) {
    SCOPED_TRACE(w.key());
    const ops::OpTemplate& t = ops::get_template(w.template_name);
    Config cfg = t.fallback(w, spr.isa());
    EXPECT_TRUE(t.fits(w, cfg, spr.isa()));
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    ir::LoweredFunc f = schedule::lower(k.sch, k.args, "k");
    std::string as = codegen::emit_assembly({f}, spr);
    EXPECT_NE(as.find("vdpbf16ps\t"), std::string::npos);
    EXPECT_NE(as.find("zmm"), std::string::npos);
    // The weight pairs are contiguous loads and the data pair one 32-bit word
    // (codegen's dot2_pairs), never gathers.
    EXPECT_EQ(as.find("gather"), std::string::npos);
    std::string hs = codegen::emit_assembly({f}, hsw);
    EXPECT_EQ(hs.find("vdpbf16ps"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::test
