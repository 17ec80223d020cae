#include "graph/passes/strategy.h"

#include "graph/ops/op_util.h"
#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"
#include "ops/conv2d.h"
#include "ops/conv2d_bf16.h"
#include "ops/conv2d_int8.h"
#include "ops/conv2d_int8_amx.h"
#include "ops/dense_int8.h"
#include "ops/group_conv2d.h"
#include "ops/group_conv2d_lanes.h"
#include "ops/int8_weight_range.h"
#include "ops/winograd_conv2d.h"
#include "ops/winograd_conv2d_int8.h"

namespace kiln::graph {
namespace {

using passes::constant_of;
using passes::num_elements;

bool is_f32(const TensorType* t) { return t && t->dtype == "float32"; }

// ---- Conv ---------------------------------------------------------------------------

enum class ConvKind { kDense, kDepthwise, kGrouped };

// The conv workload params when n is a Conv of `kind` that a template can take:
// float32 NCHW data, a constant float32 4-D weight, a constant bias.
std::optional<WorkloadParams> match_conv(const Graph& g, const Node& n, ConvKind kind) {
  if (n.inputs.size() < 2) return std::nullopt;
  const TensorType* xt = g.type_of(n.inputs[0]);
  const Initializer* wt = constant_of(g, n.inputs[1]);
  if (!wt || !is_f32(xt) || !is_f32(&wt->type) || xt->shape.size() != 4 ||
      wt->type.shape.size() != 4)
    return std::nullopt;
  const std::vector<int64_t>& x = xt->shape;
  const std::vector<int64_t>& k = wt->type.shape;
  int64_t group = n.attr<int64_t>("group").value_or(1);
  bool depthwise = group > 1 && group == x[1] && k[0] == x[1] && k[1] == 1;
  bool grouped =
      group > 1 && !depthwise && x[1] % group == 0 && k[1] == x[1] / group && k[0] % group == 0;
  switch (kind) {
    case ConvKind::kDense:
      if (group != 1) return std::nullopt;
      break;
    case ConvKind::kDepthwise:
      if (!depthwise) return std::nullopt;
      break;
    case ConvKind::kGrouped:
      if (!grouped) return std::nullopt;
      break;
  }
  // The Conv operator's own window arithmetic (strides, dilations, pads,
  // auto_pad): the template computes exactly the operator's output.
  op_util::Window win = op_util::conv_window(n, {x[2], x[3]}, {k[2], k[3]});
  std::vector<int64_t> pads = {win.pad_begin[0], win.pad_begin[1], win.pad_end[0], win.pad_end[1]};
  // The bias is re-laid out for the blocked layout at build time.
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant_of(g, n.inputs[2]))
    op_util::fail(n, "a Conv bias must be a constant");
  return WorkloadParams{{"data", x},
                        {"kernel", k},
                        {"strides", win.stride},
                        {"pads", pads},
                        {"dilation", win.dilation}};
}

template <ConvKind kind>
std::optional<WorkloadParams> conv_row(const Graph& g, const Node& n, const Isa&) {
  return match_conv(g, n, kind);
}

// Winograd's transforms cost per channel what its GEMM saves per channel
// pair: below 16 input or output channels they do not pay.
constexpr int64_t kWinogradMinChannels = 16;

std::optional<WorkloadParams> winograd_row(const Graph& g, const Node& n, const Isa&) {
  std::optional<WorkloadParams> p = match_conv(g, n, ConvKind::kDense);
  if (!p) return std::nullopt;
  ops::Workload w{"conv2d_winograd_NCHWc.x86", *p};
  ops::Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kDense);
  if (!ops::winograd_pays(a) || a.in_channels < kWinogradMinChannels ||
      a.out_channels < kWinogradMinChannels)
    return std::nullopt;
  return p;
}

// OIHW [OC, C, KH, KW] -> [OC/ocb, C/icb, KH, KW, icb, ocb].
std::vector<float> pack_dense_conv(const ops::Workload& w, const schedule::Config&, int64_t icb,
                                   int64_t ocb, const float* oihw) {
  const auto &x = w.get("data"), &k = w.get("kernel");
  return ops::oihw_to_blocked(oihw, k[0], x[1], k[2], k[3], icb, ocb);
}

// [C, 1, KH, KW] -> [C/cb, 1, KH, KW, 1, cb].
std::vector<float> pack_depthwise(const ops::Workload& w, const schedule::Config&, int64_t,
                                  int64_t cb, const float* oihw) {
  const auto& k = w.get("kernel");
  return ops::oihw_to_blocked(oihw, k[0], 1, k[2], k[3], 1, cb);
}

// [OC, C/G, KH, KW] -> [OC/ocb, ICg/icb, KH, KW, icb, ocb] (group_conv2d.h).
std::vector<float> pack_grouped(const ops::Workload& w, const schedule::Config&, int64_t icb,
                                int64_t ocb, const float* oihw) {
  const auto &x = w.get("data"), &k = w.get("kernel");
  return ops::group_conv2d_pack_weight(oihw, x[1] / k[1], k[0], k[1], k[2], k[3], icb, ocb);
}

// Groups narrower than a channel block, several per vector
// (group_conv2d_lanes.h): equal group widths, whole groups per block.
std::optional<WorkloadParams> group_lanes_row(const Graph& g, const Node& n, const Isa&) {
  std::optional<WorkloadParams> p = match_conv(g, n, ConvKind::kGrouped);
  if (!p) return std::nullopt;
  ops::Workload w{"group_conv2d_lanes_NCHWc.x86", *p};
  if (!ops::group_conv2d_lanes_applies(ops::conv2d_attrs(w, ops::ConvKind::kGrouped)))
    return std::nullopt;
  return p;
}

// [C, Cg, KH, KW] -> [C/cb, Cg, KH, KW, cb] (group_conv2d_lanes.h).
std::vector<float> pack_group_lanes(const ops::Workload& w, const schedule::Config&, int64_t,
                                    int64_t cb, const float* oihw) {
  const auto& k = w.get("kernel");
  return ops::group_conv2d_lanes_pack_weight(oihw, k[0], k[1], k[2], k[3], cb);
}

// U = G g G^T, [alpha, alpha, OC/ocb, C/icb, icb, ocb] (winograd_conv2d.h).
std::vector<float> pack_winograd(const ops::Workload& w, const schedule::Config& cfg, int64_t,
                                 int64_t, const float* oihw) {
  return ops::winograd_pack_weight(w, cfg, oihw);
}

// [OC, C, KH, KW] -> [OC/ocb, C/icb, KH, KW, ceil(icb/2), ocb, 2] rounded to
// bf16 (conv2d_bf16.h), as float values: apply_templates stores the constant
// in the template's weight dtype, bfloat16, exactly.
std::vector<float> pack_bf16_conv(const ops::Workload& w, const schedule::Config&, int64_t icb,
                                  int64_t ocb, const float* oihw) {
  const auto &x = w.get("data"), &k = w.get("kernel");
  std::vector<uint16_t> p = ops::pack_conv2d_bf16_weight(oihw, k[0], x[1], k[2], k[3], icb, ocb);
  std::vector<float> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = ir::bf16_to_f32_value(p[i]);
  return out;
}

// ---- Gemm / MatMul ------------------------------------------------------------------

// Gemm, or MatMul with a constant right operand: dense over A flattened to [M, K].
std::optional<WorkloadParams> dense_row(const Graph& g, const Node& n, const Isa&) {
  bool gemm = n.op_type == "Gemm";
  if (n.inputs.size() < 2) return std::nullopt;
  const TensorType* at = g.type_of(n.inputs[0]);
  const Initializer* bt = constant_of(g, n.inputs[1]);
  const TensorType* yt = g.type_of(n.outputs.at(0));
  if (!bt || !yt || !is_f32(at) || !is_f32(&bt->type) || bt->type.shape.size() != 2 ||
      at->shape.size() < 2)
    return std::nullopt;
  bool trans_b = false;
  if (gemm) {
    if (n.attr<int64_t>("transA").value_or(0) != 0) return std::nullopt;
    trans_b = n.attr<int64_t>("transB").value_or(0) != 0;
    // C is scaled by beta at build time, so a scaled C must be a constant.
    float beta = n.attr<float>("beta").value_or(1.0f);
    bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (has_c && beta != 0.0f && beta != 1.0f && !constant_of(g, n.inputs[2])) return std::nullopt;
  }
  int64_t K = at->shape.back();
  int64_t M = num_elements(at->shape) / K;
  int64_t N = trans_b ? bt->type.shape[0] : bt->type.shape[1];
  if ((trans_b ? bt->type.shape[1] : bt->type.shape[0]) != K) return std::nullopt;
  return WorkloadParams{{"data", {M, K}}, {"weight", {K, N}}};
}

// --precision bf16 on a target with AMX's bf16 tiles (amx-tile and amx-bf16:
// Isa::amx_bf16): the dense nodes on tdpbf16ps, before dense_bf16.x86
// (vdpbf16ps) even when the target has both.
std::optional<WorkloadParams> dense_amx_bf16_row(const Graph& g, const Node& n, const Isa& isa) {
  return isa.amx_bf16 ? dense_row(g, n, isa) : std::nullopt;
}

// MatMul of two activations (attention's Q K^T and P V): batch_matmul.x86
// when the batch dimensions match or the right operand has none to broadcast.
std::optional<WorkloadParams> batch_matmul_row(const Graph& g, const Node& n, const Isa&) {
  if (n.inputs.size() != 2) return std::nullopt;
  const TensorType* at = g.type_of(n.inputs[0]);
  const TensorType* bt = g.type_of(n.inputs[1]);
  const TensorType* yt = g.type_of(n.outputs.at(0));
  if (!yt || !is_f32(at) || !is_f32(bt) || at->shape.size() < 3 || bt->shape.size() < 2)
    return std::nullopt;
  std::vector<int64_t> a_batch(at->shape.begin(), at->shape.end() - 2);
  std::vector<int64_t> b_batch(bt->shape.begin(), bt->shape.end() - 2);
  int64_t M = at->shape[at->shape.size() - 2], K = at->shape.back();
  int64_t N = bt->shape.back();
  if (bt->shape[bt->shape.size() - 2] != K) return std::nullopt;
  int64_t B = num_elements(a_batch), Bb = num_elements(b_batch);
  if (Bb != 1 && b_batch != a_batch) return std::nullopt;
  return WorkloadParams{{"a", {B, M, K}}, {"b", {Bb, K, N}}};
}

// ---- QLinearConv / QLinearMatMul ---------------------------------------------------

bool is_q8(const std::string& dtype) { return dtype == "uint8" || dtype == "int8"; }

// A constant of `n_in` (nullptr when absent or computed).
const Initializer* const_input(const Graph& g, const Node& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty() ? constant_of(g, n.inputs[i]) : nullptr;
}

bool all_zero(const Initializer& t) {
  for (uint8_t b : t.data)
    if (b) return false;
  return true;
}

// The scalar zero point of a uint8 / int8 constant.
int64_t q8_scalar(const Initializer& t) {
  return t.type.dtype == "int8" ? static_cast<int8_t>(t.data.at(0)) : t.data.at(0);
}

// QLinearConv that conv2d_NCHWc_int8.x86 runs: 2-D, groups 1, x uint8 or
// int8 (shifted to uint8 by +128), an int8 constant weight with zero point 0
// (per tensor or per output channel), per-tensor activation parameters, an
// int32 constant bias or none. Anything else stays on the float path.
// With `depthwise`, the depthwise form instead of groups 1: groups = C = OC,
// weight [C, 1, KH, KW] (depthwise_conv2d_NCHWc_int8.x86).
std::optional<WorkloadParams> match_qconv(const Graph& g, const Node& n, bool depthwise) {
  if (n.inputs.size() < 8) return std::nullopt;
  const TensorType* xt = g.type_of(n.inputs[0]);
  const Initializer* wt = const_input(g, n, 3);
  if (!xt || !wt || !is_q8(xt->dtype) || xt->shape.size() != 4 || wt->type.dtype != "int8" ||
      wt->type.shape.size() != 4)
    return std::nullopt;
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (!const_input(g, n, i)) return std::nullopt;
  const Initializer& xzp = *const_input(g, n, 2);
  const Initializer& yzp = *const_input(g, n, 7);
  if (num_elements(xzp.type.shape) != 1 || num_elements(yzp.type.shape) != 1 ||
      xzp.type.dtype != xt->dtype || !is_q8(yzp.type.dtype) ||
      const_input(g, n, 5)->type.dtype != "int8" || !all_zero(*const_input(g, n, 5)))
    return std::nullopt;
  if (n.inputs.size() > 8 && !n.inputs[8].empty()) {
    const Initializer* b = const_input(g, n, 8);
    if (!b || b->type.dtype != "int32") return std::nullopt;
  }
  const std::vector<int64_t>& x = xt->shape;
  const std::vector<int64_t>& k = wt->type.shape;
  int64_t group = n.attr<int64_t>("group").value_or(1);
  if (depthwise ? group < 2 || group != x[1] || k[0] != x[1] || k[1] != 1
                : group != 1 || k[1] != x[1])
    return std::nullopt;
  // The int32 sum's bound (conv2d_int8.h).
  if (k[1] * k[2] * k[3] > 65792) return std::nullopt;
  op_util::Window win = op_util::conv_window(n, {x[2], x[3]}, {k[2], k[3]});
  std::vector<int64_t> pads = {win.pad_begin[0], win.pad_begin[1], win.pad_end[0], win.pad_end[1]};
  // Padded taps read the activation zero point (in uint8 terms), which the
  // bias correction -zp_x * sum(w) then cancels exactly, as at the interior.
  int64_t zp_x = q8_scalar(xzp) + (xt->dtype == "int8" ? 128 : 0);
  return WorkloadParams{{"data", x},
                        {"kernel", k},
                        {"strides", win.stride},
                        {"pads", pads},
                        {"dilation", win.dilation},
                        {"pad_value", {zp_x}}};
}

// weight_range=[7] (ops/int8_weight_range.h) on a target without a dot
// instruction (AVX2, AVX-512BW without VNNI) when every value of the constant
// int8 weight is within [-64, 64], checked here: the templates then use
// pmaddubsw + pmaddwd, exact for such weights and twice the multiply rate of the
// exact sequence. A single weight outside keeps the exact path. Targets with a
// dot instruction gain nothing from it and keep their records' keys.
void add_weight_range(std::optional<WorkloadParams>& p, const Initializer& weight, const Isa& isa) {
  if (!p || isa.int8_dot_instruction) return;
  if (!ops::weights_fit_narrow(reinterpret_cast<const int8_t*>(weight.data.data()),
                               static_cast<int64_t>(weight.data.size())))
    return;
  p->push_back({"weight_range", {ops::kNarrowWeightBits}});
}

// fold_kw=[1] (ops/conv2d_int8.h) for fewer than 4 input channels, on x86
// targets without a dot instruction: the dot then runs over (kw, c) pairs, 21
// of 24 bytes used for a 7x7 RGB stem where the plain form uses 3 of 4. Its
// gather stage costs about 0.04 ms on ResNet's stem, which pays for itself only
// where the multiplies are slow: on the pmaddubsw path (haswell code on Zen 5)
// the stem went from 0.677 to 0.641 ms (medians of 5 alternating profiles),
// while with VNNI zmm it went from 0.21 to 0.26 ms. Appended after
// weight_range, as ops::with_folded_kw does, so that both spell one key.
void add_fold_kw(std::optional<WorkloadParams>& p, const Isa& isa) {
  if (!p || isa.int8_dot_instruction || isa.isa_class.rfind("x86_64", 0) != 0) return;
  ops::Workload w{"conv2d_NCHWc_int8.x86", *p, "uint8"};
  if (ops::conv2d_int8_can_fold_kw(ops::conv2d_attrs(w, ops::ConvKind::kDense)))
    p->push_back({"fold_kw", {1}});
}

std::optional<WorkloadParams> qconv_row(const Graph& g, const Node& n, const Isa& isa) {
  std::optional<WorkloadParams> p = match_qconv(g, n, /*depthwise=*/false);
  add_weight_range(p, *const_input(g, n, 3), isa);
  add_fold_kw(p, isa);
  return p;
}

// Integer Winograd F(2x2, 3x3) (ops/winograd_conv2d_int8.h) beside the direct
// int8 conv, for the 3x3 stride-1 QLinearConvs with at least 16 channels on
// each side, on x86 targets without a dot instruction: there the direct
// conv's pmaddubsw + pmaddwd multiply 16 byte pairs per instruction and
// pmaddwd as many int16 pairs, so the 2.25x fewer multiplies of F(2x2) are a
// gain; with vpdpbusd (64 per instruction) the direct conv stays. Exact, so
// the tuner may pick either. Not below 32 output tiles: there the int16
// weight, 16/9 x 2 the bytes of the direct one, is read for few tiles
// (ResNet-18's 7x7 x 512 layers, 16 tiles: 0.55 ms against the direct 0.52;
// its 14x14 x 256 ones, 49 tiles: 0.36 against 0.49; haswell code, Zen 5).
constexpr int64_t kWinogradInt8MinTiles = 32;

std::optional<WorkloadParams> qwinograd_row(const Graph& g, const Node& n, const Isa& isa) {
  if (isa.int8_dot_instruction || isa.isa_class.rfind("x86_64", 0) != 0) return std::nullopt;
  std::optional<WorkloadParams> p = match_qconv(g, n, /*depthwise=*/false);
  if (!p) return std::nullopt;
  ops::Workload w{"conv2d_winograd_NCHWc_int8.x86", *p, "uint8"};
  ops::Conv2DAttrs a = ops::conv2d_attrs(w, ops::ConvKind::kDense);
  int64_t tiles = a.batch * ((a.out_height() + 1) / 2) * ((a.out_width() + 1) / 2);
  if (!ops::winograd_int8_applies(a) || a.in_channels < kWinogradMinChannels ||
      a.out_channels < kWinogradMinChannels || tiles < kWinogradInt8MinTiles)
    return std::nullopt;
  return p;
}

// The same convolutions (groups 1) on a target with AMX (amx-tile and
// amx-int8, from the target's features: Isa::amx_int8): tdpbusd tiles with
// whole-channel blocks (ops/conv2d_int8_amx.h). Any C, OC, kernel, stride,
// padding and dilation; the reduction with C rounded up to 4 within the int32
// bound. Depthwise and grouped convolutions are not matched by qconv_row and
// stay on their own templates.
std::optional<WorkloadParams> qconv_amx_row(const Graph& g, const Node& n, const Isa& isa) {
  if (!isa.amx_int8) return std::nullopt;
  std::optional<WorkloadParams> p = match_qconv(g, n, /*depthwise=*/false);
  if (!p) return std::nullopt;
  ops::Workload w{"conv2d_NCHWc_int8_amx.x86", *p, "uint8"};
  if (!ops::conv2d_int8_amx_supports(ops::conv2d_attrs(w, ops::ConvKind::kDense)))
    return std::nullopt;
  return p;
}

// Depthwise QLinearConv (MobileNet's): depthwise_conv2d_NCHWc_int8.x86, on
// the same terms as qconv_row. On a target with AMX (Isa::amx_int8) in the
// whole-channel block (whole_channels=[1], ops/depthwise_conv2d_int8.h), the
// AMX convolutions' layout (C rounded up to 4 in one block), so that a
// depthwise between them (MobileNet's pointwise -> depthwise -> pointwise)
// reads and writes it without a layout transform on either side.
std::optional<WorkloadParams> qdepthwise_row(const Graph& g, const Node& n, const Isa& isa) {
  std::optional<WorkloadParams> p = match_qconv(g, n, /*depthwise=*/true);
  if (p && isa.amx_int8) p->push_back({"whole_channels", {1}});
  return p;
}

// QLinearMatMul that dense_int8.x86 runs: a uint8 or int8 activation
// [..., M, K] (rank >= 2: the leading dims are flattened into the rows, which
// a row-major activation allows without a copy) with per-tensor parameters,
// an int8 constant [K, N] with zero point 0 (per tensor or per column), and
// kiln's optional 9th input, an int32 constant bias [N] (fold_qdq writes a
// Gemm and a MatMul + Add as such a node).
std::optional<WorkloadParams> match_qmatmul(const Graph& g, const Node& n) {
  if (n.inputs.size() != 8 && n.inputs.size() != 9) return std::nullopt;
  const TensorType* at = g.type_of(n.inputs[0]);
  const Initializer* bt = const_input(g, n, 3);
  if (!at || !bt || !is_q8(at->dtype) || at->shape.size() < 2 || bt->type.dtype != "int8" ||
      bt->type.shape.size() != 2 || bt->type.shape[0] != at->shape.back())
    return std::nullopt;
  if (n.inputs.size() == 9 && !n.inputs[8].empty()) {
    const Initializer* b = const_input(g, n, 8);
    if (!b || b->type.dtype != "int32" || b->type.shape != std::vector<int64_t>{bt->type.shape[1]})
      return std::nullopt;
  }
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (!const_input(g, n, i)) return std::nullopt;
  const Initializer& azp = *const_input(g, n, 2);
  const Initializer& yzp = *const_input(g, n, 7);
  const Initializer& as = *const_input(g, n, 1);
  if (num_elements(azp.type.shape) != 1 || num_elements(as.type.shape) != 1 ||
      num_elements(yzp.type.shape) != 1 || azp.type.dtype != at->dtype || !is_q8(yzp.type.dtype) ||
      const_input(g, n, 5)->type.dtype != "int8" || !all_zero(*const_input(g, n, 5)))
    return std::nullopt;
  int64_t K = at->shape.back(), M = num_elements(at->shape) / K, N = bt->type.shape[1];
  if (K > 65792) return std::nullopt;  // the int32 sum's bound (dense_int8.h)
  return WorkloadParams{{"data", {M, K}}, {"weight", {K, N}}};
}

// The same, with weight_range=[7] where it applies (add_weight_range).
std::optional<WorkloadParams> qmatmul_row(const Graph& g, const Node& n, const Isa& isa) {
  std::optional<WorkloadParams> p = match_qmatmul(g, n);
  if (p) add_weight_range(p, *const_input(g, n, 3), isa);
  return p;
}

// The same nodes on a target with AMX (amx-tile and amx-int8, from the
// target's features: Isa::amx_int8), when K is a multiple of 4: a tile row
// holds whole 4-byte groups. Other K stays on dense_int8.x86 (the next row):
// padding K would also need A padded, a copy of the activation per run.
std::optional<WorkloadParams> qmatmul_amx_row(const Graph& g, const Node& n, const Isa& isa) {
  if (!isa.amx_int8) return std::nullopt;
  std::optional<WorkloadParams> p = match_qmatmul(g, n);
  if (!p || p->at(0).second.at(1) % 4 != 0) return std::nullopt;
  return p;
}

// QLinearMatMul of two activations (attention's Q K^T and P V) that
// batch_matmul_int8.x86 runs: a [..., M, K] and b [..., K, N] uint8 or int8
// with per-tensor parameters, b's batch dims a's or all 1 (broadcast), no
// bias. K <= 11008 keeps every int32 term of the zero-point corrections
// exact (apply_templates.cc: |each| <= 255 * 255 * K, three summed).
std::optional<WorkloadParams> qbatch_matmul_row(const Graph& g, const Node& n, const Isa&) {
  if (n.inputs.size() != 8 || const_input(g, n, 3)) return std::nullopt;
  const TensorType* at = g.type_of(n.inputs[0]);
  const TensorType* bt = g.type_of(n.inputs[3]);
  if (!at || !bt || !is_q8(at->dtype) || !is_q8(bt->dtype) || at->shape.size() < 2 ||
      bt->shape.size() < 2 || bt->shape.size() > at->shape.size())
    return std::nullopt;
  for (size_t i : {1, 2, 4, 5, 6, 7}) {
    const Initializer* c = const_input(g, n, i);
    if (!c || num_elements(c->type.shape) != 1) return std::nullopt;
  }
  if (const_input(g, n, 2)->type.dtype != at->dtype ||
      const_input(g, n, 5)->type.dtype != bt->dtype || !is_q8(const_input(g, n, 7)->type.dtype))
    return std::nullopt;
  int64_t M = at->shape[at->shape.size() - 2], K = at->shape.back(), N = bt->shape.back();
  if (bt->shape[bt->shape.size() - 2] != K || K > 11008) return std::nullopt;
  std::vector<int64_t> a_batch(at->shape.begin(), at->shape.end() - 2);
  std::vector<int64_t> b_batch(bt->shape.begin(), bt->shape.end() - 2);
  int64_t B = num_elements(a_batch), Bb = num_elements(b_batch);
  if (Bb != 1 && b_batch != a_batch) return std::nullopt;
  return WorkloadParams{{"a", {B, M, K}}, {"b", {Bb, K, N}}};
}

// The same nodes on a target with AMX (amx-tile and amx-int8: Isa::amx_int8),
// when K is a multiple of 4: a tile row holds whole 4-byte groups, and
// padding K would also need a copy of A per run. Other K stays on
// batch_matmul_int8.x86 (the next row). The workload is the same shapes
// under the tile template's name (ops/batch_matmul_int8_amx.h).
std::optional<WorkloadParams> qbatch_matmul_amx_row(const Graph& g, const Node& n, const Isa& isa) {
  if (!isa.amx_int8) return std::nullopt;
  std::optional<WorkloadParams> p = qbatch_matmul_row(g, n, isa);
  if (!p || p->at(0).second.at(2) % 4 != 0) return std::nullopt;
  return p;
}

}  // namespace

// The table (see strategy.h). Rows of one operator are tried in this order.
const std::vector<Strategy>& strategies() {
  static const std::vector<Strategy> rows = {
      // --precision bf16: the bf16 variants of conv2d_NCHWc and dense_pack on the
      // same nodes, before the float rows (strategy.h).
      {"Conv", "conv2d_NCHWc_bf16.x86", conv_row<ConvKind::kDense>, Rewrite::kBlockedConv,
       pack_bf16_conv, /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"bfloat16",
       Precision::kBf16},
      {"Gemm", "dense_bf16_amx.x86", dense_amx_bf16_row, Rewrite::kDenseBf16, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"bfloat16", Precision::kBf16},
      {"MatMul", "dense_bf16_amx.x86", dense_amx_bf16_row, Rewrite::kDenseBf16, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"bfloat16", Precision::kBf16},
      {"Gemm", "dense_bf16.x86", dense_row, Rewrite::kDenseBf16, nullptr, /*alternative=*/false,
       /*untuned_default=*/false, /*dtype=*/"bfloat16", Precision::kBf16},
      {"MatMul", "dense_bf16.x86", dense_row, Rewrite::kDenseBf16, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"bfloat16", Precision::kBf16},
      {"Conv", "conv2d_NCHWc.x86", conv_row<ConvKind::kDense>, Rewrite::kBlockedConv,
       pack_dense_conv},
      // Winograd F(4x4)/F(2x2) beside the direct 3x3 stride-1 convolution:
      // both are tuned, the faster record is built, and untuned it is
      // Winograd (2.1-2.4x the direct fallback on ResNet's 3x3 shapes,
      // bench/isa) unless the map is too small for its tiles
      // (ops::winograd_fallback_pays).
      {"Conv", "conv2d_winograd_NCHWc.x86", winograd_row, Rewrite::kBlockedConv, pack_winograd,
       /*alternative=*/true, /*untuned_default=*/true, /*dtype=*/"float32", Precision::kFp32,
       ops::winograd_fallback_pays},
      {"Conv", "depthwise_conv2d_NCHWc.x86", conv_row<ConvKind::kDepthwise>, Rewrite::kBlockedConv,
       pack_depthwise},
      {"Conv", "group_conv2d_NCHWc.x86", conv_row<ConvKind::kGrouped>, Rewrite::kBlockedConv,
       pack_grouped},
      // Groups narrower than a channel block, several whole groups per
      // vector: both are tuned, the faster record is built, and untuned it
      // is this one (full vectors where the first row's are Cg lanes wide).
      {"Conv", "group_conv2d_lanes_NCHWc.x86", group_lanes_row, Rewrite::kBlockedConv,
       pack_group_lanes, /*alternative=*/true, /*untuned_default=*/true},
      {"Gemm", "dense_pack.x86", dense_row, Rewrite::kDense},
      // A MatMul dense does not cover (a non-constant B) may still be a batch_matmul.
      {"MatMul", "dense_pack.x86", dense_row, Rewrite::kDense},
      {"MatMul", "batch_matmul.x86", batch_matmul_row, Rewrite::kPlain},
      // AMX tiles (tdpbusd) where the target has them, before conv2d_NCHWc_int8.x86.
      {"QLinearConv", "conv2d_NCHWc_int8_amx.x86", qconv_amx_row, Rewrite::kQLinearConv, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"uint8"},
      {"QLinearConv", "conv2d_NCHWc_int8.x86", qconv_row, Rewrite::kQLinearConv, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"uint8"},
      // Integer Winograd beside it on x86 without a dot instruction: both are
      // tuned, the faster record is built, and untuned it is Winograd.
      {"QLinearConv", "conv2d_winograd_NCHWc_int8.x86", qwinograd_row, Rewrite::kQLinearConv,
       nullptr, /*alternative=*/true, /*untuned_default=*/true, /*dtype=*/"uint8"},
      // (On AMX targets in the AMX convolutions' whole-channel block.)
      {"QLinearConv", "depthwise_conv2d_NCHWc_int8.x86", qdepthwise_row, Rewrite::kQLinearConv,
       nullptr, /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"uint8"},
      // AMX tiles (tdpbusd) where the target has them, before dense_int8.x86.
      {"QLinearMatMul", "dense_int8_amx.x86", qmatmul_amx_row, Rewrite::kQLinearMatMul, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"uint8"},
      {"QLinearMatMul", "dense_int8.x86", qmatmul_row, Rewrite::kQLinearMatMul, nullptr,
       /*alternative=*/false, /*untuned_default=*/false, /*dtype=*/"uint8"},
      // A QLinearMatMul whose b is an activation (dense_int8 takes constant b
      // only): AMX tiles (tdpbusd) where the target has them, else vpdpbusd.
      {"QLinearMatMul", "batch_matmul_int8_amx.x86", qbatch_matmul_amx_row,
       Rewrite::kQLinearBatchMatMul, nullptr, /*alternative=*/false, /*untuned_default=*/false,
       /*dtype=*/"uint8"},
      {"QLinearMatMul", "batch_matmul_int8.x86", qbatch_matmul_row, Rewrite::kQLinearBatchMatMul,
       nullptr, /*alternative=*/false, /*untuned_default=*/false,
       /*dtype=*/"uint8"},
  };
  return rows;
}

const Strategy* find_strategy(const std::string& op_type, const std::string& template_name) {
  for (const Strategy& s : strategies())
    if (op_type == s.op_type && template_name == s.template_name) return &s;
  return nullptr;
}

bool int8_template_covers(const Graph& g, const Node& n) {
  if (n.op_type != "QLinearConv" && n.op_type != "QLinearMatMul") return false;
  // The QLinear matchers read no part of the ISA row but its AMX flag, and
  // the AMX rows cover subsets of dense_int8.x86's and conv2d_NCHWc_int8.x86's
  // nodes.
  Isa isa;
  for (const Strategy& s : strategies())
    if (n.op_type == s.op_type && s.match(g, n, isa)) return true;
  return false;
}

}  // namespace kiln::graph
