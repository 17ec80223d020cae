#include "ops/depthwise_conv2d_int8.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/conv2d_int8.h"
#include "schedule/split_apply.h"

namespace kiln::ops {

using namespace kiln::ir;
using schedule::Config;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// 255 * 128 * KH * KW must stay below 2^31.
constexpr int64_t kMaxTaps = 65792;

struct Attrs {
  Conv2DAttrs a;
  int64_t pad_value;
  bool whole_channels;  // one block of every channel (whole_channels=[1])
};

// The vector chunks a whole-channel block is computed in: one vector of int32
// lanes (AVX-512's 16, AVX2's 8, SSE's 4) per register-tile column.
constexpr int64_t kChunks[] = {4, 8, 16};

// Below this many output rows (N * OH) the whole-channel fallback puts its
// chunks in the parallel loop: rows alone would leave cores of a many-core
// machine idle (7 rows for MobileNetV2's 7x7 layers), while the 16-channel
// block's parallel loop has C/16 times as many iterations. Above it the
// chunks stay inside the ow tiles (a thread's rows read each input line
// once; up to 9 % faster on 1 thread on Zen 5, kiln_bench_int8
// --depthwise-blocks).
constexpr int64_t kMinParallelRows = 64;

// The fallback's chunk of a whole-channel block of c4 channels: the largest
// that divides c4 (no partial chunk, whose guard would leave it scalar) and
// is at most one vector of the ISA's int32 lanes.
int64_t whole_channel_chunk(int64_t c4, const Isa& isa) {
  int64_t best = kChunks[0];
  for (int64_t v : kChunks)
    if (v <= std::max<int64_t>(isa.lanes(), kChunks[0]) && c4 % v == 0) best = v;
  return best;
}

class DepthwiseConv2dNCHWcInt8 final : public OpTemplate {
 public:
  std::string name() const override { return "depthwise_conv2d_NCHWc_int8.x86"; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    int64_t c4 = round_up(a.in_channels, 4);
    ConfigSpace space;
    std::vector<int64_t> cbs;
    if (at_.whole_channels) {
      cbs = {c4};
    } else {
      for (int64_t v : {4, 8, 16, 32, 64})
        if (v <= c4) cbs.push_back(v);
    }
    space.define_knob("c_bn", cbs);
    if (at_.whole_channels) {
      std::vector<int64_t> chunks;
      for (int64_t v : kChunks)
        if (v <= c4) chunks.push_back(v);
      space.define_knob("c_vec", chunks);
      space.define_knob("c_parallel", {0, 1});
    }
    space.define_split("tile_ow", a.out_width(), 2, SplitPolicy::All, 32);
    space.define_knob("unroll_kw", {0, 1});
    space.define_knob("pad_mode", {0, 1, 2});
    return space;
  }

  Config fallback(const Workload& w, const Isa& isa) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    detail::KnobValues v;
    int64_t column;  // the channels of one register-tile column
    if (at_.whole_channels) {
      int64_t c4 = round_up(a.in_channels, 4);
      column = whole_channel_chunk(c4, isa);
      bool few_rows = a.batch * a.out_height() < kMinParallelRows;
      v.knob("c_bn", c4).knob("c_vec", column).knob("c_parallel", few_rows);
    } else {
      column = detail::int8_fallback_channel_block(a.in_channels);
      v.knob("c_bn", column);
    }
    int64_t owt = detail::fallback_ow_tile(a.out_width(), column, isa);
    return v.split("tile_ow", a.out_width(), {owt})
        .knob("unroll_kw", a.kernel_w <= 5)
        .knob("pad_mode", 2)
        .in(space(w));
  }

  // The register tile (ow_tile columns of cb int32 accumulators) fits the registers.
  bool fits(const Workload& w, const Config& cfg, const Isa& isa) const override {
    int64_t column = attrs(w).whole_channels ? cfg.knob("c_vec") : block(w, cfg);
    return cfg.split("tile_ow").back() * ceil_div(column, isa.lanes()) <= isa.vector_registers;
  }

  TemplateInstance compute(const Workload& w, const Config& cfg) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    int64_t cb = block(w, cfg), Co = ceil_div(a.in_channels, cb);
    Tensor data = placeholder({a.batch, Co, a.height, a.width, cb}, DataType::u8(), "data");
    Tensor weight = placeholder({Co, 1, a.kernel_h, a.kernel_w, 1, cb}, DataType::i8(), "weight");
    Tensor pad = detail::pad_u8_with_value(data, a, at_.pad_value);
    IterVar kh = reduce_axis(a.kernel_h, "kh"), kw = reduce_axis(a.kernel_w, "kw");
    Tensor out = ir::compute(
        {a.batch, Co, a.out_height(), a.out_width(), cb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          Expr d = cast(DataType::i32(), at(pad, i[0], i[1], h, x, i[4]));
          Expr k = cast(DataType::i32(), at(weight, i[1], 0, kh->var, kw->var, 0, i[4]));
          return sum(d * k, {kh, kw});
        },
        "depthwise_conv_int8");
    return {{data, weight}, out};
  }

  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config& cfg) const override {
    auto [tile, out] = detail::prepare_anchor(sch, inst.anchor, output, name());
    auto ow = apply_split(out, out->axis(3), cfg.split("tile_ow"));
    auto row = out->fuse({out->axis(0), out->axis(1), out->axis(2)});
    // A whole-channel block runs in chunks of one vector (c_vec): the
    // register tile is ow_tile x c_vec. The chunks are a loop either in the
    // parallel loop (c_parallel: (n, oh, chunk) fused, the parallelism the
    // 16-channel block's (n, channel block, oh) has) or inside each ow tile.
    bool chunked = cfg.has_knob("c_vec");
    schedule::IterVar tile_at = ow[0];
    if (chunked) {
      auto [c_out, c_in] = out->split(out->axis(4), cfg.knob("c_vec"));
      if (cfg.knob("c_parallel")) {
        out->reorder({row, c_out, ow[0], ow[1], c_in});
        row = out->fuse(row, c_out);
      } else {
        out->reorder({row, ow[0], c_out, ow[1], c_in});
        tile_at = c_out;
      }
      out->vectorize(c_in);
    } else {
      out->vectorize(out->axis(4));
    }
    out->parallel(row);
    for (auto& t : input_tensors(inst.anchor)) {
      if (t->is_placeholder) continue;
      auto sp = sch[t];  // the padding stage (pad_mode, see depthwise_conv2d_int8.h)
      switch (cfg.knob("pad_mode")) {
        case 0: sp->parallel(sp->fuse({sp->axis(0), sp->axis(1), sp->axis(2)})); break;
        case 1: sp->compute_at(out, row); break;
        default: sp->compute_inline(); continue;
      }
      if (chunked)
        sp->vectorize(sp->split(sp->axis(4), cfg.knob("c_vec")).second);
      else
        sp->vectorize(sp->axis(4));
    }

    tile->compute_at(out, tile_at);
    tile->reorder({tile->reduce_axis(0), tile->reduce_axis(1), tile->axis(3), tile->axis(4)});
    if (cfg.knob("unroll_kw")) tile->unroll(tile->reduce_axis(1));
    tile->unroll(tile->axis(3));
    tile->vectorize(tile->axis(4));
  }

  // Multiply-adds counted as 2 operations, as for the float templates.
  double flops(const Workload& w) const override {
    Conv2DAttrs a = attrs(w).a;
    return 2.0 * a.batch * a.in_channels * a.out_height() * a.out_width() * a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                 const Config& cfg) const override {
    Conv2DAttrs a = attrs(w).a;
    int64_t cb = block(w, cfg), Co = ceil_div(a.in_channels, cb);
    return {{a.batch, Co, a.height, a.width, cb}, {Co, 1, a.kernel_h, a.kernel_w, 1, cb}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config& cfg) const override {
    Conv2DAttrs a = attrs(w).a;
    int64_t cb = block(w, cfg);
    return {a.batch, ceil_div(a.in_channels, cb), a.out_height(), a.out_width(), cb};
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

  // On the physical layouts, every channel of the padded blocks included, so
  // that it equals the kernel for any weight values.
  void reference_typed(const Workload& w, const Config& cfg, const std::vector<const void*>& in,
                       void* output) const override {
    Attrs at_ = attrs(w);
    const Conv2DAttrs& a = at_.a;
    int64_t cb = block(w, cfg), Co = ceil_div(a.in_channels, cb);
    if (in.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    auto* data = static_cast<const uint8_t*>(in[0]);
    auto* weight = static_cast<const int8_t*>(in[1]);
    auto* out = static_cast<int32_t*>(output);
    int64_t OH = a.out_height(), OW = a.out_width();
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t co = 0; co < Co; ++co)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t ci = 0; ci < cb; ++ci) {
              int64_t acc = 0;
              for (int64_t kh = 0; kh < a.kernel_h; ++kh)
                for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
                  int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
                  int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
                  bool inside = ih >= 0 && ih < a.height && iw >= 0 && iw < a.width;
                  int64_t v = inside
                                  ? data[(((n * Co + co) * a.height + ih) * a.width + iw) * cb + ci]
                                  : at_.pad_value;
                  acc += v * weight[((co * a.kernel_h + kh) * a.kernel_w + kw) * cb + ci];
                }
              out[(((n * Co + co) * OH + oh) * OW + ow) * cb + ci] = static_cast<int32_t>(acc);
            }
  }

 private:
  Attrs attrs(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 data, int8 weight)");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDepthwise);
    const auto& pv = w.get("pad_value");
    if (pv.size() != 1 || pv[0] < 0 || pv[0] > 255)
      detail::bad_workload(w, "pad_value needs one value in [0, 255]");
    if (a.kernel_h * a.kernel_w > kMaxTaps)
      detail::bad_workload(
          w, "KH * KW > " + std::to_string(kMaxTaps) + " could overflow the int32 sum");
    bool whole = false;
    for (const auto& [key, v] : w.params)
      if (key == "whole_channels") {
        if (v != std::vector<int64_t>{1}) detail::bad_workload(w, "whole_channels must be [1]");
        whole = true;
      }
    return {a, pv[0], whole};
  }

  int64_t block(const Workload& w, const Config& cfg) const {
    int64_t cb = cfg.knob("c_bn");
    if (cb < 1)
      detail::bad_workload(w, "channel block " + std::to_string(cb) + " must be positive");
    return cb;
  }
};

}  // namespace

const OpTemplate& depthwise_conv2d_nchwc_int8_template() {
  static const DepthwiseConv2dNCHWcInt8 t;
  return t;
}

Workload depthwise_conv2d_int8_workload(const Conv2DAttrs& a, int64_t pad_value,
                                        bool whole_channels) {
  Conv2DAttrs d = a;
  d.groups = a.in_channels;  // kernel [C, 1, KH, KW]
  Workload w = conv2d_workload("depthwise_conv2d_NCHWc_int8.x86", d);
  w.params.push_back({"pad_value", {pad_value}});
  if (whole_channels) w.params.push_back({"whole_channels", {1}});
  w.dtype = "uint8";
  return w;
}

std::vector<int8_t> pack_depthwise_int8_weight(const int8_t* w, int64_t c, int64_t kh, int64_t kw,
                                               int64_t cb) {
  if (cb < 1)
    throw std::invalid_argument("pack_depthwise_int8_weight: channel block " + std::to_string(cb) +
                                " must be positive");
  int64_t Co = ceil_div(c, cb);
  std::vector<int8_t> out(static_cast<size_t>(Co * kh * kw * cb), 0);
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x)
        out[static_cast<size_t>((((ch / cb) * kh + y) * kw + x) * cb + ch % cb)] =
            w[(ch * kh + y) * kw + x];
  return out;
}

}  // namespace kiln::ops
