#include "ops/winograd_conv2d.h"

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "ops/winograd_common.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

using winograd::linear_combination;
using winograd::select_row;
using winograd::Transforms;
using winograd::transforms;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The sizes one config gives a workload. A dilated convolution is dh x dw
// independent 3x3 convolutions, one per phase (a, b) of the output (the rows
// oh with oh % dh == a read only the input rows of that phase: oh + k dh);
// every phase is cut into the same nH x nW grid of tiles, sized for phase 0,
// the largest (OHq = ceil(OH / dh) rows).
struct Geometry {
  Conv2DAttrs a;
  int64_t m = 0, alpha = 0, icb = 0, ocb = 0, ICo = 0, OCo = 0;
  int64_t dh = 1, dw = 1;  // dilation: the number of phases in each direction
  bool two_pass = false;   // the transforms in two passes (transform_passes 2)
  int64_t OH = 0, OW = 0, OHq = 0, OWq = 0, nH = 0, nW = 0, P = 0, p_tile = 0, P_pad = 0;
};

// Tile p's place: batch n, phase (a, b), tile (th, tw) of that phase's grid.
// Tiles are numbered n, a, b, th, tw from the outermost.
struct TileOrigin {
  Expr n, a, b, th, tw;
};

TileOrigin tile_origin(const Geometry& g, const Expr& p) {
  TileOrigin o;
  o.th = (p / g.nW) % g.nH;
  o.tw = p % g.nW;
  Expr image = p / (g.nH * g.nW);  // n * dh * dw + a * dw + b
  if (g.dh == 1 && g.dw == 1) {
    o.n = image;
    o.a = o.b = make_int(0);
  } else {
    o.n = image / (g.dh * g.dw);
    o.a = (image / g.dw) % g.dh;
    o.b = image % g.dw;
  }
  return o;
}

// The inverse of tile_origin.
Expr tile_index(const Geometry& g, const Expr& n, const Expr& a, const Expr& b, const Expr& th,
                const Expr& tw) {
  Expr image = g.dh == 1 && g.dw == 1 ? n : (n * g.dh + a) * g.dw + b;
  return (image * g.nH + th) * g.nW + tw;
}

const std::vector<int64_t>& p_tile_values() {
  static const std::vector<int64_t> v = {2, 4, 6, 8, 12, 16};
  return v;
}

// Whether the fallback takes F(4x4): where every phase has room for its
// tiles (sides of 8 or more). A dilated convolution's phases are small (FCN's
// dilation 4 on 28 x 28: 7 x 7) but many: there F(4x4) also pays where its
// GEMM rows, padded to p_tile, cost no more than F(2x2)'s (36 against 16
// products per row). Without dilation the first rule alone, as measured on
// ResNet's 7 x 7 maps.
bool f4_pays(const Conv2DAttrs& a, int64_t p_tile) {
  const int64_t dh = a.dilation_h, dw = a.dilation_w;
  const int64_t OHq = ceil_div(a.out_height(), dh), OWq = ceil_div(a.out_width(), dw);
  if (OHq >= 8 && OWq >= 8) return true;
  if (dh == 1 && dw == 1) return false;
  auto gemm_cost = [&](int64_t m) {
    int64_t tiles = a.batch * dh * dw * ceil_div(OHq, m) * ceil_div(OWq, m);
    return ceil_div(tiles, p_tile) * p_tile * (m + 2) * (m + 2);
  };
  return gemm_cost(4) <= gemm_cost(2);
}

// V = B^T d B for every tile: [alpha, alpha, ICo, P_pad, icb]. In one
// expression per element, or (g.two_pass) in two passes, rows first,
// rows[r][nu] = sum_j BT[nu][j] d[r][j], then columns, V[eps][nu] =
// sum_i BT[eps][i] rows[i][nu], so that each pass holds one row or column of
// the tile (6 inputs, 6 outputs): the whole tile at once is 36 partial sums,
// 72 vectors for 16 channels on AVX2's 8 lanes, which spilled five times over.
Tensor input_transform(const Geometry& g, const Tensor& pad) {
  const Transforms& t = transforms(g.m);
  auto d = [&](const Expr& tile, const Expr& cb, const Expr& r, const Expr& c, const Expr& ch) {
    Expr p = min(tile, make_int(g.P - 1));  // padding rows repeat the last tile
    TileOrigin o = tile_origin(g, p);
    return at(pad, o.n, cb, (o.th * g.m + r) * g.dh + o.a, (o.tw * g.m + c) * g.dw + o.b, ch);
  };
  if (!g.two_pass)
    return ir::compute(
        {g.alpha, g.alpha, g.ICo, g.P_pad, g.icb},
        [&](const std::vector<Var>& i) {
          return select_row(i[0], g.alpha, [&](int eps) {
            return linear_combination(t.BT[eps], [&](int r) {
              return select_row(i[1], g.alpha, [&](int nu) {
                return linear_combination(
                    t.BT[nu], [&](int c) { return d(i[3], i[2], make_int(r), make_int(c), i[4]); });
              });
            });
          });
        },
        "winograd_V");
  Tensor rows = ir::compute(
      {g.ICo, g.P_pad, g.alpha, g.alpha, g.icb},
      [&](const std::vector<Var>& i) {
        return select_row(i[3], g.alpha, [&](int nu) {
          return linear_combination(t.BT[nu],
                                    [&](int c) { return d(i[1], i[0], i[2], make_int(c), i[4]); });
        });
      },
      winograd::kRowPassName);
  return ir::compute(
      {g.alpha, g.alpha, g.ICo, g.P_pad, g.icb},
      [&](const std::vector<Var>& i) {
        return select_row(i[0], g.alpha, [&](int eps) {
          return linear_combination(
              t.BT[eps], [&](int r) { return at(rows, i[2], i[3], make_int(r), i[1], i[4]); });
        });
      },
      "winograd_V");
}

// Y = A^T M A: output (oh, ow) is element (qh % m, qw % m) of its phase's
// tile, qh = oh / dh (oh itself without dilation). With g.two_pass and no
// dilation, in two passes as V: columns first, cols[eps][q] = sum_nu AT[q][nu]
// M[eps][nu], then rows, Y[r][q] = sum_eps AT[r][eps] cols[eps][q].
Tensor output_transform(const Geometry& g, const Tensor& M) {
  const Transforms& t = transforms(g.m);
  Tensor cols;
  if (g.two_pass && g.dh == 1 && g.dw == 1)
    cols = ir::compute(
        {g.OCo, g.P_pad, g.alpha, g.m, g.ocb},
        [&](const std::vector<Var>& i) {
          return select_row(i[3], g.m, [&](int q) {
            return linear_combination(
                t.AT[q], [&](int nu) { return at(M, i[2], make_int(nu), i[0], i[1], i[4]); });
          });
        },
        winograd::kColumnPassName);
  return ir::compute(
      {g.a.batch, g.OCo, g.OH, g.OW, g.ocb},
      [&](const std::vector<Var>& i) {
        Expr qh = g.dh > 1 ? i[2] / g.dh : Expr(i[2]), qw = g.dw > 1 ? i[3] / g.dw : Expr(i[3]);
        Expr r1 = qh % g.m, r2 = qw % g.m;
        Expr p = tile_index(g, i[0], i[2] % g.dh, i[3] % g.dw, qh / g.m, qw / g.m);
        return select_row(r1, g.m, [&](int row) {
          return linear_combination(t.AT[row], [&](int eps) {
            if (cols) return at(cols, i[1], p, make_int(eps), r2, i[4]);
            return select_row(r2, g.m, [&](int col) {
              return linear_combination(t.AT[col], [&](int nu) {
                return at(M, make_int(eps), make_int(nu), i[1], p, i[4]);
              });
            });
          });
        });
      },
      "winograd_Y");
}

// Two passes where a whole tile's vectors (alpha^2 values of a channel
// block) outnumber the registers more than twice: F(4x4) with 16 channels on
// AVX2 (72 ymm against 16), where the one-pass transforms spilled 144 and 88
// ymm stores per tile and two passes ran 2-4 % faster (ab_convs.py, Zen 4,
// one thread). With 36 zmm against 32 (AVX-512) two passes ran 1-4 % slower,
// with F(2x2) on AVX2 (32 ymm) no faster.
int64_t fallback_transform_passes(int64_t m, int64_t channel_block, const Isa& isa) {
  int64_t vectors = (m + 2) * (m + 2) * ceil_div(channel_block, isa.lanes());
  return vectors > 2 * isa.vector_registers ? 2 : 1;
}

// conv2d_winograd_NCHWc.x86 (see winograd_conv2d.h).
class Conv2dWinogradNCHWc final : public OpTemplate {
 public:
  std::string name() const override { return "conv2d_winograd_NCHWc.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    ConfigSpace space;
    space.define_split("tile_ic", a.in_channels, 2, SplitPolicy::Factors, 64);
    space.define_split("tile_oc", a.out_channels, 2, SplitPolicy::Factors, 64);
    space.define_knob("wino_m", {2, 4});
    space.define_knob("p_tile", p_tile_values());
    space.define_knob("unroll_ci", {0, 1});
    space.define_knob("transform_passes", {1, 2}, schedule::KnobOrigin::AddedLater);
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t icb = detail::fallback_channel_block(a.in_channels);
    int64_t ocb = detail::fallback_channel_block(a.out_channels);
    int64_t vectors_per_row = ceil_div(ocb, isa.lanes());
    int64_t cap = std::min<int64_t>(16, isa.accumulator_budget() / vectors_per_row);
    int64_t rows = p_tile_values().front();
    for (int64_t v : p_tile_values())
      if (v <= cap) rows = v;
    // F(4x4) where the map has room for its tiles and a channel block is at
    // most two of the ISA's vectors: its 36 input and 16 output tile
    // elements per block, unrolled, fit the compile budget (schedule/
    // code_size.h); 16 channels on 4-lane NEON would not.
    bool narrow = ceil_div(std::max(icb, ocb), isa.lanes()) > 2;
    bool wide_f4 = !narrow && f4_pays(a, rows);
    int64_t m = wide_f4 ? 4 : 2;
    return detail::KnobValues()
        .split("tile_ic", a.in_channels, {icb})
        .split("tile_oc", a.out_channels, {ocb})
        .knob("wino_m", m)
        .knob("p_tile", rows)
        .knob("unroll_ci", 1)
        .knob("transform_passes", fallback_transform_passes(m, std::max(icb, ocb), isa))
        .in(space(w));
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Geometry g = geometry(w, cfg);
    return g.p_tile * ceil_div(g.ocb, isa.lanes()) <= isa.vector_registers;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    const Conv2DAttrs& a = g.a;
    Tensor data = placeholder({a.batch, g.ICo, a.height, a.width, g.icb}, DataType::f32(), "data");
    Tensor U = placeholder({g.alpha, g.alpha, g.OCo, g.ICo, g.icb, g.ocb}, DataType::f32(),
                           "weight_winograd");
    // Every tile's window in bounds: phase rows up to nH * m + 2, that is
    // padded rows up to (nH * m + 2) * dh.
    int64_t bottom = (g.nH * g.m + 2) * g.dh - a.height - a.pad_top;
    int64_t right = (g.nW * g.m + 2) * g.dw - a.width - a.pad_left;
    Tensor pad = detail::pad_spatial(data, a.pad_top, a.pad_left, bottom, right, "data_pad");

    Tensor V = input_transform(g, pad);

    // M = V x U per (eps, nu): alpha^2 GEMMs over the input channels.
    IterVar cb = reduce_axis(g.ICo, "cb"), ci = reduce_axis(g.icb, "ci");
    Tensor M = ir::compute(
        {g.alpha, g.alpha, g.OCo, g.P_pad, g.ocb},
        [&](const std::vector<Var>& i) {
          return sum(at(V, i[0], i[1], cb->var, i[3], ci->var) *
                         at(U, i[0], i[1], i[2], cb->var, ci->var, i[4]),
                     {cb, ci});
        },
        "winograd_M");

    Tensor Y = output_transform(g, M);
    return {{data, U}, Y, {{"dilation_h", g.dh}, {"dilation_w", g.dw}}};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    winograd::schedule_stages(sch, inst, output, name(), winograd_tile(cfg), cfg.knob("p_tile"),
                              cfg.knob("unroll_ci") != 0, inst.facts.at("dilation_h"),
                              inst.facts.at("dilation_w"));
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * a.in_channels * 9;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    return {{g.a.batch, g.ICo, g.a.height, g.a.width, g.icb},
            {g.alpha, g.alpha, g.OCo, g.ICo, g.icb, g.ocb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    return {g.a.batch, g.OCo, g.OH, g.OW, g.ocb};
  }

  // The algorithm itself in double, tile by tile, from the transformed
  // weight it is given (the tuner verifies with random U).
  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    Geometry g = geometry(w, cfg);
    const Transforms& t = transforms(g.m);
    const Conv2DAttrs& a = g.a;
    const float *data = inputs[0], *U = inputs[1];
    const int64_t A = g.alpha, C = a.in_channels;
    std::vector<double> V(static_cast<size_t>(A * A * C)), d(A * A), tmp(A * A);
    std::vector<double> Mt(A * A), out(g.m * A);
    for (int64_t p = 0; p < g.P; ++p) {
      const int64_t image = p / (g.nH * g.nW), n = image / (g.dh * g.dw);
      const int64_t ph = image / g.dw % g.dh, pw = image % g.dw;  // the phase
      const int64_t th = p / g.nW % g.nH, tw = p % g.nW;
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t i = 0; i < A; ++i)
          for (int64_t j = 0; j < A; ++j) {
            int64_t h = (th * g.m + i) * g.dh + ph - a.pad_top;
            int64_t x = (tw * g.m + j) * g.dw + pw - a.pad_left;
            bool inside = h >= 0 && h < a.height && x >= 0 && x < a.width;
            d[i * A + j] =
                inside ? data[(((n * g.ICo + c / g.icb) * a.height + h) * a.width + x) * g.icb +
                              c % g.icb]
                       : 0.0;
          }
        for (int64_t e = 0; e < A; ++e)  // tmp = B^T d
          for (int64_t j = 0; j < A; ++j) {
            double s = 0;
            for (int64_t i = 0; i < A; ++i) s += t.BT[e][i] * d[i * A + j];
            tmp[e * A + j] = s;
          }
        for (int64_t e = 0; e < A; ++e)  // V = tmp B
          for (int64_t v = 0; v < A; ++v) {
            double s = 0;
            for (int64_t j = 0; j < A; ++j) s += tmp[e * A + j] * t.BT[v][j];
            V[(e * A + v) * C + c] = s;
          }
      }
      for (int64_t oc = 0; oc < a.out_channels; ++oc) {
        int64_t ob = oc / g.ocb, o = oc % g.ocb;
        for (int64_t ev = 0; ev < A * A; ++ev) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c)
            s += V[ev * C + c] *
                 U[(((ev * g.OCo + ob) * g.ICo + c / g.icb) * g.icb + c % g.icb) * g.ocb + o];
          Mt[ev] = s;
        }
        for (int64_t r = 0; r < g.m; ++r)  // out = A^T M
          for (int64_t v = 0; v < A; ++v) {
            double s = 0;
            for (int64_t e = 0; e < A; ++e) s += t.AT[r][e] * Mt[e * A + v];
            out[r * A + v] = s;
          }
        for (int64_t r = 0; r < g.m; ++r)  // Y = out A
          for (int64_t q = 0; q < g.m; ++q) {
            int64_t oh = (th * g.m + r) * g.dh + ph, ow = (tw * g.m + q) * g.dw + pw;
            if (oh >= g.OH || ow >= g.OW) continue;
            double s = 0;
            for (int64_t v = 0; v < A; ++v) s += out[r * A + v] * t.AT[q][v];
            output[(((n * g.OCo + ob) * g.OH + oh) * g.OW + ow) * g.ocb + o] =
                static_cast<float>(s);
          }
      }
    }
  }

  Geometry geometry(const Workload& w, const Config& cfg) const {
    Geometry g{attrs(w)};
    g.m = winograd_tile(cfg);
    g.alpha = g.m + 2;
    g.icb = cfg.split("tile_ic").back();
    g.ocb = cfg.split("tile_oc").back();
    if (g.icb < 1 || g.ocb < 1 || g.a.in_channels % g.icb || g.a.out_channels % g.ocb)
      detail::bad_workload(w, "channel blocks " + std::to_string(g.icb) + "/" +
                                  std::to_string(g.ocb) + " must divide the channels");
    g.ICo = g.a.in_channels / g.icb;
    g.OCo = g.a.out_channels / g.ocb;
    g.dh = g.a.dilation_h;
    g.dw = g.a.dilation_w;
    g.OH = g.a.out_height();
    g.OW = g.a.out_width();
    g.OHq = ceil_div(g.OH, g.dh);
    g.OWq = ceil_div(g.OW, g.dw);
    g.nH = ceil_div(g.OHq, g.m);
    g.nW = ceil_div(g.OWq, g.m);
    g.P = g.a.batch * g.dh * g.dw * g.nH * g.nW;
    g.p_tile = cfg.knob("p_tile");
    g.two_pass = cfg.knob("transform_passes") == 2;
    g.P_pad = ceil_div(g.P, g.p_tile) * g.p_tile;
    return g;
  }

 private:
  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDense);
    if (!winograd_applies(a)) detail::bad_workload(w, "Winograd needs a 3x3 kernel and stride 1");
    return a;
  }
};

}  // namespace

const OpTemplate& conv2d_winograd_nchwc_template() {
  static const Conv2dWinogradNCHWc t;
  return t;
}

bool winograd_applies(const Conv2DAttrs& a) {
  return a.kernel_h == 3 && a.kernel_w == 3 && a.stride_h == 1 && a.stride_w == 1 &&
         a.dilation_h >= 1 && a.dilation_w >= 1 && a.groups == 1;
}

bool winograd_pays(const Conv2DAttrs& a) {
  if (!winograd_applies(a)) return false;
  if (a.dilation_h == 1 && a.dilation_w == 1) return true;
  const int64_t OHq = ceil_div(a.out_height(), a.dilation_h);
  const int64_t OWq = ceil_div(a.out_width(), a.dilation_w);
  const double outputs = static_cast<double>(a.out_height() * a.out_width());
  for (int64_t m : {2, 4}) {
    double tiles =
        static_cast<double>(a.dilation_h * a.dilation_w * ceil_div(OHq, m) * ceil_div(OWq, m));
    if (tiles * static_cast<double>((m + 2) * (m + 2)) <= 6.0 * outputs) return true;
  }
  return false;
}

bool winograd_fallback_pays(const Workload& w, const Isa& isa) {
  const auto& t = static_cast<const Conv2dWinogradNCHWc&>(conv2d_winograd_nchwc_template());
  Geometry g = t.geometry(w, t.fallback(w, isa));
  const double gemm = static_cast<double>(g.P_pad * g.alpha * g.alpha);
  const double direct = static_cast<double>(g.a.batch * g.OH * g.OW * 9);
  return gemm <= direct;
}

int64_t winograd_tile(const Config& cfg) { return cfg.knob("wino_m"); }

std::vector<float> winograd_pack_weight(const Workload& w, const Config& cfg, const float* oihw) {
  const auto& t_ = static_cast<const Conv2dWinogradNCHWc&>(conv2d_winograd_nchwc_template());
  Geometry g = t_.geometry(w, cfg);
  const Transforms& t = transforms(g.m);
  const int64_t A = g.alpha, C = g.a.in_channels, OC = g.a.out_channels;
  std::vector<float> U(static_cast<size_t>(A * A * OC * C));
  double tmp[6][3];
  for (int64_t oc = 0; oc < OC; ++oc)
    for (int64_t c = 0; c < C; ++c) {
      const float* k = oihw + (oc * C + c) * 9;
      for (int64_t e = 0; e < A; ++e)  // tmp = G g
        for (int64_t j = 0; j < 3; ++j) {
          double s = 0;
          for (int64_t i = 0; i < 3; ++i) s += t.G[e][i] * k[i * 3 + j];
          tmp[e][j] = s;
        }
      for (int64_t e = 0; e < A; ++e)  // U = tmp G^T
        for (int64_t v = 0; v < A; ++v) {
          double s = 0;
          for (int64_t j = 0; j < 3; ++j) s += tmp[e][j] * t.G[v][j];
          U[(((e * A + v) * g.OCo + oc / g.ocb) * g.ICo + c / g.icb) * g.icb * g.ocb +
            (c % g.icb) * g.ocb + oc % g.ocb] = static_cast<float>(s);
        }
    }
  return U;
}

}  // namespace kiln::ops
