// The strategy table: which tunable template covers which operator on which
// target, and how apply_templates rewrites a node it covers. One row per
// (operator, template); select_templates tries the rows of a node's operator
// in table order (the first row whose matcher accepts the node wins) and
// apply_templates rewrites the node with its row's rewrite. Nothing else in
// the graph compiler names a template.
//
//   op      template                      matcher                                   rewrite
//   Conv    conv2d_NCHWc.x86              groups 1, constant f32 4-D weight         kBlockedConv
//   Conv    conv2d_winograd_NCHWc.x86     3x3, stride 1, groups 1, a dilation       kBlockedConv
//                                         whose phases hold tiles (winograd_pays),
//           (an alternative)              C and OC >= 16
//   Conv    depthwise_conv2d_NCHWc.x86    groups = C = OC, multiplier 1             kBlockedConv
//   Conv    group_conv2d_NCHWc.x86        1 < groups, not depthwise                 kBlockedConv
//   Conv    group_conv2d_lanes_NCHWc.x86  as above, C = OC, block(C) holds >= 2      kBlockedConv
//           (an alternative)              whole groups
//   Gemm    dense_pack.x86                transA 0, constant 2-D B                  kDense
//   MatMul  dense_pack.x86                constant 2-D B (A flattened to [M, K])    kDense
//   MatMul  batch_matmul.x86              two activations, batch dims match or none kPlain
//                                         on the right
//   QLinearConv conv2d_NCHWc_int8_amx.x86 as conv2d_NCHWc_int8.x86's row, on a target  kQLinearConv
//                                         with amx-tile and amx-int8 (Isa::amx_int8):
//                                         AMX tiles, whole-channel blocks
//   QLinearConv conv2d_NCHWc_int8.x86     groups 1, 2-D, x uint8/int8, w int8       kQLinearConv
//                                         constant with zero point 0, every
//                                         parameter constant (dtype uint8)
//   QLinearConv depthwise_conv2d_NCHWc_   groups = C = OC (multiplier 1), otherwise kQLinearConv
//               int8.x86                  as conv2d_NCHWc_int8.x86's row
//   QLinearMatMul dense_int8_amx.x86      as dense_int8.x86's row, on a target with  kQLinearMatMul
//                                         amx-tile and amx-int8 (Isa::amx_int8), K a
//                                         multiple of 4 (AMX tiles, tdpbusd)
//   QLinearMatMul dense_int8.x86          activation [..., M, K] uint8/int8 (leading kQLinearMatMul
//                                         dims flattened), b int8 constant [K, N]
//                                         with zero point 0, int32 bias [N] or none
//   QLinearMatMul batch_matmul_int8_amx.x86 as batch_matmul_int8.x86's row, on a    kQLinearBatchMatMul
//                                         target with amx_int8, K a multiple of 4
//   QLinearMatMul batch_matmul_int8.x86   a [..., M, K] and b [..., K, N] both kQLinearBatchMatMul
//                                         activations, uint8/int8, per tensor, b's
//                                         batch a's or broadcast, K <= 11008
//   Conv    conv2d_NCHWc_bf16.x86         --precision bf16 only: as conv2d_NCHWc   kBlockedConv
//                                         (dtype bfloat16)
//   Gemm    dense_bf16_amx.x86            --precision bf16 on a target with         kDenseBf16
//   MatMul  dense_bf16_amx.x86            amx-tile and amx-bf16 (Isa::amx_bf16): as  kDenseBf16
//                                         dense_pack, tdpbf16ps tiles (dtype bfloat16)
//   Gemm    dense_bf16.x86                --precision bf16 only: as dense_pack     kDenseBf16
//   MatMul  dense_bf16.x86                (dtype bfloat16)                          kDenseBf16
//
// Rows of precision bf16 are tried only when the build asks for it
// (select_templates' `precision`), before the float rows of their operator,
// and the float rows' alternatives (Winograd) do not join a node they took:
// every other node keeps its float template.
//
// The QLinear rows' matchers also decide which quantized nodes stay integer:
// run_default_passes keeps exactly the QLinearConv / QLinearMatMul nodes that
// int8_template_covers() accepts and lowers the rest to float
// (expand_quantized_ops, docs/quantization.md).
//
// Adding a template: write it in src/ops/ (its own .h/.cc, listed in
// ops/op_template.cc's registry), then add one row here: its operator, its
// name, a matcher that returns its workload params for the nodes (and
// targets: the matcher sees the target's Isa) it covers, and a rewrite kind
// (with a weight packer for kBlockedConv). Adding a target-specific template
// for an operator: a row with a matcher that checks the Isa, placed before
// the rows it should win over. A new rewrite kind (a template whose graph
// rewrite is none of these) is one more case in apply_templates.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "ops/workload.h"
#include "schedule/config_space.h"
#include "support/isa.h"

namespace kiln::graph {

// How apply_templates turns a covered node into template nodes.
enum class Rewrite {
  // Conv(x, W, b) -> LT(x: NCHW -> NCHW[ic_bn]c) -> kiln.Template(x_c, W packed by
  // the row's pack_weight) -> Add(bias in NCHW[oc_bn]c) -> LT(NCHW[oc_bn]c -> NCHW).
  // The template must be channel_blocked(); ic_bn and oc_bn are its layout blocks.
  kBlockedConv,
  // Gemm(A, B, C) / MatMul(A, B const) -> kiln.Template(A, alpha * B packed) -> Add(beta * C).
  kDense,
  // kiln.Template on the node's inputs as they are (batch_matmul).
  kPlain,
  // QLinearConv(x, xs, xzp, w, ws, wzp, ys, yzp [, B]) -> [int8 x: kiln.Requantize
  // +128 -> uint8] -> [Pad channels to whole blocks] -> LT(NCHW -> NCHW[ic_bn]c) ->
  // kiln.Template(x_c, w packed int8: by K quads, or [C/cb, 1, KH, KW, 1, cb] for the
  // depthwise template) -> kiln.Requantize(acc, B - zp_x * sum_k w,
  // xs * ws[c] / ys; yzp) in NCHW[oc_bn]c (the template's fused epilogue) ->
  // LT(NCHW[oc_bn]c -> NCHW) [-> Slice of the OC real channels].
  kQLinearConv,
  // QLinearMatMul(a [..., M, K], .., b const [K, N], .. [, B int32 [N]]) -> [int8 a:
  // +128] -> kiln.Template(a viewed as [rows, K], b packed int8) ->
  // kiln.Requantize(acc, B - zp_a * sum_k b, as * bs[n] / ys; yzp) as the
  // template's epilogue.
  kQLinearMatMul,
  // QLinearMatMul(a [..., M, K], .., b [..., K, N] activation, ..) -> [int8 a: +128],
  // [uint8 b: -128 -> int8] -> Pad/Reshape/Transpose (b packed by K quads at run time) ->
  // kiln.Template(a, b packed) -> + d * rowsum(a) - zp_a * colsum(b) ->
  // kiln.Requantize(acc, K * zp_a * zp_b, as * bs / ys; yzp) (the zero points exactly,
  // apply_templates.cc).
  kQLinearBatchMatMul,
  // Gemm(A, B, C) / MatMul(A, B const) -> kiln.Template(A, bf16(alpha * B) packed by
  // K pairs) -> Add(beta * C): kDense with a bfloat16 weight (dense_bf16.h).
  kDenseBf16,
};

// The precision a build asks for (kiln build --precision): kFp32 uses the
// float templates only; kBf16 also the rows marked bf16, which win over the
// float rows of the nodes they match.
enum class Precision { kFp32, kBf16 };

// A constant OIHW weight in the template's weight layout, for a workload,
// its config and the config's layout blocks (input, output).
using PackWeight = std::vector<float> (*)(const ops::Workload& w, const schedule::Config& cfg,
                                          int64_t ic_block, int64_t oc_block, const float* oihw);

using WorkloadParams = std::vector<std::pair<std::string, std::vector<int64_t>>>;

struct Strategy {
  const char* op_type;        // the graph operator ("Conv", "Gemm", "MatMul")
  const char* template_name;  // a registered ops template
  // The workload params when this row covers node n on a target with `isa`,
  // std::nullopt otherwise. Throws std::runtime_error naming the node for a
  // node the row covers but cannot rewrite (a Conv with a runtime bias).
  std::optional<WorkloadParams> (*match)(const Graph& g, const Node& n, const Isa& isa);
  Rewrite rewrite;
  PackWeight pack_weight = nullptr;  // kBlockedConv rows only
  // An alternative implementation: tried even when an earlier row of the
  // operator matched, it joins that row's selection as one more tuning task
  // for the node, and the build takes whichever has the fastest record
  // (select_templates.h, choose_implementations).
  bool alternative = false;
  // Without a record for any implementation of a node, this row's is built
  // (an alternative that is known to beat the first row's fallback)...
  bool untuned_default = false;
  // The workload's dtype (part of its key, so of the tuning records').
  const char* dtype = "float32";
  // kBf16: a row tried only under Precision::kBf16.
  Precision precision = Precision::kFp32;
  // ...where this returns true for the row's workload (nullptr: always).
  bool (*untuned_default_if)(const ops::Workload& w, const Isa& isa) = nullptr;
};

// Every row, in the order select_templates tries them.
const std::vector<Strategy>& strategies();

// The row that selected template `template_name` for an `op_type` node;
// nullptr if there is none.
const Strategy* find_strategy(const std::string& op_type, const std::string& template_name);

// Whether a row of an integer template covers quantized node n (a
// QLinearConv / QLinearMatMul): the nodes expand_quantized_ops keeps.
bool int8_template_covers(const Graph& g, const Node& n);

}  // namespace kiln::graph
