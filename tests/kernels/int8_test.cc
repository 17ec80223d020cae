// The integer templates dense_int8.x86 and conv2d_NCHWc_int8.x86 against plain
// integer math on logical layouts: many random shapes (M, N, K, OC, IC, OW
// not multiples of the tiles), random configs of their spaces, with and
// without a requantizing epilogue fused into the register tile, on every
// x86 lowering of dot4_u8i8 this machine runs (VNNI, pmaddwd on AVX-512BW
// and AVX2, generic). All bit-exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "codegen/dot_product.h"
#include "harness.h"
#include "ir/stmt.h"
#include "ops/conv2d_int8.h"
#include "ops/dense_int8.h"
#include "ops/int8_registers.h"
#include "ops/int8_weight_range.h"
#include "ops/op_template.h"
#include "ops/winograd_conv2d_int8.h"
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

// The targets this machine runs, by the dot4_u8i8 lowering their features select.
struct IsaRow {
  std::string what;
  codegen::Target target;
};

codegen::Target host_without(const std::vector<std::string>& off) {
  codegen::Target t = host_target();
  for (const std::string& f : off) {
    std::erase(t.features, "+" + f);
    t.features.push_back("-" + f);
  }
  std::sort(t.features.begin(), t.features.end());
  return t;
}

std::vector<IsaRow> isa_rows() {
  std::vector<IsaRow> rows;
  const codegen::Target& h = host_target();
  if (h.arch() != "x86_64") return {{"host", h}};
  rows.push_back({"host (" + codegen::detail::dot4_u8i8_lowering(h, 16) + ")", h});
  if (h.has_feature("avx512vnni") && h.has_feature("avx512bw"))
    rows.push_back({"avx512bw, no vnni", host_without({"avx512vnni", "avxvnni"})});
  if (h.has_feature("avx2"))
    rows.push_back({"avx2 (haswell)", codegen::Target::parse("llvm -mcpu=haswell")});
  rows.push_back({"generic x86-64", codegen::Target::parse("llvm -mcpu=x86-64")});
  return rows;
}

// ---- requantization: the epilogue the graph fuses ---------------------------------------

// y = saturate(round_half_even(float(acc + bias[c]) * scale[c]) + zp), written as two
// stages (the template must inline the first and keep the anchor in its tile).
struct Requant {
  ir::Tensor output, bias, scale;
};

Requant make_requant(const ir::Tensor& anchor, int64_t zp, DataType out_type) {
  auto shape = ops::detail::const_shape(anchor);
  bool conv = shape.size() == 5;
  std::vector<int64_t> cshape =
      conv ? std::vector<int64_t>{shape[1], shape[4]} : std::vector<int64_t>{shape.back()};
  ir::Tensor bias = ir::placeholder(exprs(cshape), DataType::i32(), "bias");
  ir::Tensor scale = ir::placeholder(exprs(cshape), DataType::f32(), "scale");
  auto channel = [&](const ir::Tensor& t, const std::vector<ir::Var>& i) {
    return conv ? ir::at(t, i[1], i[4]) : ir::at(t, i.back());
  };
  ir::Tensor biased = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        return ir::read(anchor, std::vector<ir::Expr>(i.begin(), i.end())) + channel(bias, i);
      },
      "biased");
  double lo = out_type == DataType::u8() ? 0 : -128, hi = out_type == DataType::u8() ? 255 : 127;
  ir::Tensor out = ir::compute(
      exprs(shape),
      [&](const std::vector<ir::Var>& i) {
        ir::Expr v =
            ir::cast(DataType::f32(), ir::read(biased, std::vector<ir::Expr>(i.begin(), i.end()))) *
            channel(scale, i);
        ir::Expr r = ir::round_even(v) + ir::make_float(double(zp));
        r = ir::max(ir::min(r, ir::make_float(hi)), ir::make_float(lo));
        return ir::cast(out_type, r);
      },
      "requant");
  return {out, bias, scale};
}

template <typename T>
T requant_value(int32_t acc, int32_t bias, float scale, int64_t zp) {
  float v = float(int32_t(uint32_t(acc) + uint32_t(bias))) * scale;
  float r = std::nearbyint(v) + float(zp);
  float lo = std::is_same_v<T, uint8_t> ? 0.0f : -128.0f;
  float hi = std::is_same_v<T, uint8_t> ? 255.0f : 127.0f;
  return T(std::max(std::min(r, hi), lo));
}

// Allocations of the lowered body: (name, elements).
void allocations(const ir::Stmt& s, std::vector<std::pair<std::string, int64_t>>& out) {
  if (!s) return;
  if (auto* f = s.as<ir::ForNode>()) return allocations(f->body, out);
  if (auto* a = s.as<ir::AllocateNode>()) {
    const int64_t* n = ir::as_const_int(a->size);
    out.emplace_back(a->buffer->name, n ? *n : -1);
    return allocations(a->body, out);
  }
  if (auto* l = s.as<ir::LetStmtNode>()) return allocations(l->body, out);
  if (auto* i = s.as<ir::IfThenElseNode>()) {
    allocations(i->then_case, out);
    return allocations(i->else_case, out);
  }
  if (auto* q = s.as<ir::SeqNode>())
    for (auto& x : q->seq) allocations(x, out);
}

// The kernel alone ("plain") and with the requantizing epilogue ("fused"),
// compiled for target.
struct Kernels {
  std::unique_ptr<codegen::JitModule> mod;
  ir::LoweredFunc fused;
  std::string anchor;
};

Kernels build(const ops::OpTemplate& t, const Workload& w, const Config& cfg,
              const codegen::Target& target, int64_t zp, DataType out_type) {
  Kernels k;
  ops::Kernel plain = ops::make_kernel(t, w, cfg);
  ir::LoweredFunc pf = schedule::lower(plain.sch, plain.args, "plain");
  ops::TemplateInstance inst = t.compute(w, cfg);
  Requant rq = make_requant(inst.anchor, zp, out_type);
  schedule::Schedule sch = schedule::create_schedule({rq.output});
  t.schedule(sch, inst, rq.output, cfg);
  std::vector<ir::Tensor> args = inst.inputs;
  args.insert(args.end(), {rq.bias, rq.scale, rq.output});
  k.fused = schedule::lower(sch, args, "fused");
  k.anchor = inst.anchor->name;
  k.mod = codegen::jit_compile({pf, k.fused}, target);
  return k;
}

// The requantized output stays a register tile: the anchor's buffer is no larger than
// `tile` elements, the intermediate stage is inlined.
void expect_fused(const Kernels& k, int64_t tile) {
  std::vector<std::pair<std::string, int64_t>> allocs;
  allocations(k.fused.body, allocs);
  bool found = false;
  for (auto& [name, size] : allocs) {
    EXPECT_EQ(name.find("biased"), std::string::npos) << "epilogue stage was not inlined";
    if (name == k.anchor) {
      found = true;
      EXPECT_LE(size, tile) << "anchor buffer is larger than its register tile";
    }
  }
  EXPECT_TRUE(found) << "no register tile for the anchor " << k.anchor;
}

// ---- dense_int8.x86 --------------------------------------------------------------------

// narrow: weights in [-64, 64] and the workload's weight_range=[7] (pmaddubsw
// where the target has no dot instruction).
void check_dense(int64_t M, int64_t N, int64_t K, const Config& cfg, const IsaRow& row,
                 std::mt19937_64& rng, bool narrow = false) {
  const ops::OpTemplate& t = ops::dense_int8_template();
  Workload w = ops::dense_int8_workload(M, N, K, narrow);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json());
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> A(M * K);
  std::vector<int8_t> B(K * N);
  for (auto& x : A) x = uint8_t(byte(rng));
  for (auto& x : B) x = int8_t(byte(rng) - 128);
  if (narrow) {
    // 255s meet +-64s: pmaddubsw's pair sums reach +-32640, next to saturation.
    ops::fill_random_narrow(B.data(), int64_t(B.size()), rng);
    for (auto& x : A)
      if (byte(rng) < 64) x = 255;
  }
  std::vector<int8_t> Bp = ops::pack_dense_int8_weight(w, cfg, B.data());
  ASSERT_EQ(int64_t(Bp.size()), product(t.input_shapes(w, cfg)[1]));
  // Plain integer math on the logical layouts.
  std::vector<int32_t> want(M * N);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int64_t(A[m * K + k]) * B[k * N + n];
      want[m * N + n] = int32_t(acc);
    }
  // The template's own reference agrees.
  std::vector<int32_t> ref(M * N);
  t.reference_typed(w, cfg, {A.data(), Bp.data()}, ref.data());
  EXPECT_EQ(ref, want);

  int64_t zp = std::uniform_int_distribution<int64_t>(0, 255)(rng);
  Kernels k = build(t, w, cfg, row.target, zp, DataType::u8());
  std::vector<int32_t> got(M * N, 0x5a5a5a5a);
  std::vector<void*> args = {A.data(), Bp.data(), got.data()};
  ASSERT_EQ(k.mod->get_function("plain")(args.data()), 0);
  EXPECT_EQ(got, want);

  std::vector<int32_t> bias(N);
  std::vector<float> scale(N);
  for (auto& b : bias) b = std::uniform_int_distribution<int32_t>(-200000, 200000)(rng);
  for (auto& s : scale) s = std::uniform_real_distribution<float>(1e-4f, 4e-3f)(rng);
  std::vector<uint8_t> q(M * N, 0xA5), qwant(M * N);
  for (int64_t i = 0; i < M * N; ++i)
    qwant[i] = requant_value<uint8_t>(want[i], bias[i % N], scale[i % N], zp);
  args = {A.data(), Bp.data(), bias.data(), scale.data(), q.data()};
  ASSERT_EQ(k.mod->get_function("fused")(args.data()), 0);
  EXPECT_EQ(q, qwant);
  expect_fused(k, cfg.split("tile_y").back() * cfg.split("tile_x").back());
}

TEST(DenseInt8, BitExactOnEveryLoweringWithAndWithoutRequant) {
  const ops::OpTemplate& t = ops::dense_int8_template();
  std::mt19937_64 rng(8);
  struct S {
    int64_t M, N, K;
  };
  const S shapes[] = {{1, 40, 64}, {7, 5, 13}, {33, 17, 29}, {16, 48, 40}, {5, 100, 2}};
  for (const IsaRow& row : isa_rows())
    for (const S& s : shapes) {
      Workload w = ops::dense_int8_workload(s.M, s.N, s.K);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_dense(s.M, s.N, s.K, cfg, row, rng);
    }
}

// 7-bit weights (weight_range=[7]): the same shapes and random configs on every
// lowering this machine runs (pmaddubsw on AVX-512BW without VNNI and on AVX2,
// vpdpbusd where the host has VNNI, generic), bit-exact with and without the
// requantizing epilogue.
TEST(DenseInt8, SevenBitWeightsBitExactOnEveryLowering) {
  const ops::OpTemplate& t = ops::dense_int8_template();
  std::mt19937_64 rng(18);
  struct S {
    int64_t M, N, K;
  };
  const S shapes[] = {{1, 40, 64}, {7, 5, 13}, {33, 17, 29}, {16, 48, 40}, {3, 100, 6}};
  for (const IsaRow& row : isa_rows())
    for (const S& s : shapes) {
      Workload w = ops::dense_int8_workload(s.M, s.N, s.K, true);
      EXPECT_NE(w.key().find("weight_range=[7]"), std::string::npos) << w.key();
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_dense(s.M, s.N, s.K, cfg, row, rng, true);
    }
}

// The AVX-512 VNNI kernel uses vpdpbusd on zmm registers with the data word
// broadcast, and no pmaddubsw.
TEST(DenseInt8, VnniTileAssembly) {
  const ops::OpTemplate& t = ops::dense_int8_template();
  Workload w = ops::dense_int8_workload(64, 64, 256);
  codegen::Target icx =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  Config cfg = t.fallback(w, icx.isa());
  EXPECT_EQ(cfg.split("tile_x").back(), 32);
  EXPECT_TRUE(t.fits(w, cfg, icx.isa()));
  ops::Kernel k = ops::make_kernel(t, w, cfg);
  std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "dense_int8")}, icx);
  EXPECT_NE(as.find("vpdpbusd\t"), std::string::npos);
  // vpdpbusd's u8 operand is its first source, which has no embedded broadcast:
  // one vpbroadcastd per row and k word, shared by the row's vectors.
  EXPECT_NE(as.find("vpbroadcastd"), std::string::npos);
  EXPECT_EQ(as.find("vpmaddubsw"), std::string::npos);
}

// The ISA rows this machine cannot run, by their assembly: both templates'
// fallbacks for AVX-VNNI without AVX-512 (alderlake), AVX-512 without VNNI,
// and aarch64 with dotprod / i8mm.
TEST(Int8Templates, AssemblyOfTheRowsThisMachineCannotRun) {
  ops::Conv2DAttrs a{1, 32, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const Workload ws[] = {ops::dense_int8_workload(24, 48, 64), ops::conv2d_int8_workload(a, 5)};
  struct Row {
    const char* target;
    const char* want;
    const char* absent;
  };
  const Row rows[] = {
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=alderlake", "{vex}\tvpdpbusd", "zmm"},
      {"llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", "vpmaddwd", "vpdpbusd"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod", "sdot\t", "usdot"},
      {"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+dotprod,+i8mm", "usdot\t",
       nullptr},
  };
  for (const Workload& w : ws)
    for (const Row& r : rows) {
      SCOPED_TRACE(w.key() + " on " + r.target);
      const ops::OpTemplate& t = ops::get_template(w.template_name);
      codegen::Target target = codegen::Target::parse(r.target);
      Config cfg = t.fallback(w, target.isa());
      EXPECT_TRUE(t.fits(w, cfg, target.isa()));
      ops::Kernel k = ops::make_kernel(t, w, cfg);
      std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "k")}, target);
      EXPECT_NE(as.find(r.want), std::string::npos);
      if (r.absent) {
        EXPECT_EQ(as.find(r.absent), std::string::npos);
      }
    }
}

TEST(DenseInt8, WorkloadErrors) {
  const ops::OpTemplate& t = ops::dense_int8_template();
  Workload f = ops::dense_int8_workload(2, 2, 2);
  f.dtype = "float32";
  EXPECT_THROW(t.space(f), std::invalid_argument);
  EXPECT_THROW(t.space(ops::dense_int8_workload(2, 2, 70000)), std::invalid_argument);
  Workload ok = ops::dense_int8_workload(2, 3, 5);
  EXPECT_EQ(t.input_dtypes(ok), (std::vector<DataType>{DataType::u8(), DataType::i8()}));
  EXPECT_EQ(t.output_dtype(ok), DataType::i32());
  EXPECT_THROW(t.reference(ok, t.fallback(ok, Isa{}), {}, nullptr), std::logic_error);
  EXPECT_EQ(t.flops(ok), 2.0 * 2 * 3 * 5);
}

// ---- conv2d_NCHWc_int8.x86 -------------------------------------------------------------

struct ConvShape {
  int64_t n, c, h, w, oc, kh, kw;
  std::vector<int64_t> strides, pads, dilation;
};

ops::Conv2DAttrs conv_attrs(const ConvShape& s) {
  return {s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
          s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
          s.pads[3], s.dilation[0], s.dilation[1], 1};
}

// fold: the workload's fold_kw=[1] (the dot over (kw, c) pairs): the same
// plain convolution must come out, from the folded weight packing.
// winograd: the same convolution on conv2d_winograd_NCHWc_int8.x86, from its
// transformed int16 weight.
void check_conv(const ConvShape& s, int64_t pad_value, const Config& cfg, const IsaRow& row,
                std::mt19937_64& rng, bool narrow = false, bool fold = false, bool winograd = false,
                bool extreme = false) {
  const ops::OpTemplate& t =
      winograd ? ops::conv2d_winograd_nchwc_int8_template() : ops::conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                     s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                     s.pads[3], s.dilation[0], s.dilation[1], 1};
  Workload w = ops::conv2d_int8_workload(a, pad_value, narrow);
  if (fold) w = ops::with_folded_kw(w);
  if (winograd) w = ops::winograd_int8_workload(w);
  SCOPED_TRACE(row.what + ": " + w.key() + " " + cfg.to_json());
  int64_t icb = cfg.knob("ic_bn"), ocb = cfg.knob("oc_bn");
  int64_t OH = a.out_height(), OW = a.out_width(), OCo = (s.oc + ocb - 1) / ocb;
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> x(s.n * s.c * s.h * s.w);
  std::vector<int8_t> wt(s.oc * s.c * s.kh * s.kw);
  for (auto& v : x) v = uint8_t(byte(rng));
  for (auto& v : wt) v = int8_t(byte(rng) - 128);
  if (narrow) {
    ops::fill_random_narrow(wt.data(), int64_t(wt.size()), rng);
    for (auto& v : x)
      if (byte(rng) < 64) v = 255;
  }
  if (extreme) {  // the largest sums: 255 everywhere, weights -128 (and some 127)
    std::fill(x.begin(), x.end(), uint8_t(255));
    for (auto& v : wt) v = byte(rng) < 224 ? int8_t(-128) : int8_t(127);
  }
  // Channels past C hold 77: they meet zero weights.
  std::vector<uint8_t> xb = ops::nchw_to_nchwc_u8(x.data(), s.n, s.c, s.h, s.w, icb, 77);
  std::vector<int8_t> wb;
  std::vector<int16_t> wu;
  if (winograd)
    wu = ops::winograd_int8_pack_weight(w, cfg, wt.data());
  else
    wb = ops::pack_conv2d_int8_weight(wt.data(), w, cfg);
  void* weight = winograd ? static_cast<void*>(wu.data()) : static_cast<void*>(wb.data());
  auto shapes = t.input_shapes(w, cfg);
  ASSERT_EQ(int64_t(xb.size()), product(shapes[0]));
  ASSERT_EQ(int64_t(winograd ? wu.size() : wb.size()), product(shapes[1]));
  // Plain integer convolution, NCHW; taps outside the image read pad_value.
  int64_t nout = product(t.output_shape(w, cfg));
  std::vector<int32_t> want(nout, 0);  // channels past OC: zero weights, zero sums
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t o = 0; o < s.oc; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = 0;
          for (int64_t c = 0; c < s.c; ++c)
            for (int64_t y = 0; y < s.kh; ++y)
              for (int64_t z = 0; z < s.kw; ++z) {
                int64_t ih = oh * a.stride_h + y * a.dilation_h - a.pad_top;
                int64_t iw = ow * a.stride_w + z * a.dilation_w - a.pad_left;
                bool in = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
                int64_t v = in ? x[((b * s.c + c) * s.h + ih) * s.w + iw] : pad_value;
                acc += v * wt[((o * s.c + c) * s.kh + y) * s.kw + z];
              }
          want[(((b * OCo + o / ocb) * OH + oh) * OW + ow) * ocb + o % ocb] = int32_t(acc);
        }
  std::vector<int32_t> ref(nout);
  t.reference_typed(w, cfg, {xb.data(), weight}, ref.data());
  EXPECT_EQ(ref, want);

  int64_t zp = std::uniform_int_distribution<int64_t>(-128, 127)(rng);
  Kernels k = build(t, w, cfg, row.target, zp, DataType::i8());
  std::vector<int32_t> got(nout, 0x5a5a5a5a);
  std::vector<void*> args = {xb.data(), weight, got.data()};
  ASSERT_EQ(k.mod->get_function("plain")(args.data()), 0);
  EXPECT_EQ(got, want);

  std::vector<int32_t> bias(OCo * ocb);
  std::vector<float> scale(OCo * ocb);
  for (auto& b : bias) b = std::uniform_int_distribution<int32_t>(-300000, 300000)(rng);
  for (auto& v : scale) v = std::uniform_real_distribution<float>(1e-4f, 2e-3f)(rng);
  std::vector<int8_t> q(nout, 0x55), qwant(nout);
  for (int64_t i = 0; i < nout; ++i) {
    int64_t ch = (i / (OH * OW * ocb)) % OCo * ocb + i % ocb;
    qwant[i] = requant_value<int8_t>(want[i], bias[ch], scale[ch], zp);
  }
  args = {xb.data(), weight, bias.data(), scale.data(), q.data()};
  ASSERT_EQ(k.mod->get_function("fused")(args.data()), 0);
  EXPECT_EQ(q, qwant);
  if (!winograd)  // Winograd's anchor (A^T M A) is inlined into the epilogue
    expect_fused(k, cfg.split("tile_ow").back() * ocb * cfg.knob("oc_reg") * cfg.knob("oh_reg"));
}

TEST(Conv2dNCHWcInt8, BitExactOnEveryLoweringWithAndWithoutRequant) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  std::mt19937_64 rng(9);
  const ConvShape shapes[] = {
      {1, 3, 11, 13, 20, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},  // C 3 -> one 4-channel block
      {1, 16, 7, 9, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}},   // OC 40 in blocks of 16
      {2, 12, 9, 10, 24, 3, 2, {1, 2}, {2, 2, 2, 2}, {2, 1}},  // dilation, stride 2 wide
      {1, 32, 5, 5, 36, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},   // 1x1, no padding
      {1, 6, 6, 17, 8, 5, 5, {1, 1}, {2, 2, 2, 2}, {1, 1}},    // 5x5, OW 17
  };
  for (const IsaRow& row : isa_rows())
    for (const ConvShape& s : shapes) {
      int64_t pad_value = std::uniform_int_distribution<int64_t>(0, 255)(rng);
      ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                         s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                         s.pads[3], s.dilation[0], s.dilation[1], 1};
      Workload w = ops::conv2d_int8_workload(a, pad_value);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_conv(s, pad_value, cfg, row, rng);
    }
}

TEST(Conv2dNCHWcInt8, SevenBitWeightsBitExactOnEveryLowering) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  std::mt19937_64 rng(19);
  const ConvShape shapes[] = {
      {1, 3, 11, 13, 20, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {1, 16, 7, 9, 40, 3, 3, {1, 1}, {0, 1, 2, 1}, {1, 1}},
      {2, 12, 9, 10, 24, 3, 2, {1, 2}, {2, 2, 2, 2}, {2, 1}},
      {1, 32, 5, 5, 36, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {1, 20, 7, 7, 52, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // OW 7, OC 52
  };
  for (const IsaRow& row : isa_rows())
    for (const ConvShape& s : shapes) {
      int64_t pad_value = std::uniform_int_distribution<int64_t>(0, 255)(rng);
      ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                         s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                         s.pads[3], s.dilation[0], s.dilation[1], 1};
      Workload w = ops::conv2d_int8_workload(a, pad_value, true);
      std::vector<Config> configs = {t.fallback(w, row.target.isa())};
      for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
      for (const Config& cfg : configs) check_conv(s, pad_value, cfg, row, rng, true);
    }
}

// fold_kw (C < 4): RGB and grayscale inputs, windows of 2 to 7 columns, so
// that C * KW leaves 0 to 3 padding bytes in its last word; strides, uneven
// pads, dilation in either axis, widths no tile divides, batch 2; exact and
// 7-bit weights; the fallback and random configs, on every lowering.
TEST(Conv2dNCHWcInt8, FoldedWindowColumnsBitExactOnEveryLowering) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  std::mt19937_64 rng(29);
  const ConvShape shapes[] = {
      {1, 3, 23, 21, 20, 7, 7, {2, 2}, {3, 3, 3, 3}, {1, 1}},  // ResNet's stem, small
      {1, 3, 11, 13, 16, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}},  // MobileNet's stem: 9 -> 12
      {2, 1, 9, 10, 8, 5, 5, {1, 1}, {2, 0, 1, 2}, {1, 1}},    // grayscale, 5 -> 8
      {1, 2, 8, 15, 12, 3, 4, {1, 3}, {0, 2, 1, 1}, {2, 2}},   // 8 of 8, dilated
      {1, 3, 6, 7, 4, 2, 2, {1, 1}, {0, 0, 0, 0}, {1, 1}},     // 6 -> 8, no padding
  };
  for (const IsaRow& row : isa_rows())
    for (const ConvShape& s : shapes)
      for (bool narrow : {false, true}) {
        int64_t pad_value = std::uniform_int_distribution<int64_t>(0, 255)(rng);
        Workload w =
            ops::with_folded_kw(ops::conv2d_int8_workload(conv_attrs(s), pad_value, narrow));
        std::vector<Config> configs = {t.fallback(w, row.target.isa())};
        for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
        for (const Config& cfg : configs) check_conv(s, pad_value, cfg, row, rng, narrow, true);
      }
}

// fold_kw is part of the key, only [1] and C < 4 with KW > 1 are accepted, and
// the folded weight holds Kp = C * KW rounded up to 4 bytes per window row.
TEST(Conv2dNCHWcInt8, FoldedWindowColumnsWorkload) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1};
  Workload w = ops::with_folded_kw(ops::conv2d_int8_workload(a, 5));
  EXPECT_EQ(w.key(),
            "conv2d_NCHWc_int8.x86(data=[1,3,224,224],kernel=[64,3,7,7],strides=[2,2],"
            "pads=[3,3,3,3],dilation=[1,1],pad_value=[5],fold_kw=[1],dtype=uint8)");
  EXPECT_TRUE(ops::conv2d_int8_folds_kw(w));
  Config cfg = t.fallback(w, Isa{});
  EXPECT_EQ(t.input_shapes(w, cfg)[1],
            (std::vector<int64_t>{64 / cfg.knob("oc_bn"), 1, 7, 1, 6, cfg.knob("oc_bn"), 4}));
  EXPECT_EQ(t.input_shapes(w, cfg)[0], (std::vector<int64_t>{1, 1, 224, 224, 4}));
  Workload bad = w;
  bad.params.back().second = {2};
  EXPECT_THROW(t.space(bad), std::invalid_argument);
  ops::Conv2DAttrs four = a;
  four.in_channels = 4;
  EXPECT_FALSE(ops::conv2d_int8_can_fold_kw(four));
  Workload w4 = ops::conv2d_int8_workload(four, 5);
  EXPECT_THROW(t.space(ops::with_folded_kw(w4)), std::invalid_argument);
  ops::Conv2DAttrs narrow_window = a;
  narrow_window.kernel_w = 1;
  EXPECT_FALSE(ops::conv2d_int8_can_fold_kw(narrow_window));
}

// conv2d_winograd_NCHWc_int8.x86 (F(2x2, 3x3) in integers) against the plain
// integer convolution: output sizes the 2x2 tile does not divide (a partial
// last tile row and column), asymmetric and zero pads, batch 2, channels that
// are no multiple of the blocks (padding channels read 77 and meet zero
// weights), GEMM row tiles that do not divide the tile count; exact and 7-bit
// weights, every weight at -128 (the largest transformed values) and inputs at
// 255; the fallback and random configs on every lowering (pmaddwd zmm / ymm,
// vpdpwssd where the host has VNNI, generic), with and without the requantizing
// epilogue.
TEST(Conv2dWinogradNCHWcInt8, BitExactOnEveryLowering) {
  const ops::OpTemplate& t = ops::conv2d_winograd_nchwc_int8_template();
  std::mt19937_64 rng(41);
  const ConvShape shapes[] = {
      {1, 16, 8, 8, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // ResNet's, small
      {1, 12, 7, 9, 20, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // odd sides, OC 20
      {2, 8, 5, 6, 8, 3, 3, {1, 1}, {0, 1, 2, 0}, {1, 1}},    // uneven pads, batch 2
      {1, 20, 6, 5, 36, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}},  // no padding: 4x3 out
      {1, 3, 9, 9, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},    // C 3 in a block of 4
  };
  for (const IsaRow& row : isa_rows())
    for (const ConvShape& s : shapes)
      for (bool narrow : {false, true}) {
        int64_t pad_value = std::uniform_int_distribution<int64_t>(0, 255)(rng);
        Workload w = ops::winograd_int8_workload(
            ops::conv2d_int8_workload(conv_attrs(s), pad_value, narrow));
        std::vector<Config> configs = {t.fallback(w, row.target.isa())};
        for (int i = 0; i < configs_per_shape(2); ++i) configs.push_back(t.space(w).random(rng));
        for (const Config& cfg : configs)
          check_conv(s, pad_value, cfg, row, rng, narrow, false, true);
      }
}

// The largest values: inputs 255 (pad_value 255), weights -128 with a few
// 127: transformed weights near +-1152, transformed tiles near +-1020, sums
// of 9 * 144 * 255 * 128 (4x that before the final /4): exact on every lowering.
TEST(Conv2dWinogradNCHWcInt8, ExtremeValuesBitExact) {
  const ops::OpTemplate& t = ops::conv2d_winograd_nchwc_int8_template();
  std::mt19937_64 rng(43);
  const ConvShape s{1, 144, 6, 7, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}};
  for (const IsaRow& row : isa_rows()) {
    Workload w = ops::winograd_int8_workload(ops::conv2d_int8_workload(conv_attrs(s), 255));
    std::vector<Config> configs = {t.fallback(w, row.target.isa()), t.space(w).random(rng)};
    for (const Config& cfg : configs) check_conv(s, 255, cfg, row, rng, false, false, true, true);
  }
}

// weight_range is part of the key, only [7] is accepted, the tuner's random
// weights stay within [-64, 64], and the register budget counts what the
// pmaddubsw sequence holds: on haswell 16 - (2 + 3) = 11 accumulators for 16
// output channels (the fp32 rule's 12 at most), where the exact sequence leaves 8.
TEST(Conv2dNCHWcInt8, SevenBitWeightsWorkloadAndRegisterBudget) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Workload w = ops::conv2d_int8_workload(a, 0, true);
  EXPECT_EQ(w.key(),
            "conv2d_NCHWc_int8.x86(data=[1,64,56,56],kernel=[64,64,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],pad_value=[0],weight_range=[7],dtype=uint8)");
  EXPECT_EQ(ops::Workload::parse(w.key()), w);
  EXPECT_TRUE(ops::narrow_weights(w));
  EXPECT_FALSE(ops::narrow_weights(ops::conv2d_int8_workload(a, 0)));
  Workload bad = ops::conv2d_int8_workload(a, 0);
  bad.params.push_back({"weight_range", {8}});
  EXPECT_THROW(t.space(bad), std::invalid_argument);
  Workload dbad = ops::dense_int8_workload(4, 8, 16);
  dbad.params.push_back({"weight_range", {6}});
  EXPECT_THROW(ops::dense_int8_template().space(dbad), std::invalid_argument);

  std::mt19937_64 rng(3);
  std::vector<int8_t> weights(4096);
  t.fill_random_input(w, 1, DataType::i8(), weights.data(), int64_t(weights.size()), rng);
  EXPECT_TRUE(ops::weights_fit_narrow(weights.data(), int64_t(weights.size())));
  EXPECT_NE(std::count(weights.begin(), weights.end(), 64), 0);
  EXPECT_NE(std::count(weights.begin(), weights.end(), -64), 0);
  // Without the parameter the weights cover the whole int8 range.
  t.fill_random_input(ops::conv2d_int8_workload(a, 0), 1, DataType::i8(), weights.data(),
                      int64_t(weights.size()), rng);
  EXPECT_FALSE(ops::weights_fit_narrow(weights.data(), int64_t(weights.size())));

  codegen::Target hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  EXPECT_EQ(ops::detail::int8_accumulator_budget(hsw.isa(), 2, true), 11);
  EXPECT_EQ(ops::detail::int8_accumulator_budget(hsw.isa(), 2, false), 8);
  Config tile = ops::detail::KnobValues()
                    .knob("ic_bn", 16)
                    .knob("oc_bn", 16)
                    .split("tile_ow", a.out_width(), {4})
                    .knob("unroll_kw", 1)
                    .knob("oc_reg", 1)
                    .knob("oh_reg", 1)
                    .knob("kernel_outer", 1)
                    .in(t.space(w));
  EXPECT_TRUE(t.fits(w, tile, hsw.isa()));
  // 7 columns x 2 vectors = 14 accumulators: too many for either sequence.
  Config wide = ops::detail::KnobValues()
                    .knob("ic_bn", 16)
                    .knob("oc_bn", 16)
                    .split("tile_ow", a.out_width(), {7})
                    .knob("unroll_kw", 1)
                    .knob("oc_reg", 1)
                    .knob("oh_reg", 1)
                    .knob("kernel_outer", 1)
                    .in(t.space(w));
  EXPECT_FALSE(t.fits(w, wide, hsw.isa()));
}

TEST(Conv2dNCHWcInt8, WorkloadErrorsAndFallback) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Workload w = ops::conv2d_int8_workload(a, 0);
  EXPECT_EQ(w.key(),
            "conv2d_NCHWc_int8.x86(data=[1,64,56,56],kernel=[64,64,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],pad_value=[0],dtype=uint8)");
  Config f = t.fallback(
      w, codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server").isa());
  EXPECT_EQ(f.knob("ic_bn"), 16);
  EXPECT_EQ(f.knob("oc_bn"), 16);
  EXPECT_EQ(f.split("tile_ow").back(), 14);
  EXPECT_EQ(ops::layout_blocks(t, w, f), (std::pair<int64_t, int64_t>{16, 16}));
  EXPECT_EQ(f.knob("kernel_outer"), 1);
  ops::Conv2DAttrs one{1, 64, 56, 56, 64, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1};
  EXPECT_EQ(t.fallback(ops::conv2d_int8_workload(one, 0), Isa{}).knob("kernel_outer"), 0);
  Workload bad = ops::conv2d_int8_workload(a, 256);
  EXPECT_THROW(t.space(bad), std::invalid_argument);
  Workload no_pad = w;
  no_pad.params.pop_back();
  EXPECT_THROW(t.space(no_pad), std::invalid_argument);
}

// conv2d_winograd_NCHWc_int8.x86: the key (the direct workload's params, fold_kw
// dropped), the refusals naming the workload, the int16 weight shape, the
// fallback per ISA row (the direct conv's blocks; p_tile 6 on AVX2, 16 on
// AVX-512; unroll_ci 0) and fits().
TEST(Conv2dWinogradNCHWcInt8, WorkloadErrorsAndFallback) {
  const ops::OpTemplate& t = ops::conv2d_winograd_nchwc_int8_template();
  ops::Conv2DAttrs a{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Workload w = ops::winograd_int8_workload(ops::conv2d_int8_workload(a, 5, true));
  EXPECT_EQ(w.key(),
            "conv2d_winograd_NCHWc_int8.x86(data=[1,64,56,56],kernel=[64,64,3,3],strides=[1,1],"
            "pads=[1,1,1,1],dilation=[1,1],pad_value=[5],weight_range=[7],dtype=uint8)");
  EXPECT_EQ(t.input_dtypes(w), (std::vector<DataType>{DataType::u8(), DataType::i16()}));
  EXPECT_EQ(t.output_dtype(w), DataType::i32());
  EXPECT_EQ(t.flops(w), 2.0 * 64 * 64 * 9 * 56 * 56);  // the direct convolution's count
  Isa hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell").isa();
  Isa skx = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512").isa();
  Config fh = t.fallback(w, hsw), fs = t.fallback(w, skx);
  EXPECT_EQ(fh.knob("p_tile"), 6);
  EXPECT_EQ(fs.knob("p_tile"), 16);
  EXPECT_EQ(fh.knob("unroll_ci"), 0);
  EXPECT_EQ(ops::layout_blocks(t, w, fh), (std::pair<int64_t, int64_t>{16, 16}));
  EXPECT_EQ(t.input_shapes(w, fh).at(1), (std::vector<int64_t>{4, 4, 4, 4, 8, 16, 2}));
  EXPECT_EQ(t.output_shape(w, fh), (std::vector<int64_t>{1, 4, 56, 56, 16}));
  EXPECT_TRUE(t.fits(w, fh, hsw));
  EXPECT_FALSE(t.fits(w, fs, hsw));  // 16 rows x 2 ymm accumulators
  // The direct template's blocks for the same conv: chained convs need no transform.
  const ops::OpTemplate& direct = ops::conv2d_nchwc_int8_template();
  Workload dw = ops::conv2d_int8_workload(a, 5, true);
  EXPECT_EQ(ops::layout_blocks(direct, dw, direct.fallback(dw, hsw)), ops::layout_blocks(t, w, fh));
  // Refusals, each naming the workload.
  auto refused = [&](ops::Conv2DAttrs b, int64_t pad_value, const std::string& what) {
    Workload bad = ops::winograd_int8_workload(ops::conv2d_int8_workload(b, pad_value));
    try {
      t.space(bad);
      ADD_FAILURE() << "accepted " << bad.key();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad.key()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ops::Conv2DAttrs s2 = a;
  s2.stride_h = s2.stride_w = 2;
  refused(s2, 0, "stride 1");
  ops::Conv2DAttrs k5 = a;
  k5.kernel_h = k5.kernel_w = 5;
  refused(k5, 0, "3x3");
  ops::Conv2DAttrs wide = a;
  wide.in_channels = 1828;
  refused(wide, 0, "1827");
  refused(a, 256, "pad_value");
  EXPECT_FALSE(ops::winograd_int8_applies(wide));
  EXPECT_TRUE(ops::winograd_int8_applies(a));
  // Only conv2d_NCHWc_int8.x86 workloads have a Winograd form.
  EXPECT_THROW(ops::winograd_int8_workload(w), std::invalid_argument);
}

// Vector registers of `reg` ("%zmm", "%ymm") stored to the stack in the assembly:
// spills (kernels have no other reason to store a vector there).
int stack_stores(const std::string& as, const std::string& reg, std::string* first) {
  std::istringstream lines(as);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    size_t r = line.find(reg), m = line.find("(%rsp)"), b = line.find("(%rbp)");
    size_t mem = std::min(m, b);
    // A store: the register is the source, the stack slot the destination.
    if (line.find("vmov") != std::string::npos && r != std::string::npos &&
        mem != std::string::npos && r < mem && !n++)
      *first = line;
  }
  return n;
}

// The fallback's register tile stays in registers on AVX-512 VNNI: no zmm
// register goes through the stack. (With the input-channel blocks outside an
// unrolled 3x3 window, LLVM kept the broadcast input words of neighbouring
// taps live across the copies and spilled: ResNet-18's 3x3 layers ran at
// 60-70 % of this speed.)
TEST(Conv2dNCHWcInt8, FallbackTileDoesNotSpillOnVnni) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  codegen::Target icx =
      codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=icelake-server");
  const ops::Conv2DAttrs shapes[] = {
      {1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},  // ResNet 3x3, OW tile 14
      {1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   // stride 2
      {1, 256, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},    // 7x7 maps, OW tile 7
      {1, 48, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // blocks and tiles not dividing
  };
  for (const ops::Conv2DAttrs& a : shapes) {
    Workload w = ops::conv2d_int8_workload(a, 3);
    Config cfg = t.fallback(w, icx.isa());
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "conv")}, icx);
    ASSERT_NE(as.find("vpdpbusd\t"), std::string::npos);
    std::string first;
    EXPECT_EQ(stack_stores(as, "%zmm", &first), 0) << "first: " << first;
  }
}

// Vector stack stores and vpmaddwd in the innermost loops that hold vpmaddwd:
// the spill traffic where the time goes.
std::pair<int, int> hot_loop_spills_and_madds(const std::string& as) {
  int stores = 0, madds = 0;
  for (const auto& loop : innermost_loops(as))
    for (const std::string& l : loop) {
      if (l.find("vpmaddwd") != std::string::npos) ++madds;
      if (is_vector_spill_store(l)) ++stores;
    }
  return {stores, madds};
}

// AVX2 (haswell: 16 ymm registers, the dot as vpmaddwd on int16 pairs, two
// multiplies per 32 products where pmaddubsw needed four): the fallback's tile
// leaves the registers the widened weights and inputs need
// (ops/int8_registers.h: 8 accumulators for 16 output channels, where the fp32
// rule allowed 12), and its hot loop stores at most one ymm register to the
// stack per 4 multiplies; a tile of all 16 registers spills more. Eight
// accumulators still spill a little (8 + 4 widened weights + 2 widened inputs
// + the products fill all 16 registers and LLVM's scheduler overlaps the
// steps); 4 accumulators do not spill at all but ran 8 % slower on ResNet-18
// (bench/models/results/int8-avx2-2026-11-24b-zen4.md). Compiles only, so it
// runs on any host.
TEST(Conv2dNCHWcInt8, Avx2FallbackTileLeavesTheDotItsRegisters) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  codegen::Target hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  EXPECT_FALSE(hsw.isa().int8_dot_instruction);
  auto compile = [&](const Workload& w, const Config& cfg) {
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    return codegen::emit_assembly({schedule::lower(k.sch, k.args, "conv")}, hsw);
  };
  const ops::Conv2DAttrs shapes[] = {
      {1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   // ResNet 3x3
      {1, 64, 56, 56, 128, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},    // stride 2
      {1, 256, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // 7x7 maps, a partial ow tile
      {1, 256, 14, 14, 1024, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},  // ResNet-50 1x1
      {1, 64, 12, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},     // OW 12: the fp32 rule takes 6
  };
  for (const ops::Conv2DAttrs& a : shapes) {
    Workload w = ops::conv2d_int8_workload(a, 3);
    Config cfg = t.fallback(w, hsw.isa());
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    EXPECT_TRUE(t.fits(w, cfg, hsw.isa()));
    EXPECT_EQ(cfg.split("tile_ow").back(), 4);  // 8 accumulators of 16 channels
    std::string as = compile(w, cfg);
    EXPECT_EQ(as.find("vpmaddubsw"), std::string::npos);
    auto [stores, madds] = hot_loop_spills_and_madds(as);
    ASSERT_GT(madds, 0);
    EXPECT_LE(4 * stores, madds) << stores << " ymm spill stores, " << madds << " vpmaddwd";
  }
  // A tile of 16 accumulators (8 columns x 2 vectors, all of haswell's
  // registers): fits() refuses it, and its hot loop spills more than the
  // fallback's tile of the same shape. (Its 28 columns are 3 tiles of 8 and
  // one of 4, peeled off: peel_tail_loops.h.)
  ops::Conv2DAttrs a = shapes[0];
  Workload w = ops::conv2d_int8_workload(a, 3);
  Config wide = ops::detail::KnobValues()
                    .knob("ic_bn", 16)
                    .knob("oc_bn", 16)
                    .split("tile_ow", a.out_width(), {8})
                    .knob("unroll_kw", 1)
                    .knob("oc_reg", 1)
                    .knob("oh_reg", 1)
                    .knob("kernel_outer", 1)
                    .in(t.space(w));
  EXPECT_FALSE(t.fits(w, wide, hsw.isa()));
  auto [stores, madds] = hot_loop_spills_and_madds(compile(w, wide));
  auto [fallback_stores, fallback_madds] =
      hot_loop_spills_and_madds(compile(w, t.fallback(w, hsw.isa())));
  EXPECT_GT(stores * fallback_madds, fallback_stores * madds)
      << stores << " ymm spill stores per " << madds << " vpmaddwd, the fallback "
      << fallback_stores << " per " << fallback_madds;
}

// The integer Winograd's AVX2 fallback: its GEMM loop multiplies with
// vpmaddwd and keeps its 12 accumulators in registers; the same tile with the
// channel loop unrolled spills more (LLVM reassociates the exact int32 adds
// into trees of products), which is why the fallback does not unroll it.
TEST(Conv2dWinogradNCHWcInt8, Avx2FallbackGemmKeepsItsRegisters) {
  const ops::OpTemplate& t = ops::conv2d_winograd_nchwc_int8_template();
  codegen::Target hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  ops::Conv2DAttrs a{1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  Workload w = ops::winograd_int8_workload(ops::conv2d_int8_workload(a, 3));
  Config cfg = t.fallback(w, hsw.isa());
  auto spills = [&](const Config& c) {
    ops::Kernel k = ops::make_kernel(t, w, c);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "wino")}, hsw);
    EXPECT_EQ(as.find("vpmaddubsw"), std::string::npos);
    return hot_loop_spills_and_madds(as);
  };
  auto [stores, madds] = spills(cfg);
  ASSERT_GT(madds, 0);
  EXPECT_LE(4 * stores, madds) << stores << " ymm spill stores, " << madds << " vpmaddwd";
  Config unrolled = ops::detail::KnobValues()
                        .knob("ic_bn", 16)
                        .knob("oc_bn", 16)
                        .knob("p_tile", cfg.knob("p_tile"))
                        .knob("unroll_ci", 1)
                        .in(t.space(w));
  auto [ustores, umadds] = spills(unrolled);
  std::printf("winograd AVX2 GEMM: fallback %d spill stores / %d vpmaddwd, unrolled %d / %d\n",
              stores, madds, ustores, umadds);
  EXPECT_GT(ustores * madds, stores * umadds);
}

// The AVX2 fallback's tile (ow tiles of 4 for 16 output channels) on shapes it
// does not divide, bit-exact (the other rows' tiles are covered above).
TEST(Conv2dNCHWcInt8, Avx2FallbackTileIsBitExactOnNonDividingShapes) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  if (!host_target().has_feature("avx2")) GTEST_SKIP() << "the host has no AVX2";
  IsaRow row{"avx2 (haswell)", codegen::Target::parse("llvm -mcpu=haswell")};
  std::mt19937_64 rng(14);
  const ConvShape shapes[] = {
      {1, 20, 7, 7, 36, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},   // OW 7 = 4 + 3
      {1, 16, 9, 14, 24, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}},  // OW 14: tiles of 4, 2 left
      {1, 8, 11, 23, 16, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}},  // 1x1 stride 2, OW 12
      {1, 12, 6, 13, 52, 3, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}},  // OW 11 prime-ish, OC 52
  };
  for (const ConvShape& s : shapes) {
    ops::Conv2DAttrs a{s.n,       s.c,           s.h,           s.w,       s.oc,      s.kh,
                       s.kw,      s.strides[0],  s.strides[1],  s.pads[0], s.pads[1], s.pads[2],
                       s.pads[3], s.dilation[0], s.dilation[1], 1};
    int64_t pad_value = std::uniform_int_distribution<int64_t>(0, 255)(rng);
    Workload w = ops::conv2d_int8_workload(a, pad_value);
    Config cfg = t.fallback(w, row.target.isa());
    EXPECT_LE(cfg.split("tile_ow").back() * ((cfg.knob("oc_bn") + 7) / 8), 8) << cfg.to_json();
    check_conv(s, pad_value, cfg, row, rng);
  }
}

// The fallback's tile with 7-bit weights on haswell: vpmaddubsw in the kernel, no
// widening shifts, and at most one ymm spill store per 4 multiplies in the hot loop.
TEST(Conv2dNCHWcInt8, SevenBitWeightsAvx2KernelIsPmaddubsw) {
  const ops::OpTemplate& t = ops::conv2d_nchwc_int8_template();
  codegen::Target hsw = codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell");
  const ops::Conv2DAttrs shapes[] = {
      {1, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 256, 14, 14, 1024, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
  };
  for (const ops::Conv2DAttrs& a : shapes) {
    Workload w = ops::conv2d_int8_workload(a, 3, true);
    Config cfg = t.fallback(w, hsw.isa());
    SCOPED_TRACE(w.key() + " " + cfg.to_json());
    EXPECT_TRUE(t.fits(w, cfg, hsw.isa()));
    ops::Kernel k = ops::make_kernel(t, w, cfg);
    std::string as = codegen::emit_assembly({schedule::lower(k.sch, k.args, "conv")}, hsw);
    EXPECT_NE(as.find("vpmaddubsw"), std::string::npos);
    EXPECT_EQ(as.find("vpsraw"), std::string::npos);
    auto [stores, madds] = hot_loop_spills_and_madds(as);
    ASSERT_GT(madds, 0);
    EXPECT_LE(4 * stores, madds) << stores << " ymm spill stores, " << madds << " vpmaddwd";
  }
}

}  // namespace
}  // namespace kiln::test
