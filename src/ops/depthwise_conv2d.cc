#include "ops/depthwise_conv2d.h"

#include "ops/conv2d.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

// depthwise_conv2d_NCHWc.x86 (see depthwise_conv2d.h).
class DepthwiseConv2dNCHWc final : public OpTemplate {
 public:
  std::string name() const override { return "depthwise_conv2d_NCHWc.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    ConfigSpace space;
    space.define_split("tile_c", a.in_channels, 2, SplitPolicy::Factors, 64);
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::All, 32);
    space.define_knob("unroll_kw", {0, 1});
    detail::define_lane_window_knobs(space, a);
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = detail::fallback_channel_block(a.in_channels);
    int64_t owt = detail::fallback_ow_tile(a.out_width(), cb, isa);
    detail::KnobValues knobs;
    knobs.split("tile_c", a.in_channels, {cb})
        .split("tile_ow", a.out_width(), {owt})
        .knob("unroll_kw", a.kernel_w <= 5);
    detail::lane_window_fallback_knobs(knobs, a, 1, owt, isa);
    return knobs.in(space(w));
  }

  // The register tile (ow_tile columns of cb channels) fits the ISA's registers.
  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg);
    return cfg.split("tile_ow").back() * ((cb + isa.lanes() - 1) / isa.lanes()) <=
           isa.vector_registers;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg), Co = a.in_channels / cb;
    Tensor data = placeholder({a.batch, Co, a.height, a.width, cb}, DataType::f32(), "data");
    Tensor weight = placeholder({Co, 1, a.kernel_h, a.kernel_w, 1, cb}, DataType::f32(), "weight");
    Tensor pad =
        detail::pad_spatial(data, a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, "data_pad");
    IterVar kh = reduce_axis(a.kernel_h, "kh"), kw = reduce_axis(a.kernel_w, "kw");
    Tensor out = ir::compute(
        {a.batch, Co, a.out_height(), a.out_width(), cb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          return sum(
              at(pad, i[0], i[1], h, x, i[4]) * at(weight, i[1], 0, kh->var, kw->var, 0, i[4]),
              {kh, kw});
        },
        "depthwise_conv");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    detail::schedule_lane_window_conv(sch, inst, output, cfg, name());
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    return 2.0 * a.batch * a.in_channels * a.out_height() * a.out_width() * a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg);
    return {{a.batch, a.in_channels / cb, a.height, a.width, cb},
            {a.in_channels / cb, 1, a.kernel_h, a.kernel_w, 1, cb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg);
    return {a.batch, a.in_channels / cb, a.out_height(), a.out_width(), cb};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg), Co = a.in_channels / cb;
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    const float *data = inputs[0], *weight = inputs[1];
    int64_t OH = a.out_height(), OW = a.out_width();
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t co = 0; co < Co; ++co)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t ci = 0; ci < cb; ++ci) {
              double acc = 0;
              for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                  int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                  int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                  if (ih < 0 || ih >= a.height || iw < 0 || iw >= a.width) continue;
                  acc += double(data[(((n * Co + co) * a.height + ih) * a.width + iw) * cb + ci]) *
                         double(weight[((co * a.kernel_h + kh) * a.kernel_w + kw) * cb + ci]);
                }
              output[(((n * Co + co) * OH + oh) * OW + ow) * cb + ci] = static_cast<float>(acc);
            }
  }

 private:
  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    return conv2d_attrs(w, ConvKind::kDepthwise);
  }
  int64_t block(const Workload& w, const Conv2DAttrs& a, const Config& cfg) const {
    int64_t cb = depthwise_conv2d_nchwc_oc_block(cfg);
    if (cb < 1 || a.in_channels % cb)
      detail::bad_workload(w, "channel block " + std::to_string(cb) + " must divide C");
    return cb;
  }
};

}  // namespace

const OpTemplate& depthwise_conv2d_nchwc_template() {
  static const DepthwiseConv2dNCHWc t;
  return t;
}

int64_t depthwise_conv2d_nchwc_ic_block(const Config& cfg) { return cfg.split("tile_c").back(); }
int64_t depthwise_conv2d_nchwc_oc_block(const Config& cfg) { return cfg.split("tile_c").back(); }

}  // namespace kiln::ops
