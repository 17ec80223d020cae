#include "ops/group_conv2d_lanes.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/conv2d.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

int64_t group_width(const Conv2DAttrs& a) { return a.in_channels / a.groups; }

// The fallback's column tile where the window's taps share no input columns
// (a strided window): each column then needs its own permuted inputs beside
// the group's unrolled weights, and a tile sized by the accumulators alone
// spills. AVX-512 code on a Zen 4, 3x3 stride 2 with 8 channels per group:
// RegNetY-400MF's 48 channels on 112x112, 14 columns 0.30 ms against 4
// columns 0.17 ms; ResNeXt-50's 256 channels on 56x56, 14 columns 0.40 ms
// against 4 columns 0.22 ms. AVX2's register budget already gives 4 there.
constexpr int64_t kStridedColumnTile = 4;

// Channel blocks of whole groups, two groups or more: multiples of 2 Cg
// dividing C, at most 64.
std::vector<int64_t> block_values(const Conv2DAttrs& a) {
  std::vector<int64_t> v;
  const int64_t cg = group_width(a);
  for (int64_t b = 2 * cg; b <= 64 && b <= a.in_channels; b += cg)
    if (a.in_channels % b == 0) v.push_back(b);
  return v;
}

// group_conv2d_lanes_NCHWc.x86 (see group_conv2d_lanes.h).
class GroupConv2dLanesNCHWc final : public OpTemplate {
 public:
  std::string name() const override { return "group_conv2d_lanes_NCHWc.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    ConfigSpace space;
    space.define_knob("block", block_values(a));
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::All, 32);
    space.define_knob("unroll_kw", {0, 1});
    detail::define_lane_window_knobs(space, a);
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = detail::fallback_channel_block(a.in_channels);
    int64_t owt = detail::fallback_ow_tile(a.out_width(), cb, isa);
    if (a.stride_w > 1) owt = std::min(owt, kStridedColumnTile);
    detail::KnobValues knobs;
    knobs.knob("block", cb)
        .split("tile_ow", a.out_width(), {owt})
        .knob("unroll_kw", a.kernel_w <= 5);
    detail::lane_window_fallback_knobs(knobs, a, group_width(a), owt, isa);
    return knobs.in(space(w));
  }

  // The register tile (ow_tile columns of cb channels) fits the ISA's registers.
  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    int64_t cb = block(w, attrs(w), cfg);
    return cfg.split("tile_ow").back() * ((cb + isa.lanes() - 1) / isa.lanes()) <=
           isa.vector_registers;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    const int64_t cb = block(w, a, cfg), Co = a.in_channels / cb, cg = group_width(a);
    Tensor data = placeholder({a.batch, Co, a.height, a.width, cb}, DataType::f32(), "data");
    Tensor weight = placeholder({Co, cg, a.kernel_h, a.kernel_w, cb}, DataType::f32(), "weight");
    Tensor pad =
        detail::pad_spatial(data, a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, "data_pad");
    IterVar kh = reduce_axis(a.kernel_h, "kh"), kw = reduce_axis(a.kernel_w, "kw"),
            j = reduce_axis(cg, "j");
    Tensor out = ir::compute(
        {a.batch, Co, a.out_height(), a.out_width(), cb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          // Lane i[4]'s group starts at lane (i[4] / Cg) * Cg of the block.
          Expr lane = floordiv(i[4], make_int(cg)) * make_int(cg) + j->var;
          return sum(
              at(pad, i[0], i[1], h, x, lane) * at(weight, i[1], j->var, kh->var, kw->var, i[4]),
              {kh, kw, j});
        },
        "group_conv_lanes");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // The group's channels (the third reduce axis) are unrolled: each j's
    // lane permutation is then a constant shuffle of the same pixel's block.
    detail::schedule_lane_window_conv(sch, inst, output, cfg, name());
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * group_width(a) *
           a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg);
    return {{a.batch, a.in_channels / cb, a.height, a.width, cb},
            {a.in_channels / cb, group_width(a), a.kernel_h, a.kernel_w, cb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    int64_t cb = block(w, a, cfg);
    return {a.batch, a.in_channels / cb, a.out_height(), a.out_width(), cb};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    Conv2DAttrs a = attrs(w);
    const int64_t cb = block(w, a, cfg), Co = a.in_channels / cb, cg = group_width(a);
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    const float *data = inputs[0], *weight = inputs[1];
    const int64_t OH = a.out_height(), OW = a.out_width();
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t co = 0; co < Co; ++co)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t l = 0; l < cb; ++l) {
              double acc = 0;
              const int64_t first = l / cg * cg;  // the lane's group's first lane
              for (int64_t jj = 0; jj < cg; ++jj)
                for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                  for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                    int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                    int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                    if (ih < 0 || ih >= a.height || iw < 0 || iw >= a.width) continue;
                    double x =
                        data[(((n * Co + co) * a.height + ih) * a.width + iw) * cb + first + jj];
                    double k =
                        weight[(((co * cg + jj) * a.kernel_h + kh) * a.kernel_w + kw) * cb + l];
                    acc += x * k;
                  }
              output[(((n * Co + co) * OH + oh) * OW + ow) * cb + l] = static_cast<float>(acc);
            }
  }

 private:
  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kGrouped);
    if (a.in_channels != a.out_channels)
      detail::bad_workload(w, "needs groups of equal input and output width");
    return a;
  }
  int64_t block(const Workload& w, const Conv2DAttrs& a, const Config& cfg) const {
    int64_t cb = cfg.knob("block"), cg = group_width(a);
    if (cb < 2 * cg || cb % cg || a.in_channels % cb)
      detail::bad_workload(w, "channel block " + std::to_string(cb) +
                                  " must divide C and hold two or more groups of " +
                                  std::to_string(cg));
    return cb;
  }
};

}  // namespace

const OpTemplate& group_conv2d_lanes_nchwc_template() {
  static const GroupConv2dLanesNCHWc t;
  return t;
}

bool group_conv2d_lanes_applies(const Conv2DAttrs& a) {
  if (a.groups <= 1 || a.in_channels % a.groups || a.out_channels != a.in_channels) return false;
  const int64_t cg = group_width(a);
  if (cg == 1) return false;  // depthwise
  int64_t cb = detail::fallback_channel_block(a.in_channels);
  return cb % cg == 0 && cb >= 2 * cg;
}

std::vector<float> group_conv2d_lanes_pack_weight(const float* w, int64_t channels, int64_t cg,
                                                  int64_t kh, int64_t kw, int64_t cb) {
  if (cg < 1 || cb < 1 || channels % cb || cb % cg)
    throw std::invalid_argument("group_conv2d_lanes_pack_weight: block " + std::to_string(cb) +
                                " must divide " + std::to_string(channels) +
                                " channels and be a multiple of the group width " +
                                std::to_string(cg));
  std::vector<float> out(static_cast<size_t>(channels * cg * kh * kw));
  const int64_t taps = kh * kw;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < cg; ++j)
      for (int64_t t = 0; t < taps; ++t) {
        int64_t co = c / cb, l = c % cb;
        out[((co * cg + j) * taps + t) * cb + l] = w[(c * cg + j) * taps + t];
      }
  return out;
}

}  // namespace kiln::ops
