#include "ops/group_conv2d.h"

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

// group_conv2d_NCHWc.x86 (see group_conv2d.h).
class GroupConv2dNCHWc final : public OpTemplate {
 public:
  std::string name() const override { return "group_conv2d_NCHWc.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    ConfigSpace space;
    space.define_split("tile_ic", icg(a), 2, SplitPolicy::Factors, 64);
    space.define_split("tile_oc", ocg(a), 2, SplitPolicy::Factors, 64);
    // RegisterTile: any width up to 8 besides All's, for the fallback's
    // balanced columns (13 in 7 + 6); a superset, so records stay in it.
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::RegisterTile, 32);
    space.define_knob("unroll_kw", {0, 1});
    // Register tile beyond the width: output-channel blocks of one group and
    // rows computed together (see conv2d_NCHWc.x86); neither changes the layout.
    space.define_knob("oc_reg", {1, 2, 4});
    space.define_knob("oh_reg", {1, 2, 4});
    space.define_knob("kernel_outer", {0, 1});
    // 1: the reduction's outer loop stays a loop (conv2d_NCHWc's
    // rolled_reduction; RegNetY-400MF's groups of 8 to 16 channels, AVX2
    // code on a Zen 4: the whole model 0.94x with it).
    space.define_knob("rolled_reduction", {0, 1}, schedule::KnobOrigin::AddedLater);
    // 1: each task pads the rows of its group's input that it reads
    // (detail::pad_rows), where 0 pads the whole input first.
    if (a.padded()) space.define_knob("pad_rows", {0, 1}, schedule::KnobOrigin::AddedLater);
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    int64_t icb = detail::fallback_channel_block(icg(a));
    int64_t ocb = detail::fallback_channel_block(ocg(a));
    const GroupTile tile = fallback_tile(a, ocb, isa);
    // The window outermost where a group's reduction has two channel blocks
    // or more and the ISA has 16 vector registers: ResNeXt-50's 32-channel
    // groups (7x7 and 14x14 stride 2) ran 1.20-1.26x faster as AVX2 code on
    // a Zen 4, one thread; AVX-512 code and one-block groups the same; a
    // dense conv2d_NCHWc's 3x3 stride-2 convs 0.87-0.99x, so not there.
    const bool window_outer = icg(a) / icb > 1 && isa.vector_registers < 32;
    detail::KnobValues knobs;
    knobs.split("tile_ic", icg(a), {icb})
        .split("tile_oc", ocg(a), {ocb})
        .split("tile_ow", a.out_width(), {tile.columns})
        .knob("unroll_kw", a.kernel_w <= 3)
        .knob("oc_reg", tile.oc_blocks)
        .knob("oh_reg", 1)
        .knob("kernel_outer", window_outer)
        .knob("rolled_reduction", detail::fallback_rolled_reduction(isa));
    // A task whose tile spans its group reads only that group's input
    // channels: it pads the rows it reads in L1, where a padding copy of the
    // whole input is written beyond L2 and read back (ResNeXt-101's 3x3
    // groups, 2 threads of a Sapphire Rapids, against the same tile with the
    // copy: groups of one block 1.03-1.45x, 512 -> 512 stride 2 on 56 x 56
    // 0.95 -> 0.70 ms; tiles spanning 2 or 4 blocks 1.01-1.42x). A tile of
    // one block of a wider group would pad the group's rows again for each of
    // its blocks (2048 channels in groups of 64, tiles of 1 block: 0.90-0.96x).
    if (a.padded()) knobs.knob("pad_rows", tile.oc_blocks == ocg(a) / ocb);
    return knobs.in(space(w));
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    int64_t ICgb = icg(a) / icb, OCgb = ocg(a) / ocb;
    Tensor data = placeholder({a.batch, a.in_channels / icb, a.height, a.width, icb},
                              DataType::f32(), "data");
    Tensor weight = placeholder({a.out_channels / ocb, ICgb, a.kernel_h, a.kernel_w, icb, ocb},
                                DataType::f32(), "weight");
    Tensor pad =
        detail::pad_spatial(data, a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, "data_pad");
    IterVar ico = reduce_axis(ICgb, "ico"), kh = reduce_axis(a.kernel_h, "kh"),
            kw = reduce_axis(a.kernel_w, "kw"), ici = reduce_axis(icb, "ici");
    Tensor out = ir::compute(
        {a.batch, a.out_channels / ocb, a.out_height(), a.out_width(), ocb},
        [&](const std::vector<Var>& i) {
          // The group of output block i[1], and its first input block.
          Expr group = OCgb == 1 ? Expr(i[1]) : floordiv(i[1], make_int(OCgb));
          Expr in_block = group * ICgb + ico->var;
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          return sum(at(pad, i[0], in_block, h, x, ici->var) *
                         at(weight, i[1], ico->var, kh->var, kw->var, ici->var, i[4]),
                     {ico, kh, kw, ici});
        },
        "group_conv");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    // Register tiles stay within one group: oc blocks of a group at most.
    detail::schedule_conv_nchwc(sch, inst, output, cfg, name(), cfg.split("tile_oc").front());
  }

  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    const int64_t group_blocks = cfg.split("tile_oc").front();
    detail::ConvRegisterTile rt =
        detail::conv_register_tile(group_blocks, a.out_height(), ocb, cfg);
    // Padded rows for a tile of some but not all of a group's blocks: bound
    // inference cannot tell that the tile's blocks share one group (a
    // floordiv of each end), so each task padded the whole input (5x slower).
    if (detail::pad_rows(cfg) && rt.oc > 1 && rt.oc < group_blocks) return false;
    return detail::conv_tile_fits(rt, cfg.split("tile_ow").back(), ocb, isa);
  }

  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w);
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * icg(a) * a.kernel_h *
           a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    return {{a.batch, a.in_channels / icb, a.height, a.width, icb},
            {a.out_channels / ocb, icg(a) / icb, a.kernel_h, a.kernel_w, icb, ocb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    return {a.batch, a.out_channels / ocb, a.out_height(), a.out_width(), ocb};
  }

  void reference(const Workload& w, const Config& cfg, const std::vector<const float*>& inputs,
                 float* output) const override {
    Conv2DAttrs a = attrs(w);
    auto [icb, ocb] = blocks(w, a, cfg);
    if (inputs.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    const float *data = inputs[0], *weight = inputs[1];
    int64_t ICo = a.in_channels / icb, OCo = a.out_channels / ocb;
    int64_t ICgb = icg(a) / icb, OCgb = ocg(a) / ocb;
    int64_t OH = a.out_height(), OW = a.out_width();
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oco = 0; oco < OCo; ++oco)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t oci = 0; oci < ocb; ++oci) {
              double acc = 0;
              int64_t first = (oco / OCgb) * ICgb;  // the group's first input block
              for (int64_t ico = 0; ico < ICgb; ++ico)
                for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                  for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                    int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                    int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                    if (ih < 0 || ih >= a.height || iw < 0 || iw >= a.width) continue;
                    const float* x =
                        data + (((n * ICo + first + ico) * a.height + ih) * a.width + iw) * icb;
                    const float* k =
                        weight +
                        (((oco * ICgb + ico) * a.kernel_h + kh) * a.kernel_w + kw) * icb * ocb;
                    for (int64_t ici = 0; ici < icb; ++ici)
                      acc += double(x[ici]) * double(k[ici * ocb + oci]);
                  }
              output[(((n * OCo + oco) * OH + oh) * OW + ow) * ocb + oci] = static_cast<float>(acc);
            }
  }

 private:
  struct GroupTile {
    int64_t oc_blocks = 1, columns = 1;
  };

  // Where FMAs wait on loads (Isa::fma_waits_on_loads), the tile spans the
  // group's output blocks where they are 2 or 4 (oc_reg's values): each
  // broadcast input feeds one FMA per block, where a tile of one block loads
  // one per FMA. Columns within the accumulator budget, balanced over the
  // row; a row of fewer than 8 whose tile, with one weight vector per block,
  // fits the registers runs whole. ResNeXt-101's groups of 32 and 64
  // channels (2 threads of a Sapphire Rapids, padded rows, against 1 block x
  // the row): 2 blocks x 7 of 14 columns 1.07-1.99x (2 x 14: 0.71-1.27x),
  // 4 x 7 of 7 1.12-1.28x (4 x 4 + 3: 1.08-1.19x; 2 blocks 0.82-0.93x).
  // Elsewhere one block x fallback_ow_tile.
  static GroupTile fallback_tile(const Conv2DAttrs& a, int64_t ocb, const Isa& isa) {
    const int64_t group_blocks = ocg(a) / ocb, width = a.out_width();
    const int64_t vectors = (ocb + isa.lanes() - 1) / isa.lanes();
    constexpr int64_t kNarrowRow = 8;
    const bool spans_group = group_blocks == 2 || group_blocks == 4;  // oc_reg's values
    if (!isa.fma_waits_on_loads || !spans_group)
      return {1, detail::fallback_ow_tile(width, ocb, isa)};
    const int64_t r = group_blocks;
    if (width < kNarrowRow && r * vectors * (width + 1) <= isa.vector_registers) return {r, width};
    const int64_t cap = std::max<int64_t>(1, isa.accumulator_budget() / (r * vectors));
    return {r, detail::balanced_columns(width, cap)};
  }
  static int64_t icg(const Conv2DAttrs& a) { return a.in_channels / a.groups; }
  static int64_t ocg(const Conv2DAttrs& a) { return a.out_channels / a.groups; }

  Conv2DAttrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "float32") detail::bad_workload(w, name() + " supports float32 only");
    return conv2d_attrs(w, ConvKind::kGrouped);
  }
  std::pair<int64_t, int64_t> blocks(const Workload& w, const Conv2DAttrs& a,
                                     const Config& cfg) const {
    int64_t icb = cfg.split("tile_ic").back(), ocb = cfg.split("tile_oc").back();
    if (icb < 1 || ocb < 1 || icg(a) % icb || ocg(a) % ocb)
      detail::bad_workload(w, "channel blocks " + std::to_string(icb) + "/" + std::to_string(ocb) +
                                  " must divide the channels per group");
    return {icb, ocb};
  }
};

}  // namespace

const OpTemplate& group_conv2d_nchwc_template() {
  static const GroupConv2dNCHWc t;
  return t;
}

std::vector<float> group_conv2d_pack_weight(const float* w, int64_t groups, int64_t oc, int64_t icg,
                                            int64_t kh, int64_t kw, int64_t icb, int64_t ocb) {
  if (groups < 1 || oc % groups || icb < 1 || ocb < 1 || icg % icb || (oc / groups) % ocb)
    throw std::invalid_argument("group_conv2d_pack_weight: blocks " + std::to_string(icb) + "/" +
                                std::to_string(ocb) + " must divide the channels per group " +
                                std::to_string(icg) + "/" +
                                std::to_string(oc / std::max<int64_t>(groups, 1)));
  // Output blocks never straddle groups, so the grouped layout is the dense
  // conv's blocked layout over the group's input channels.
  return oihw_to_blocked(w, oc, icg, kh, kw, icb, ocb);
}

}  // namespace kiln::ops
