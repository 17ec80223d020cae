#include "ops/conv2d_int8_amx.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ir/stmt.h"
#include "ops/amx_task_output.h"
#include "ops/conv2d_int8.h"
#include "ops/dense_int8_amx.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using schedule::Config;
using schedule::ConfigSpace;

namespace {

constexpr const char* kName = "conv2d_NCHWc_int8_amx.x86";

// 255 * 128 * K must stay below 2^31 (conv2d_NCHWc_int8.x86's bound, on the
// padded reduction the tiles actually sum).
constexpr int64_t kMaxReduction = 65792;

// The fallback keeps a task's im2col workspace within this (see the header).
constexpr int64_t kFallbackWorkspaceBytes = 256 * 1024;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The workload's sizes in the template's terms (header).
struct Dims {
  Conv2DAttrs a;
  int64_t pad_value;
  int64_t Cb, OCb, K, M, OH, OW;
  // 1x1, stride 1, no padding: the data is already the GEMM's A.
  bool direct() const {
    return a.kernel_h == 1 && a.kernel_w == 1 && a.stride_h == 1 && a.stride_w == 1 &&
           a.pad_top == 0 && a.pad_left == 0 && a.pad_bottom == 0 && a.pad_right == 0;
  }
  int64_t weight_blocks() const { return (OCb + kAmxBlockCols - 1) / kAmxBlockCols; }
};

Dims dims_of(const Conv2DAttrs& a, int64_t pad_value) {
  Dims d{a, pad_value, round_up(a.in_channels, 4), round_up(a.out_channels, 4), 0, 0, 0, 0};
  d.K = a.kernel_h * a.kernel_w * d.Cb;
  d.OH = a.out_height();
  d.OW = a.out_width();
  d.M = a.batch * d.OH * d.OW;
  return d;
}

int64_t fallback_panels(const Dims& d) {
  int64_t want = amx_panels_per_task(d.M), p = 1;
  for (int64_t c : amx_panel_choices(d.M))
    if (c <= want && (d.direct() || 16 * c * d.K <= kFallbackWorkspaceBytes)) p = c;
  return p;
}

// The im2col copy of output pixels [m0, m0 + rows) into ws[rows][K]:
// row r, column (kh * KW + kw) * Cb + c holds the input pixel under tap
// (kh, kw) of output pixel m0 + r, channel c, or pad_value outside the image.
Stmt im2col(const Dims& d, const Buffer& data, const Buffer& ws, Expr m0, int64_t rows) {
  const Conv2DAttrs& a = d.a;
  Var r("r", DataType::i64()), kh("kh", DataType::i64()), kw("kw", DataType::i64()),
      c("c", DataType::i64());
  Expr p = m0 + r;
  Expr n = p / make_int(d.OH * d.OW), oh = (p / make_int(d.OW)) % make_int(d.OH),
       ow = p % make_int(d.OW);
  Expr ih = oh * make_int(a.stride_h) + kh * make_int(a.dilation_h) - make_int(a.pad_top);
  Expr iw = ow * make_int(a.stride_w) + kw * make_int(a.dilation_w) - make_int(a.pad_left);
  Expr inside = logical_and(logical_and(ih >= make_int(0), ih < make_int(a.height)),
                            logical_and(iw >= make_int(0), iw < make_int(a.width)));
  Expr dst = r * make_int(d.K) + (kh * make_int(a.kernel_w) + kw) * make_int(d.Cb) + c;
  Expr src = ((n * make_int(a.height) + ih) * make_int(a.width) + iw) * make_int(d.Cb) + c;
  // The tap's Cb channels are contiguous on both sides: one branch per tap,
  // then a plain byte loop that LLVM vectorizes.
  Stmt copy = make_for(c, make_int(0), make_int(d.Cb), ForKind::Serial,
                       make_store(ws, load(data, src), dst));
  Stmt fill = make_for(c, make_int(0), make_int(d.Cb), ForKind::Serial,
                       make_store(ws, make_int(d.pad_value, DataType::u8()), dst));
  Stmt tap = make_if(inside, copy, fill);
  return make_for(r, make_int(0), make_int(rows), ForKind::Serial,
                  make_for(kh, make_int(0), make_int(a.kernel_h), ForKind::Serial,
                           make_for(kw, make_int(0), make_int(a.kernel_w), ForKind::Serial, tap)));
}

// The kernel: tasks of 16 * per_task output pixels in parallel, each one
// amx_gemm (after its im2col unless direct()). The last task may have fewer
// rows: a body of its own shape in the same loop.
// With an epilogue the tiles write the task's accumulator instead of `out`
// and the epilogue finishes the task's pixels right after (AmxTaskOutput).
Stmt conv_loops(const Dims& d, const Buffer& data, const Buffer& weight, const Buffer& out,
                int64_t per_task, const OpTemplate::TaskEpilogue& epilogue) {
  const int64_t rows_per_task = 16 * per_task;
  Var t("task", DataType::i64());
  Expr m0 = t * make_int(rows_per_task);
  Buffer ws = make_buffer("im2col", DataType::u8(), {make_int(rows_per_task), make_int(d.K)},
                          MemScope::Local);
  AmxTaskOutput output(out, DataType::i32(), std::min(rows_per_task, d.M), d.OCb, epilogue);
  auto task = [&](int64_t rows) -> Stmt {
    if (d.direct())
      return output.rows(m0, rows, [&](const Expr& c) {
        return make_stmt<EvaluateNode>(
            amx_gemm(AmxOp::DpbusdU8I8, c, load(data, m0 * make_int(d.Cb)),
                     load(weight, make_int(0)), rows, d.OCb, d.K, d.Cb, d.OCb));
      });
    Stmt gemm = output.rows(m0, rows, [&](const Expr& c) {
      return make_stmt<EvaluateNode>(amx_gemm(AmxOp::DpbusdU8I8, c, load(ws, make_int(0)),
                                              load(weight, make_int(0)), rows, d.OCb, d.K, d.K,
                                              d.OCb));
    });
    return make_seq({im2col(d, data, ws, m0, rows), gemm});
  };
  const int64_t full = d.M / rows_per_task, rest = d.M % rows_per_task;
  Stmt body = task(rows_per_task);
  if (rest > 0) body = full > 0 ? make_if(t < make_int(full), body, task(rest)) : task(rest);
  // One workspace per task, allocated inside the parallel body (codegen puts
  // a Local allocation up to 256 KiB on the task's stack, a larger one in
  // the workspace allocator).
  if (!d.direct()) body = make_stmt<AllocateNode>(ws, make_int(rows_per_task * d.K), body);
  return make_for(t, make_int(0), make_int(full + (rest > 0 ? 1 : 0)), ForKind::Parallel,
                  output.task_body(body));
}

class Conv2dNCHWcInt8Amx final : public OpTemplate {
 public:
  std::string name() const override { return kName; }
  bool channel_blocked() const override { return true; }

  ConfigSpace space(const Workload& w) const override {
    ConfigSpace space;
    space.define_knob("panels_per_task", amx_panel_choices(dims(w).M));
    return space;
  }

  Config fallback(const Workload& w, const Isa&) const override {
    return detail::KnobValues().knob("panels_per_task", fallback_panels(dims(w))).in(space(w));
  }

  TemplateInstance compute(const Workload& w, const Config&) const override {
    Dims d = dims(w);
    const Conv2DAttrs& a = d.a;
    Tensor data = placeholder({a.batch, 1, a.height, a.width, d.Cb}, DataType::u8(), "data");
    Tensor weight =
        placeholder({d.weight_blocks(), d.K / 4, kAmxBlockCols, 4}, DataType::i8(), "weight");
    Tensor pad = detail::pad_u8_with_value(data, a, d.pad_value);
    IterVar kh = reduce_axis(a.kernel_h, "kh"), kw = reduce_axis(a.kernel_w, "kw"),
            icw = reduce_axis(d.Cb / 4, "icw");
    Tensor out = ir::compute(
        {a.batch, 1, d.OH, d.OW, d.OCb},
        [&](const std::vector<Var>& i) {
          Expr h = i[2] * a.stride_h + kh->var * a.dilation_h;
          Expr x = i[3] * a.stride_w + kw->var * a.dilation_w;
          // The packed row of k = (kh * KW + kw) * Cb + 4 * icw + j.
          Expr kg = (kh->var * a.kernel_w + kw->var) * (d.Cb / 4) + icw->var;
          std::vector<Expr> da, wb;
          for (int j = 0; j < 4; ++j) {
            da.push_back(at(pad, i[0], make_int(0), h, x, icw->var * 4 + j));
            wb.push_back(
                at(weight, floordiv(i[4], kAmxBlockCols), kg, floormod(i[4], kAmxBlockCols), j));
          }
          return sum(dot4_u8i8(make_int(0, DataType::i32()), da, wb), {kh, kw, icw});
        },
        "conv_int8_amx");
    return {{data, weight}, out};
  }

  // A row of output pixels per step, in parallel (and the padding stage's
  // rows): correct for any shape, and not the code that runs (build_loops()
  // is).
  void schedule(schedule::Schedule& sch, const TemplateInstance& inst, const Tensor& output,
                const Config&) const override {
    detail::TileStages st = detail::prepare_anchor(sch, inst.anchor, output, name());
    st.tile->compute_at(st.out, st.out->axis(2));
    st.out->parallel(st.out->axis(2));
    for (const Tensor& t : ir::input_tensors(inst.anchor))
      if (!t->is_placeholder) sch[t]->parallel(sch[t]->axis(2));
  }

  bool builds_own_loops() const override { return true; }

  Stmt build_loops(const Workload& w, const Config& cfg, const std::vector<Buffer>& args,
                   const TaskEpilogue& epilogue) const override {
    Dims d = dims(w);
    if (args.size() != (epilogue ? 2u : 3u))
      detail::bad_workload(
          w, epilogue ? "takes data and weight" : "takes data, weight and the output");
    int64_t per_task = cfg.knob("panels_per_task");
    if (per_task < 1) detail::bad_workload(w, "panels_per_task must be positive");
    return conv_loops(d, args[0], args[1], epilogue ? Buffer() : args[2], per_task, epilogue);
  }

  double flops(const Workload& w) const override {
    const Conv2DAttrs a = dims(w).a;
    return 2.0 * a.batch * a.out_channels * a.out_height() * a.out_width() * a.in_channels *
           a.kernel_h * a.kernel_w;
  }

  std::vector<std::vector<int64_t>> input_shapes(const Workload& w, const Config&) const override {
    Dims d = dims(w);
    return {{d.a.batch, 1, d.a.height, d.a.width, d.Cb},
            {d.weight_blocks(), d.K / 4, kAmxBlockCols, 4}};
  }

  std::vector<int64_t> output_shape(const Workload& w, const Config&) const override {
    Dims d = dims(w);
    return {d.a.batch, 1, d.OH, d.OW, d.OCb};
  }

  std::vector<DataType> input_dtypes(const Workload& w) const override {
    dims(w);
    return {DataType::u8(), DataType::i8()};
  }
  DataType output_dtype(const Workload& w) const override {
    dims(w);
    return DataType::i32();
  }

  void reference(const Workload& w, const Config&, const std::vector<const float*>&,
                 float*) const override {
    throw std::logic_error(w.key() + ": an integer template has only reference_typed()");
  }

  // On the physical layouts, every channel of the padded blocks and every
  // packed weight value the kernel reads (so that it equals the kernel for
  // any weight values, as the tuner's random weights are).
  void reference_typed(const Workload& w, const Config&, const std::vector<const void*>& in,
                       void* output) const override {
    Dims d = dims(w);
    const Conv2DAttrs& a = d.a;
    if (in.size() != 2) detail::bad_workload(w, "reference needs data and weight");
    auto* data = static_cast<const uint8_t*>(in[0]);
    auto* weight = static_cast<const int8_t*>(in[1]);
    auto* out = static_cast<int32_t*>(output);
    const int64_t KG = d.K / 4;
    std::vector<int64_t> col(static_cast<size_t>(d.K));
    for (int64_t n = 0; n < a.batch; ++n)
      for (int64_t oh = 0; oh < d.OH; ++oh)
        for (int64_t ow = 0; ow < d.OW; ++ow) {
          // The pixel's patch, as the kernel's im2col row.
          for (int64_t kh = 0; kh < a.kernel_h; ++kh)
            for (int64_t kw = 0; kw < a.kernel_w; ++kw) {
              int64_t ih = oh * a.stride_h + kh * a.dilation_h - a.pad_top;
              int64_t iw = ow * a.stride_w + kw * a.dilation_w - a.pad_left;
              bool inside = ih >= 0 && ih < a.height && iw >= 0 && iw < a.width;
              for (int64_t c = 0; c < d.Cb; ++c)
                col[static_cast<size_t>((kh * a.kernel_w + kw) * d.Cb + c)] =
                    inside ? data[((n * a.height + ih) * a.width + iw) * d.Cb + c] : d.pad_value;
            }
          int32_t* y = out + ((n * d.OH + oh) * d.OW + ow) * d.OCb;
          for (int64_t o = 0; o < d.OCb; ++o) {
            int64_t acc = 0;
            for (int64_t k = 0; k < d.K; ++k)
              acc +=
                  col[static_cast<size_t>(k)] *
                  weight[(((o / kAmxBlockCols) * KG + k / 4) * kAmxBlockCols + o % kAmxBlockCols) *
                             4 +
                         k % 4];
            y[o] = static_cast<int32_t>(acc);
          }
        }
  }

  Dims dims(const Workload& w) const {
    if (w.template_name != name()) detail::bad_workload(w, "is not a " + name() + " workload");
    if (w.dtype != "uint8")
      detail::bad_workload(w, name() + " takes dtype uint8 (uint8 data, int8 weight)");
    Conv2DAttrs a = conv2d_attrs(w, ConvKind::kDense);
    const auto& pv = w.get("pad_value");
    if (pv.size() != 1 || pv[0] < 0 || pv[0] > 255)
      detail::bad_workload(w, "pad_value needs one value in [0, 255]");
    if (!conv2d_int8_amx_supports(a))
      detail::bad_workload(w, "KH * KW * C (C rounded up to 4) > " + std::to_string(kMaxReduction) +
                                  " could overflow the int32 sum");
    return dims_of(a, pv[0]);
  }
};

}  // namespace

const OpTemplate& conv2d_nchwc_int8_amx_template() {
  static const Conv2dNCHWcInt8Amx t;
  return t;
}

Workload conv2d_int8_amx_workload(const Conv2DAttrs& a, int64_t pad_value) {
  Workload w = conv2d_workload(kName, a);
  w.params.push_back({"pad_value", {pad_value}});
  w.dtype = "uint8";
  return w;
}

bool conv2d_int8_amx_supports(const Conv2DAttrs& a) {
  return a.groups == 1 && a.kernel_h * a.kernel_w * round_up(a.in_channels, 4) <= kMaxReduction;
}

std::vector<int8_t> pack_conv2d_int8_amx_weight(const int8_t* w, int64_t oc, int64_t ic, int64_t kh,
                                                int64_t kw) {
  const int64_t Cb = round_up(ic, 4), OCb = round_up(oc, 4), K = kh * kw * Cb;
  // B[K, OCb], row (y * kw + x) * Cb + i, then amx_gemm's packing of it.
  std::vector<int8_t> B(static_cast<size_t>(K * OCb), 0);
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t i = 0; i < ic; ++i)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x)
          B[static_cast<size_t>(((y * kw + x) * Cb + i) * OCb + o)] =
              w[((o * ic + i) * kh + y) * kw + x];
  return pack_dense_int8_amx_weight(B.data(), K, OCb);
}

}  // namespace kiln::ops
