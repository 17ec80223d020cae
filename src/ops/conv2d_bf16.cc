#include "ops/conv2d_bf16.h"

#include <stdexcept>
#include <string>

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;

namespace {

int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// NCHW[icb]c float32 data -> bf16 with spatial zero padding and the channel
// block rounded up to pairs (zero past icb). Coordinates are clamped so that
// the unselected load stays in bounds.
Tensor convert_and_pad(const Tensor& data, const Conv2DAttrs& a, int64_t icb) {
  std::vector<Expr> shape = data->shape;
  int64_t H = a.height, W = a.width;
  shape[2] = make_int(H + a.pad_top + a.pad_bottom);
  shape[3] = make_int(W + a.pad_left + a.pad_right);
  shape[4] = make_int(2 * ceil_div(icb, 2));
  const bool padded = a.padded();
  return compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr h = i[2] - a.pad_top, w = i[3] - a.pad_left;
        std::vector<Expr> idx(i.begin(), i.end());
        Expr inside;
        if (padded) {
          inside = logical_and(logical_and(h >= 0, h < H), logical_and(w >= 0, w < W));
          idx[2] = max(min(h, make_int(H - 1)), make_int(0));
          idx[3] = max(min(w, make_int(W - 1)), make_int(0));
        }
        if (icb % 2) {
          Expr c_in = i[4] < icb;
          inside = inside ? logical_and(inside, c_in) : c_in;
          idx[4] = min(Expr(i[4]), make_int(icb - 1));
        }
        Expr v = cast(DataType::bf16(), read(data, idx));
        return inside ? select(inside, v, make_float(0, DataType::bf16())) : v;
      },
      "data_bf16");
}

class Conv2dNCHWcBf16 final : public OpTemplate {
 public:
  std::string name() const override { return "conv2d_NCHWc_bf16.x86"; }
  bool channel_blocked() const override { return true; }

  // The float template's space, fallback and fits for the same shapes.
  ConfigSpace space(const Workload& w) const override { return fp32().space(as_fp32(w)); }
  Config fallback(const Workload& w, const Isa& isa) const override {
    return fp32().fallback(as_fp32(w), isa);
  }
  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    return fp32().fits(as_fp32(w), cfg, isa);
  }
  double flops(const Workload& w) const override { return fp32().flops(as_fp32(w)); }
  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    return fp32().output_shape(as_fp32(w), cfg);
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto shapes = input_shapes(w, cfg);
    int64_t icb = shapes[0][4], ocb = shapes[1][5];
    Tensor data =
        placeholder(std::vector<Expr>(shapes[0].begin(), shapes[0].end()), DataType::f32(), "data");
    Tensor weight = placeholder(std::vector<Expr>(shapes[1].begin(), shapes[1].end()),
                                DataType::bf16(), "weight");
    Tensor cvt = convert_and_pad(data, a, icb);
    IterVar ico = reduce_axis(shapes[0][1], "ico"), kh = reduce_axis(a.kernel_h, "kh"),
            kw = reduce_axis(a.kernel_w, "kw"), icp = reduce_axis(ceil_div(icb, 2), "icp");
    Tensor out = ir::compute(
        {a.batch, shapes[1][0], a.out_height(), a.out_width(), ocb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          return sum(dot2_bf16(make_float(0), at(cvt, i[0], ico->var, h, x, icp->var * 2),
                               at(cvt, i[0], ico->var, h, x, icp->var * 2 + 1),
                               at(weight, i[1], ico->var, kh->var, kw->var, icp->var, i[4], 0),
                               at(weight, i[1], ico->var, kh->var, kw->var, icp->var, i[4], 1)),
                     {ico, kh, kw, icp});
        },
        "conv_bf16");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // conv2d_NCHWc.x86's schedule: the conversion stage takes the padding
    // stage's place (at root, rows in parallel, the channel block vectorized).
    detail::schedule_conv_nchwc(sch, inst, output, cfg, name(), 0);
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    std::vector<std::vector<int64_t>> s = fp32().input_shapes(as_fp32(w), cfg);
    // The weight's ic_bn in pairs: [.., icb, ocb] -> [.., ceil(icb/2), ocb, 2].
    std::vector<int64_t>& k = s[1];
    int64_t icb = k[4], ocb = k[5];
    k.resize(4);
    k.insert(k.end(), {ceil_div(icb, 2), ocb, 2});
    return s;
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    attrs(w);
    return {DataType::f32(), DataType::bf16()};
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": a bfloat16 template has only reference_typed()");
  }

  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    Conv2DAttrs a = attrs(w);
    if (in.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    auto shapes = input_shapes(w, cfg);
    int64_t icb = shapes[0][4], ocb = shapes[1][5], ICo = shapes[0][1], OCo = shapes[1][0];
    auto* data = static_cast<const float*>(in[0]);
    auto* weight = static_cast<const uint16_t*>(in[1]);
    auto* out = static_cast<float*>(output);
    auto bf = [](float x) { return double(bf16_to_f32_value(f32_to_bf16_value(x))); };
    int64_t OH = a.out_height(), OW = a.out_width(), P = ceil_div(icb, 2);
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oco = 0; oco < OCo; ++oco)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t oci = 0; oci < ocb; ++oci) {
              double acc = 0;
              for (int64_t ico = 0; ico < ICo; ++ico)
                for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                  for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                    int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                    int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                    if (ih < 0 || ih >= a.height || iw < 0 || iw >= a.width) continue;
                    const float* x =
                        data + (((n * ICo + ico) * a.height + ih) * a.width + iw) * icb;
                    const uint16_t* k =
                        weight +
                        (((oco * ICo + ico) * a.kernel_h + kh) * a.kernel_w + kw) * P * ocb * 2;
                    for (int64_t ici = 0; ici < icb; ++ici)
                      acc += bf(x[ici]) *
                             double(bf16_to_f32_value(k[((ici / 2) * ocb + oci) * 2 + ici % 2]));
                  }
              out[(((n * OCo + oco) * OH + oh) * OW + ow) * ocb + oci] = static_cast<float>(acc);
            }
  }

 private:
  static const OpTemplate& fp32() { return conv2d_nchwc_template(); }

  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "bfloat16")
      detail::bad_workload(w, name() + " takes dtype bfloat16 (float32 data, bfloat16 weight)");
    return conv2d_attrs(w, ConvKind::kDense);
  }
  // The float template's workload for the same shapes (its checks apply).
  Workload as_fp32(const Workload& w) const {
    attrs(w);
    Workload f = w;
    f.template_name = fp32().name();
    f.dtype = "float32";
    return f;
  }
};

}  // namespace

const OpTemplate& conv2d_nchwc_bf16_template() {
  static const Conv2dNCHWcBf16 t;
  return t;
}

Workload conv2d_bf16_workload(const Conv2DAttrs& a) {
  Workload w = conv2d_workload("conv2d_NCHWc_bf16.x86", a);
  w.dtype = "bfloat16";
  return w;
}

std::vector<uint16_t> pack_conv2d_bf16_weight(const float* w, int64_t oc, int64_t ic, int64_t kh,
                                              int64_t kw, int64_t icb, int64_t ocb) {
  if (icb < 1 || ocb < 1 || ic % icb || oc % ocb)
    throw std::invalid_argument("pack_conv2d_bf16_weight: blocks " + std::to_string(icb) + "/" +
                                std::to_string(ocb) + " must divide the channels " +
                                std::to_string(ic) + "/" + std::to_string(oc));
  int64_t ICo = ic / icb, OCo = oc / ocb, P = ceil_div(icb, 2);
  std::vector<uint16_t> out(static_cast<size_t>(OCo * ICo * kh * kw * P * ocb * 2), 0);
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t ici = i % icb;
          size_t dst =
              (((((((o / ocb) * ICo + i / icb) * kh + y) * kw + x) * P + ici / 2) * ocb + o % ocb) *
                   2 +
               ici % 2);
          out[dst] = f32_to_bf16_value(w[((o * ic + i) * kh + y) * kw + x]);
        }
  return out;
}

}  // namespace kiln::ops
