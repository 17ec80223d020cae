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

// The sizes one config gives a workload.
struct Geometry {
  Conv2DAttrs a;
  int64_t m, alpha, icb, ocb, ICo, OCo;
  int64_t OH, OW, nH, nW, P, p_tile, P_pad;
};

const std::vector<int64_t>& p_tile_values() {
  static const std::vector<int64_t> v = {2, 4, 6, 8, 12, 16};
  return v;
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
    bool big = a.out_height() >= 8 && a.out_width() >= 8 && !narrow;
    return detail::KnobValues()
        .split("tile_ic", a.in_channels, {icb})
        .split("tile_oc", a.out_channels, {ocb})
        .knob("wino_m", big ? 4 : 2)
        .knob("p_tile", rows)
        .knob("unroll_ci", 1)
        .in(space(w));
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Geometry g = geometry(w, cfg);
    return g.p_tile * ceil_div(g.ocb, isa.lanes()) <= isa.vector_registers;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Geometry g = geometry(w, cfg);
    const Transforms& t = transforms(g.m);
    const Conv2DAttrs& a = g.a;
    Tensor data = placeholder({a.batch, g.ICo, a.height, a.width, g.icb}, DataType::f32(), "data");
    Tensor U = placeholder({g.alpha, g.alpha, g.OCo, g.ICo, g.icb, g.ocb}, DataType::f32(),
                           "weight_winograd");
    // Every tile's window in bounds: rows up to nH * m + 2 of the padded input.
    int64_t bottom = g.nH * g.m + 2 - a.height - a.pad_top;
    int64_t right = g.nW * g.m + 2 - a.width - a.pad_left;
    Tensor pad = detail::pad_spatial(data, a.pad_top, a.pad_left, bottom, right, "data_pad");

    // V = B^T d B: for tile p, sum_i BT[eps][i] (sum_j BT[nu][j] d[i][j]).
    Tensor V = ir::compute(
        {g.alpha, g.alpha, g.ICo, g.P_pad, g.icb},
        [&](const std::vector<Var>& i) {
          Expr p = min(Expr(i[3]), make_int(g.P - 1));  // padding rows repeat the last tile
          Expr n = p / (g.nH * g.nW), th = (p / g.nW) % g.nH, tw = p % g.nW;
          auto d = [&](int r, int c) { return at(pad, n, i[2], th * g.m + r, tw * g.m + c, i[4]); };
          return select_row(i[0], g.alpha, [&](int eps) {
            return linear_combination(t.BT[eps], [&](int r) {
              return select_row(i[1], g.alpha, [&](int nu) {
                return linear_combination(t.BT[nu], [&](int c) { return d(r, c); });
              });
            });
          });
        },
        "winograd_V");

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

    // Y = A^T M A: output (oh, ow) is element (oh % m, ow % m) of its tile.
    Tensor Y = ir::compute(
        {a.batch, g.OCo, g.OH, g.OW, g.ocb},
        [&](const std::vector<Var>& i) {
          Expr r1 = i[2] % g.m, r2 = i[3] % g.m;
          Expr p = (i[0] * g.nH + i[2] / g.m) * g.nW + i[3] / g.m;
          return select_row(r1, g.m, [&](int row) {
            return linear_combination(t.AT[row], [&](int eps) {
              return select_row(r2, g.m, [&](int col) {
                return linear_combination(t.AT[col], [&](int nu) {
                  return at(M, make_int(eps), make_int(nu), i[1], p, i[4]);
                });
              });
            });
          });
        },
        "winograd_Y");
    return {{data, U}, Y};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    winograd::schedule_stages(sch, inst, output, name(), winograd_tile(cfg), cfg.knob("p_tile"),
                              cfg.knob("unroll_ci") != 0);
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
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t th = 0; th < g.nH; ++th)
        for (int64_t tw = 0; tw < g.nW; ++tw) {
          for (int64_t c = 0; c < C; ++c) {
            for (int64_t i = 0; i < A; ++i)
              for (int64_t j = 0; j < A; ++j) {
                int64_t h = th * g.m + i - a.pad_top, x = tw * g.m + j - a.pad_left;
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
                int64_t oh = th * g.m + r, ow = tw * g.m + q;
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
    g.OH = g.a.out_height();
    g.OW = g.a.out_width();
    g.nH = ceil_div(g.OH, g.m);
    g.nW = ceil_div(g.OW, g.m);
    g.P = g.a.batch * g.nH * g.nW;
    g.p_tile = cfg.knob("p_tile");
    g.P_pad = ceil_div(g.P, g.p_tile) * g.p_tile;
    return g;
  }

 private:
  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDense);
    if (!winograd_applies(a))
      detail::bad_workload(w, "Winograd needs a 3x3 kernel, stride 1 and dilation 1");
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
         a.dilation_h == 1 && a.dilation_w == 1 && a.groups == 1;
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
