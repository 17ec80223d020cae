#include "graph/passes/select_templates.h"

#include <optional>
#include <stdexcept>

#include "graph/ops/op_util.h"
#include "graph/ops/window.h"
#include "graph/passes/pass_util.h"

namespace kiln::graph {
namespace {

using passes::constant_of;
using passes::num_elements;

TemplateSelection selection(const Node& n, const std::string& template_name,
                            std::vector<std::pair<std::string, std::vector<int64_t>>> params) {
  TemplateSelection s{n.name, template_name, {}};
  s.workload.template_name = template_name;
  s.workload.params = std::move(params);
  return s;
}

bool is_f32(const TensorType* t) { return t && t->dtype == "float32"; }

std::optional<TemplateSelection> select_conv(const Graph& g, const Node& n) {
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
  if (group != 1 && !depthwise) return std::nullopt;
  // The Conv operator's own window arithmetic (strides, dilations, pads,
  // auto_pad): the template computes exactly the operator's output.
  op_util::Window win = op_util::conv_window(n, {x[2], x[3]}, {k[2], k[3]});
  const std::vector<int64_t>& st = win.stride;
  const std::vector<int64_t>& dil = win.dilation;
  std::vector<int64_t> pads = {win.pad_begin[0], win.pad_begin[1], win.pad_end[0], win.pad_end[1]};
  // The bias is re-laid out for the blocked layout at build time.
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !constant_of(g, n.inputs[2]))
    op_util::fail(n, "a Conv bias must be a constant");
  return selection(
      n, depthwise ? "depthwise_conv2d_NCHWc.x86" : "conv2d_NCHWc.x86",
      {{"data", x}, {"kernel", k}, {"strides", st}, {"pads", pads}, {"dilation", dil}});
}

// Gemm, or MatMul with a constant right operand: dense over A flattened to [M, K].
std::optional<TemplateSelection> select_dense(const Graph& g, const Node& n) {
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
  return selection(n, "dense_pack.x86", {{"data", {M, K}}, {"weight", {K, N}}});
}

// MatMul of two activations (attention's Q K^T and P V): batch_matmul.x86
// when the batch dimensions match or the right operand has none to broadcast.
std::optional<TemplateSelection> select_batch_matmul(const Graph& g, const Node& n) {
  if (n.op_type != "MatMul" || n.inputs.size() != 2) return std::nullopt;
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
  return selection(n, "batch_matmul.x86", {{"a", {B, M, K}}, {"b", {Bb, K, N}}});
}

std::optional<TemplateSelection> select_node(const Graph& g, const Node& n) {
  if (n.op_type == "Conv") return select_conv(g, n);
  if (n.op_type != "Gemm" && n.op_type != "MatMul") return std::nullopt;
  // A MatMul dense does not cover (a non-constant B) may still be a batch_matmul.
  if (auto s = select_dense(g, n)) return s;
  return select_batch_matmul(g, n);
}

}  // namespace

std::vector<TemplateSelection> select_templates(const Graph& g) {
  std::vector<TemplateSelection> out;
  for (const Node& n : g.nodes)
    if (auto s = select_node(g, n)) out.push_back(std::move(*s));
  return out;
}

}  // namespace kiln::graph
