#include "ops/conv2d_int8.h"

#include <stdexcept>
#include <string>

#include "ops/int8_registers.h"
#include "ops/int8_weight_range.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// 255 * 128 * C * KH * KW must stay below 2^31.
constexpr int64_t kMaxReduction = 65792;

constexpr const char* kFoldParam = "fold_kw";

struct Attrs {
  Conv2DAttrs a;
  int64_t pad_value;
  bool narrow;  // weight_range=[7]: weights within [-64, 64] (ops/int8_weight_range.h)
  bool fold;    // fold_kw=[1]: the dot runs over (kw, c) pairs (conv2d_int8.h)
};

// The channels of the folded conv: the C * KW bytes of a window row, in
// whole 4-byte words.
int64_t folded_channels(const Conv2DAttrs& a) { return round_up(a.in_channels * a.kernel_w, 4); }

// The weight's shape: [OCo, ICo, KH, KW, icb/4, ocb, 4], or folded
// [OCo, 1, KH, 1, Kp/4, ocb, 4].
std::vector<int64_t> weight_shape(const Attrs& at, int64_t icb, int64_t ocb) {
  const Conv2DAttrs& a = at.a;
  int64_t OCo = ceil_div(a.out_channels, ocb);
  if (at.fold) return {OCo, 1, a.kernel_h, 1, folded_channels(a) / 4, ocb, 4};
  return {OCo, ceil_div(a.in_channels, icb), a.kernel_h, a.kernel_w, icb / 4, ocb, 4};
}

// fold_kw's gather: cols[n, 0, hp, ow, k] = the padded input at row hp, column
// ow * sw + kw * dw, channel c (k = kw * C + c), or pad_value past C * KW. It
// reads the padded stage, whose bounds hold for every k: the lanes past
// C * KW read the last column's address, and the conv then reads cols without
// bounds tests.
Tensor gather_window_columns(const Tensor& padded, const Attrs& at) {
  const Conv2DAttrs& a = at.a;
  int64_t C = a.in_channels;
  return compute(
      {a.batch, 1, a.height + a.pad_top + a.pad_bottom, a.out_width(), folded_channels(a)},
      [&](const std::vector<Var>& i) {
        Expr kw = min(floordiv(i[4], make_int(C)), make_int(a.kernel_w - 1));
        Expr w = i[3] * a.stride_w + kw * a.dilation_w;
        return select(i[4] < C * a.kernel_w,
                      read(padded, {i[0], make_int(0), i[2], w, floormod(i[4], make_int(C))}),
                      make_int(at.pad_value, DataType::u8()));
      },
      "data_cols");
}

class Conv2dNCHWcInt8 final : public OpTemplate {
 public:
  std::string name() const override { return "conv2d_NCHWc_int8.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w).a;
    ConfigSpace space;
    detail::define_int8_channel_blocks(space, a);
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::All, 32);
    space.define_knob("unroll_kw", {0, 1});
    space.define_knob("oc_reg", {1, 2, 4});
    space.define_knob("oh_reg", {1, 2, 4});
    space.define_knob("kernel_outer", {0, 1});
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    int64_t icb = detail::int8_fallback_channel_block(a.in_channels);
    int64_t ocb = detail::int8_fallback_channel_block(a.out_channels);
    // The ow tile within the accumulators the target's dot lowering leaves
    // (ops/int8_registers.h): on AVX2 8 of the 16 ymm registers for 2 vectors of
    // 8 int32 lanes, where the fp32 rule's 12 spilled; 11 with 7-bit weights.
    int64_t owt = detail::fallback_ow_tile(
        a.out_width(), ocb, detail::int8_tile_isa(isa, ceil_div(ocb, isa.lanes()), at_.narrow));
    return detail::KnobValues()
        .knob("ic_bn", icb)
        .knob("oc_bn", ocb)
        .split("tile_ow", a.out_width(), {owt})
        .knob("unroll_kw", a.kernel_w <= 3)
        .knob("oc_reg", 1)
        .knob("oh_reg", 1)
        // The window outside the input-channel blocks: with the blocks outside and kw
        // unrolled, LLVM shares the broadcast input words of neighbouring kw taps across
        // the unrolled copies, keeps them live and spills the register tile (ResNet-18's
        // 3x3 layers ran at 60-70 % of the speed they reach this way, Zen 4).
        .knob("kernel_outer", a.kernel_h * a.kernel_w > 1)
        .in(space(w));
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    auto [icb, ocb] = blocks(w, cfg);
    int64_t ICo = ceil_div(a.in_channels, icb), OCo = ceil_div(a.out_channels, ocb);
    Tensor data = placeholder({a.batch, ICo, a.height, a.width, icb}, DataType::u8(), "data");
    std::vector<int64_t> ws = weight_shape(at_, icb, ocb);
    Tensor weight = placeholder({ws.begin(), ws.end()}, DataType::i8(), "weight");
    // Folded: the window's columns are channels of the gathered stage, so the
    // conv reads it at column ow and window column 0 (one kw, Kp/4 words).
    Tensor pad = detail::pad_u8_with_value(data, a, at_.pad_value);
    if (at_.fold) pad = gather_window_columns(pad, at_);
    IterVar ico = reduce_axis(ws[1], "ico"), kh = reduce_axis(a.kernel_h, "kh"),
            kw = reduce_axis(ws[3], "kw"), icw = reduce_axis(ws[4], "icw");
    Tensor out = ir::compute(
        {a.batch, OCo, a.out_height(), a.out_width(), ocb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = at_.fold ? Expr(i[3]) : i[3] * a.stride_w + kw->var * a.dilation_w;
          std::vector<Expr> da, wb;
          for (int j = 0; j < 4; ++j) {
            da.push_back(at(pad, i[0], ico->var, h, x, icw->var * 4 + j));
            wb.push_back(at(weight, i[1], ico->var, kh->var, kw->var, icw->var, i[4], j));
          }
          // 7-bit weights promise b in [-64, 64]: pmaddubsw without VNNI.
          Expr dot = at_.narrow ? dot4_u8i8_narrow_b(make_int(0, DataType::i32()), da, wb)
                                : dot4_u8i8(make_int(0, DataType::i32()), da, wb);
          return sum(dot, {ico, kh, kw, icw});
        },
        "conv_int8");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    detail::schedule_conv_nchwc(sch, inst, output, cfg, name(), 0);
    schedule_folded_stages(sch, inst);
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    auto [icb, ocb] = blocks(w, cfg);
    detail::ConvRegisterTile rt =
        detail::conv_register_tile(ceil_div(a.out_channels, ocb), a.out_height(), ocb, cfg);
    int64_t vectors = ceil_div(ocb, isa.lanes());
    return detail::int8_tile_fits(isa, rt.oc * rt.oh * cfg.split("tile_ow").back() * vectors,
                                  rt.oc * vectors, at_.narrow);
  }

  // With 7-bit weights the kernel is exact only for weights within [-64, 64]:
  // the tuner's and the tests' random weights are drawn from there.
  void fill_random_input(const Workload& w, size_t i, DataType t, void* data, int64_t n,
                         std::mt19937_64& rng) const override {
    if (i == 1 && attrs(w).narrow)
      fill_random_narrow(static_cast<int8_t*>(data), n, rng);
    else
      fill_random(t, data, n, rng);
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w).a;
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * a.in_channels *
           a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    auto [icb, ocb] = blocks(w, cfg);
    return {{a.batch, ceil_div(a.in_channels, icb), a.height, a.width, icb},
            weight_shape(at_, icb, ocb)};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w).a;
    auto [icb, ocb] = blocks(w, cfg);
    return {a.batch, ceil_div(a.out_channels, ocb), a.out_height(), a.out_width(), ocb};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    attrs(w);
    return {DataType::u8(), DataType::i8()};
  }
  DataType output_dtype(const Workload& w) const override {
    attrs(w);
    return DataType::i32();
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": an integer template has only reference_typed()");
  }

  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    // Plain names, not a structured binding: C++17 lambdas cannot capture one.
    const std::pair<int64_t, int64_t> block = blocks(w, cfg);
    const int64_t icb = block.first, ocb = block.second;
    if (in.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    auto* data = static_cast<const uint8_t*>(in[0]);
    auto* weight = static_cast<const int8_t*>(in[1]);
    auto* out = static_cast<int32_t*>(output);
    int64_t ICo = ceil_div(a.in_channels, icb), OCo = ceil_div(a.out_channels, ocb);
    int64_t OH = a.out_height(), OW = a.out_width();
    // The value a tap reads: the image, or pad_value outside it.
    auto value = [&](int64_t n, int64_t ico, int64_t ih, int64_t iw, int64_t ici) -> int64_t {
      bool inside = ih >= 0 && ih < a.height && iw >= 0 && iw < a.width;
      return inside ? data[(((n * ICo + ico) * a.height + ih) * a.width + iw) * icb + ici]
                    : at_.pad_value;
    };
    // The plain form: every channel of the padded blocks, window by window.
    auto plain = [&](int64_t n, int64_t oco, int64_t oh, int64_t ow, int64_t oci) {
      int64_t acc = 0;
      for (int64_t ico = 0; ico < ICo; ++ico)
        for (int64_t kh = 0; kh < a.kernel_h; ++kh)
          for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
            int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
            int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
            const int8_t* k =
                weight + (((oco * ICo + ico) * a.kernel_h + kh) * a.kernel_w + kw) * icb * ocb;
            for (int64_t ici = 0; ici < icb; ++ici)
              acc += value(n, ico, ih, iw, ici) * k[((ici / 4) * ocb + oci) * 4 + ici % 4];
          }
      return acc;
    };
    // fold_kw: word k of a window row is channel k % C of column k / C, or
    // pad_value past C * KW, as gather_window_columns reads it.
    auto folded = [&](int64_t n, int64_t oco, int64_t oh, int64_t ow, int64_t oci) {
      int64_t C = a.in_channels, Kp = folded_channels(a), acc = 0;
      for (int64_t kh = 0; kh < a.kernel_h; ++kh)
        for (int64_t k = 0; k < Kp; ++k) {
          int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
          int64_t iw = ow * a.stride_w + (k / C) * a.dilation_w - a.pad_left;
          int64_t v = k < C * a.kernel_w ? value(n, 0, ih, iw, k % C) : at_.pad_value;
          acc += v * weight[(((oco * a.kernel_h + kh) * (Kp / 4) + k / 4) * ocb + oci) * 4 + k % 4];
        }
      return acc;
    };
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oco = 0; oco < OCo; ++oco)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t oci = 0; oci < ocb; ++oci)
              out[(((n * OCo + oco) * OH + oh) * OW + ow) * ocb + oci] = static_cast<int32_t>(
                  at_.fold ? folded(n, oco, oh, ow, oci) : plain(n, oco, oh, ow, oci));
  }

  // fold_kw's two stages, at root with rows in parallel: the padding
  // vectorized over its channel block, and the gather unrolled over its Kp
  // bytes (constant offsets once unrolled; as one vector its lanes were a
  // 24-lane gather, which made the stem slower than the unfolded conv).
  static void schedule_folded_stages(schedule::Schedule& sch, const TemplateInstance& inst) {
    for (const Tensor& cols : input_tensors(inst.anchor)) {
      if (cols->is_placeholder || cols->name != "data_cols") continue;
      sch[cols]->unroll(sch[cols]->axis(4));
      for (const Tensor& pad : input_tensors(cols)) {
        if (pad->is_placeholder) continue;
        auto sp = sch[pad];
        sp->parallel(sp->fuse({sp->axis(0), sp->axis(1), sp->axis(2)}));
        sp->vectorize(sp->axis(4));
      }
    }
  }

  Attrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 data, int8 weight)");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDense);
    const auto& pv = w.get("pad_value");
    if (pv.size() != 1 || pv[0] < 0 || pv[0] > 255)
      detail::bad_workload(w, "pad_value needs one value in [0, 255]");
    if (a.in_channels * a.kernel_h * a.kernel_w > kMaxReduction)
      detail::bad_workload(
          w, "C * KH * KW > " + std::to_string(kMaxReduction) + " could overflow the int32 sum");
    bool fold = conv2d_int8_folds_kw(w);
    if (fold && !conv2d_int8_can_fold_kw(a))
      detail::bad_workload(w,
                           "fold_kw needs fewer than 4 input channels and a window wider than 1");
    return {a, pv[0], narrow_weights(w), fold};
  }

  std::pair<int64_t, int64_t> blocks(const Workload& w, const Config& cfg) const {
    int64_t icb = cfg.knob("ic_bn"), ocb = cfg.knob("oc_bn");
    if (icb < 4 || icb % 4 || ocb < 1)
      detail::bad_workload(w, "channel blocks " + std::to_string(icb) + "/" + std::to_string(ocb) +
                                  ": ic_bn must be a multiple of 4");
    return {icb, ocb};
  }
};

}  // namespace

const OpTemplate& conv2d_nchwc_int8_template() {
  static const Conv2dNCHWcInt8 t;
  return t;
}

Workload conv2d_int8_workload(const Conv2DAttrs& a, int64_t pad_value, bool narrow) {
  Workload w = conv2d_workload("conv2d_NCHWc_int8.x86", a);
  w.params.push_back({"pad_value", {pad_value}});
  w.dtype = "uint8";
  return narrow ? with_narrow_weights(std::move(w)) : w;
}

std::vector<int8_t> pack_conv2d_int8_weight(const int8_t* w, int64_t oc, int64_t ic, int64_t kh,
                                            int64_t kw, int64_t icb, int64_t ocb) {
  if (icb < 4 || icb % 4 || ocb < 1)
    throw std::invalid_argument("pack_conv2d_int8_weight: ic block " + std::to_string(icb) +
                                " must be a positive multiple of 4");
  int64_t ICo = ceil_div(ic, icb), OCo = ceil_div(oc, ocb);
  std::vector<int8_t> out(static_cast<size_t>(OCo * ICo * kh * kw * icb * ocb), 0);
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t ici = i % icb;
          size_t dst =
              ((((((o / ocb) * ICo + i / icb) * kh + y) * kw + x) * (icb / 4) + ici / 4) * ocb +
               o % ocb) *
                  4 +
              ici % 4;
          out[dst] = w[((o * ic + i) * kh + y) * kw + x];
        }
  return out;
}

bool conv2d_int8_folds_kw(const Workload& w) {
  for (const auto& [name, values] : w.params) {
    if (name != kFoldParam) continue;
    if (values.size() != 1 || values[0] != 1)
      detail::bad_workload(w, std::string(kFoldParam) + " must be [1] when present");
    return true;
  }
  return false;
}

bool conv2d_int8_can_fold_kw(const Conv2DAttrs& a) {
  return a.groups == 1 && a.in_channels < 4 && a.kernel_w > 1;
}

Workload with_folded_kw(Workload w) {
  if (!conv2d_int8_folds_kw(w)) w.params.push_back({kFoldParam, {1}});
  return w;
}

std::vector<int8_t> pack_conv2d_int8_weight_folded_kw(const int8_t* w, int64_t oc, int64_t ic,
                                                      int64_t kh, int64_t kw, int64_t ocb) {
  // [OC, ic, KH, KW] -> [OC, KW * ic, KH, 1] (k = x * ic + c), then the plain
  // packing with one block of Kp channels.
  std::vector<int8_t> rows(static_cast<size_t>(oc * ic * kw * kh));
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t c = 0; c < ic; ++c)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          rows[static_cast<size_t>((o * ic * kw + x * ic + c) * kh + y)] =
              w[((o * ic + c) * kh + y) * kw + x];
  return pack_conv2d_int8_weight(rows.data(), oc, ic * kw, kh, 1, round_up(ic * kw, 4), ocb);
}

std::vector<int8_t> pack_conv2d_int8_weight(const int8_t* w, const Workload& wl,
                                            const schedule::Config& cfg) {
  const std::vector<int64_t>& k = wl.get("kernel");
  int64_t icb = cfg.knob("ic_bn"), ocb = cfg.knob("oc_bn");
  if (conv2d_int8_folds_kw(wl))
    return pack_conv2d_int8_weight_folded_kw(w, k[0], k[1], k[2], k[3], ocb);
  return pack_conv2d_int8_weight(w, k[0], k[1], k[2], k[3], icb, ocb);
}

std::vector<uint8_t> nchw_to_nchwc_u8(const uint8_t* x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int64_t cb, uint8_t fill) {
  int64_t C = ceil_div(c, cb);
  std::vector<uint8_t> out(static_cast<size_t>(n * C * h * w * cb), fill);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t z = 0; z < w; ++z)
          out[((((b * C + ch / cb) * h + y) * w + z) * cb) + ch % cb] =
              x[((b * c + ch) * h + y) * w + z];
  return out;
}

void detail::define_int8_channel_blocks(ConfigSpace& space, const Conv2DAttrs& a) {
  std::vector<int64_t> icbs, ocbs;
  for (int64_t v : {4, 8, 16, 32, 64})
    if (v <= round_up(a.in_channels, 4)) icbs.push_back(v);
  for (int64_t v : {4, 8, 16, 32, 48, 64})
    if (v <= round_up(a.out_channels, 4)) ocbs.push_back(v);
  space.define_knob("ic_bn", icbs);
  space.define_knob("oc_bn", ocbs);
}

// Coordinates are clamped so that the unselected load of the select stays in
// bounds.
int64_t detail::int8_fallback_channel_block(int64_t channels) {
  int64_t c4 = round_up(channels, 4);
  return c4 % 16 == 0 ? 16 : c4 % 8 == 0 ? 8 : 4;
}

Tensor detail::pad_u8_with_value(const Tensor& data, const Conv2DAttrs& a, int64_t value) {
  if (a.pad_top == 0 && a.pad_left == 0 && a.pad_bottom == 0 && a.pad_right == 0) return data;
  std::vector<Expr> shape = data->shape;
  int64_t H = a.height, W = a.width;
  shape[2] = make_int(H + a.pad_top + a.pad_bottom);
  shape[3] = make_int(W + a.pad_left + a.pad_right);
  return compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr h = i[2] - a.pad_top, w = i[3] - a.pad_left;
        Expr inside = logical_and(logical_and(h >= 0, h < H), logical_and(w >= 0, w < W));
        std::vector<Expr> idx(i.begin(), i.end());
        idx[2] = max(min(h, make_int(H - 1)), make_int(0));
        idx[3] = max(min(w, make_int(W - 1)), make_int(0));
        return select(inside, read(data, idx), make_int(value, DataType::u8()));
      },
      "data_pad");
}

}  // namespace kiln::ops
