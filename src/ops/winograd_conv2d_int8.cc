#include "ops/winograd_conv2d_int8.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/conv2d_int8.h"
#include "ops/winograd_common.h"
#include "ops/winograd_conv2d.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;

namespace {

constexpr const char* kName = "conv2d_winograd_NCHWc_int8.x86";
constexpr const char* kDirectName = "conv2d_NCHWc_int8.x86";

// 4 * 9 * C * 255 * 128 < 2^31: the exactness bound (winograd_conv2d_int8.h).
constexpr int64_t kMaxChannels = 1827;
// The transformed weight's bound for int8 weights: 9 * 128 (G2's row sums of
// absolute values are at most 3).
constexpr int kMaxTransformedWeight = 1152;

constexpr int64_t kM = 2, kAlpha = 4;  // F(2x2, 3x3)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const std::vector<int64_t>& p_tile_values() {
  static const std::vector<int64_t> v = {2, 4, 6, 8, 12, 16};
  return v;
}

// The sizes one config gives a workload.
struct Geometry {
  Conv2DAttrs a;
  int64_t pad_value;
  int64_t icb, ocb, ICo, OCo;
  int64_t OH, OW, nH, nW, P, p_tile, P_pad;
};

// floor(v / 4) of an int32 value, as the kernel's arithmetic shift computes it.
int32_t floor_div4(uint32_t wrapped) {
  int64_t v = static_cast<int32_t>(wrapped);
  return static_cast<int32_t>((v - (((v % 4) + 4) % 4)) / 4);
}

class Conv2dWinogradNCHWcInt8 final : public OpTemplate {
 public:
  std::string name() const override { return kName; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    ConfigSpace space;
    detail::define_int8_channel_blocks(space, attrs(w).first);
    space.define_knob("p_tile", p_tile_values());
    space.define_knob("unroll_ci", {0, 1});
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w).first;
    int64_t icb = detail::int8_fallback_channel_block(a.in_channels);
    int64_t ocb = detail::int8_fallback_channel_block(a.out_channels);
    int64_t vectors = ceil_div(ocb, isa.lanes());
    int64_t rows = p_tile_values().front();
    for (int64_t v : p_tile_values())
      if (v <= 16 && accumulators_fit(isa, v, vectors)) rows = v;
    return detail::KnobValues()
        .knob("ic_bn", icb)
        .knob("oc_bn", ocb)
        .knob("p_tile", rows)
        // Not unrolled: unrolled, LLVM reassociates the chain of exact int32
        // adds into trees of products that outlive the register file (AVX2:
        // ResNet-18 8.2 against 6.3 ms with F(2x2) everywhere; AVX-512BW 4.0
        // against 3.6 ms, Zen 5).
        .knob("unroll_ci", 0)
        .in(space(w));
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Geometry g = geometry(w, cfg);
    return accumulators_fit(isa, g.p_tile, ceil_div(g.ocb, isa.lanes()));
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    const winograd::Transforms& t = winograd::transforms(kM);
    const Conv2DAttrs& a = g.a;
    Tensor data = placeholder({a.batch, g.ICo, a.height, a.width, g.icb}, DataType::u8(), "data");
    Tensor U = placeholder({kAlpha, kAlpha, g.OCo, g.ICo, g.icb / 2, g.ocb, 2}, DataType::i16(),
                           "weight_winograd");
    // Every tile's window in bounds: rows up to nH * m + 2 of the padded input,
    // the extension filled with pad_value too (it meets only outputs past OH, OW).
    Conv2DAttrs extended = a;
    extended.pad_bottom = g.nH * kM + 2 - a.height - a.pad_top;
    extended.pad_right = g.nW * kM + 2 - a.width - a.pad_left;
    Tensor pad = detail::pad_u8_with_value(data, extended, g.pad_value);

    // V = B^T d B in int16 (|V| <= 1020).
    Tensor V = ir::compute(
        {kAlpha, kAlpha, g.ICo, g.P_pad, g.icb},
        [&](const std::vector<Var>& i) {
          Expr p = min(Expr(i[3]), make_int(g.P - 1));  // padding rows repeat the last tile
          Expr n = p / (g.nH * g.nW), th = (p / g.nW) % g.nH, tw = p % g.nW;
          auto d = [&](int r, int c) {
            return cast(DataType::i16(), at(pad, n, i[2], th * kM + r, tw * kM + c, i[4]));
          };
          return winograd::select_row(i[0], kAlpha, [&](int eps) {
            return winograd::linear_combination(t.BT[eps], [&](int r) {
              return winograd::select_row(i[1], kAlpha, [&](int nu) {
                return winograd::linear_combination(t.BT[nu], [&](int c) { return d(r, c); });
              });
            });
          });
        },
        "winograd_V");

    // M = V x U per (eps, nu), over input channel pairs: pmaddwd's int16 pairs.
    IterVar cb = reduce_axis(g.ICo, "cb"), cp = reduce_axis(g.icb / 2, "cp");
    Tensor M = ir::compute(
        {kAlpha, kAlpha, g.OCo, g.P_pad, g.ocb},
        [&](const std::vector<Var>& i) {
          Expr c0 = cp->var * 2;
          Expr dot = dot2_i16(make_int(0, DataType::i32()), at(V, i[0], i[1], cb->var, i[3], c0),
                              at(V, i[0], i[1], cb->var, i[3], c0 + 1),
                              at(U, i[0], i[1], i[2], cb->var, cp->var, i[4], 0),
                              at(U, i[0], i[1], i[2], cb->var, cp->var, i[4], 1));
          return sum(dot, {cb, cp});
        },
        "winograd_M");

    // Y = A^T M A / 4: output (oh, ow) is element (oh % 2, ow % 2) of its tile.
    Tensor Y = ir::compute(
        {a.batch, g.OCo, g.OH, g.OW, g.ocb},
        [&](const std::vector<Var>& i) {
          Expr r1 = i[2] % kM, r2 = i[3] % kM;
          Expr p = (i[0] * g.nH + i[2] / kM) * g.nW + i[3] / kM;
          Expr y = winograd::select_row(r1, kM, [&](int row) {
            return winograd::linear_combination(t.AT[row], [&](int eps) {
              return winograd::select_row(r2, kM, [&](int col) {
                return winograd::linear_combination(t.AT[col], [&](int nu) {
                  return at(M, make_int(eps), make_int(nu), i[1], p, i[4]);
                });
              });
            });
          });
          return floordiv(y, make_int(4, DataType::i32()));
        },
        "winograd_Y");
    return {{data, U}, Y};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    winograd::schedule_stages(sch, inst, output, name(), kM, cfg.knob("p_tile"),
                              cfg.knob("unroll_ci") != 0);
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w).first;
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * a.in_channels * 9;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    return {{g.a.batch, g.ICo, g.a.height, g.a.width, g.icb},
            {kAlpha, kAlpha, g.OCo, g.ICo, g.icb / 2, g.ocb, 2}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    return {g.a.batch, g.OCo, g.OH, g.OW, g.ocb};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    attrs(w);
    return {DataType::u8(), DataType::i16()};
  }
  DataType output_dtype(const Workload& w) const override {
    attrs(w);
    return DataType::i32();
  }

  // U as the packing of random int8 weights could make it: within +-1152.
  void fill_random_input(const Workload& w, size_t i, DataType t, void* data, int64_t n,
                         std::mt19937_64& rng) const override {
    if (i != 1) return fill_random(t, data, n, rng);
    std::uniform_int_distribution<int> d(-kMaxTransformedWeight, kMaxTransformedWeight);
    auto* p = static_cast<int16_t*>(data);
    for (int64_t k = 0; k < n; ++k) p[k] = static_cast<int16_t>(d(rng));
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": an integer template has only reference_typed()");
  }

  // The algorithm itself, tile by tile, from the U it is given, in the
  // kernel's integer arithmetic (int32 sums wrapping, then floor(/4)), over
  // every channel of the padded blocks: equal to the kernel for any U.
  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    if (in.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    Geometry g = geometry(w, cfg);
    const winograd::Transforms& t = winograd::transforms(kM);
    const Conv2DAttrs& a = g.a;
    auto* data = static_cast<const uint8_t*>(in[0]);
    auto* U = static_cast<const int16_t*>(in[1]);
    auto* out = static_cast<int32_t*>(output);
    const int64_t A = kAlpha, C = g.ICo * g.icb;
    std::vector<int64_t> V(static_cast<size_t>(A * A * C));
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t th = 0; th < g.nH; ++th)
        for (int64_t tw = 0; tw < g.nW; ++tw) {
          for (int64_t c = 0; c < C; ++c) input_tile(g, t, data, n, th, tw, c, &V);
          for (int64_t oc = 0; oc < g.OCo * g.ocb; ++oc) {
            uint32_t Mt[kAlpha * kAlpha];
            for (int64_t ev = 0; ev < A * A; ++ev) {
              uint32_t s = 0;
              int64_t e = ev / A, v = ev % A;
              for (int64_t c = 0; c < C; ++c) {
                int64_t u =
                    U[(((((e * A + v) * g.OCo + oc / g.ocb) * g.ICo + c / g.icb) * (g.icb / 2) +
                        (c % g.icb) / 2) *
                           g.ocb +
                       oc % g.ocb) *
                          2 +
                      c % 2];
                s += static_cast<uint32_t>(static_cast<int32_t>(V[ev * C + c] * u));
              }
              Mt[ev] = s;
            }
            for (int64_t r = 0; r < kM; ++r)
              for (int64_t q = 0; q < kM; ++q) {
                int64_t oh = th * kM + r, ow = tw * kM + q;
                if (oh >= g.OH || ow >= g.OW) continue;
                uint32_t s = 0;
                for (int64_t e = 0; e < A; ++e)
                  for (int64_t v = 0; v < A; ++v)
                    s += static_cast<uint32_t>(static_cast<int64_t>(t.AT[r][e] * t.AT[q][v])) *
                         Mt[e * A + v];
                out[(((n * g.OCo + oc / g.ocb) * g.OH + oh) * g.OW + ow) * g.ocb + oc % g.ocb] =
                    floor_div4(s);
              }
          }
        }
  }

  Geometry geometry(const Workload& w, const Config& cfg) const {
    auto [a, pad_value] = attrs(w);
    Geometry g{};
    g.a = a;
    g.pad_value = pad_value;
    g.icb = cfg.knob("ic_bn");
    g.ocb = cfg.knob("oc_bn");
    if (g.icb < 4 || g.icb % 4 || g.ocb < 1)
      detail::bad_workload(w, "channel blocks " + std::to_string(g.icb) + "/" +
                                  std::to_string(g.ocb) + ": ic_bn must be a multiple of 4");
    g.ICo = ceil_div(a.in_channels, g.icb);
    g.OCo = ceil_div(a.out_channels, g.ocb);
    g.OH = a.out_height();
    g.OW = a.out_width();
    g.nH = ceil_div(g.OH, kM);
    g.nW = ceil_div(g.OW, kM);
    g.P = a.batch * g.nH * g.nW;
    g.p_tile = cfg.knob("p_tile");
    g.P_pad = ceil_div(g.P, g.p_tile) * g.p_tile;
    return g;
  }

 private:
  // The attributes and pad_value of a workload of this template.
  std::pair<Conv2DAttrs, int64_t> attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 data, int8 weight)");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDense);
    if (!winograd_int8_applies(a))
      detail::bad_workload(w,
                           "integer Winograd needs a 3x3 kernel, stride 1, dilation 1 and at "
                           "most " +
                               std::to_string(kMaxChannels) + " input channels");
    const auto& pv = w.get("pad_value");
    if (pv.size() != 1 || pv[0] < 0 || pv[0] > 255)
      detail::bad_workload(w, "pad_value needs one value in [0, 255]");
    return {a, pv[0]};
  }

  // p_tile rows of `vectors` accumulators beside the weight vectors, the
  // broadcast V pair and a product.
  static bool accumulators_fit(const Isa& isa, int64_t rows, int64_t vectors) {
    return rows * vectors + vectors + 2 <= isa.vector_registers;
  }

  // V[., ., c] of tile (n, th, tw): B^T d B, d the 4x4 window of channel c
  // (pad_value outside the image).
  static void input_tile(const Geometry& g, const winograd::Transforms& t, const uint8_t* data,
                         int64_t n, int64_t th, int64_t tw, int64_t c, std::vector<int64_t>* V) {
    const Conv2DAttrs& a = g.a;
    const int64_t A = kAlpha, C = g.ICo * g.icb;
    int64_t d[kAlpha][kAlpha], tmp[kAlpha][kAlpha];
    for (int64_t i = 0; i < A; ++i)
      for (int64_t j = 0; j < A; ++j) {
        int64_t h = th * kM + i - a.pad_top, x = tw * kM + j - a.pad_left;
        bool inside = h >= 0 && h < a.height && x >= 0 && x < a.width;
        d[i][j] =
            inside
                ? data[(((n * g.ICo + c / g.icb) * a.height + h) * a.width + x) * g.icb + c % g.icb]
                : g.pad_value;
      }
    for (int64_t e = 0; e < A; ++e)
      for (int64_t j = 0; j < A; ++j) {
        int64_t s = 0;
        for (int64_t i = 0; i < A; ++i) s += static_cast<int64_t>(t.BT[e][i]) * d[i][j];
        tmp[e][j] = s;
      }
    for (int64_t e = 0; e < A; ++e)
      for (int64_t v = 0; v < A; ++v) {
        int64_t s = 0;
        for (int64_t j = 0; j < A; ++j) s += tmp[e][j] * static_cast<int64_t>(t.BT[v][j]);
        (*V)[(e * A + v) * C + c] = s;
      }
  }
};

}  // namespace

const OpTemplate& conv2d_winograd_nchwc_int8_template() {
  static const Conv2dWinogradNCHWcInt8 t;
  return t;
}

// The float template's shapes, with few enough channels that 4 |conv| fits int32.
bool winograd_int8_applies(const Conv2DAttrs& a) {
  return winograd_applies(a) && a.dilation_h == 1 && a.dilation_w == 1 &&
         a.in_channels <= kMaxChannels;
}

Workload winograd_int8_workload(const Workload& direct) {
  if (direct.template_name != kDirectName)
    detail::bad_workload(direct, std::string("is not a ") + kDirectName + " workload");
  Workload w = direct;
  w.template_name = kName;
  w.params.erase(std::remove_if(w.params.begin(), w.params.end(),
                                [](const auto& p) { return p.first == "fold_kw"; }),
                 w.params.end());
  return w;
}

std::vector<int16_t> winograd_int8_pack_weight(const Workload& w, const Config& cfg,
                                               const int8_t* oihw) {
  const auto& t_ =
      static_cast<const Conv2dWinogradNCHWcInt8&>(conv2d_winograd_nchwc_int8_template());
  Geometry g = t_.geometry(w, cfg);
  const std::vector<std::vector<int>>& G = winograd::integer_g2();
  const int64_t A = kAlpha, C = g.a.in_channels, OC = g.a.out_channels;
  std::vector<int16_t> U(static_cast<size_t>(A * A * g.OCo * g.ICo * g.icb * g.ocb), 0);
  int64_t tmp[kAlpha][3];
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t c = 0; c < C; ++c) {
      const int8_t* k = oihw + (oc * C + c) * 9;
      for (int64_t e = 0; e < A; ++e)  // tmp = G2 g
        for (int64_t j = 0; j < 3; ++j) {
          int64_t s = 0;
          for (int64_t i = 0; i < 3; ++i) s += G[e][i] * k[i * 3 + j];
          tmp[e][j] = s;
        }
      for (int64_t e = 0; e < A; ++e)  // U = tmp G2^T
        for (int64_t v = 0; v < A; ++v) {
          int64_t s = 0;
          for (int64_t j = 0; j < 3; ++j) s += tmp[e][j] * G[v][j];
          U[(((((e * A + v) * g.OCo + oc / g.ocb) * g.ICo + c / g.icb) * (g.icb / 2) +
              (c % g.icb) / 2) *
                 g.ocb +
             oc % g.ocb) *
                2 +
            c % 2] = static_cast<int16_t>(s);
        }
    }
  return U;
}

}  // namespace kiln::ops
