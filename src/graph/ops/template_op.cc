// kiln.Template: a node run by one of the tunable operator templates of
// src/ops (conv2d_NCHWc.x86, dense_pack.x86, ...). The template-selection
// pass (passes/apply_templates) creates it from Conv/Gemm/MatMul with inputs
// already in the template's layouts (blocked activations, pre-packed weights).
// Attributes: template (name), workload (key), config (Config JSON),
// output_shape (the graph shape of the output; it may differ from the
// template's output shape by a reshape, e.g. MatMul [1,128,K] x [K,N] runs as
// dense [128,K] x [K,N]).
#include <cstring>

#include "graph/op_registry.h"
#include "graph/ops/op_util.h"
#include "ops/op_template.h"

namespace kiln::graph {
namespace {

std::vector<Initializer> evaluate(const Node& node, const std::vector<const Initializer*>& in) {
  const ops::OpTemplate& t = ops::get_template(*node.attr<std::string>("template"));
  ops::Workload w = ops::Workload::parse(*node.attr<std::string>("workload"));
  schedule::Config cfg = schedule::Config::from_json(t.space(w), *node.attr<std::string>("config"));
  std::vector<const float*> ptrs;
  for (const Initializer* x : in) {
    if (!x || x->type.dtype != "float32")
      op_util::fail(node, "template inputs must be float32 tensors");
    ptrs.push_back(reinterpret_cast<const float*>(x->data.data()));
  }
  Initializer out;
  out.type = {"float32", *node.attr<std::vector<int64_t>>("output_shape")};
  int64_t n = 1;
  for (int64_t d : t.output_shape(w, cfg)) n *= d;
  if (n != out.type.num_elements())
    op_util::fail(node, "output_shape does not match the template's output");
  out.data.resize(static_cast<size_t>(n) * sizeof(float));
  t.reference(w, cfg, ptrs, reinterpret_cast<float*>(out.data.data()));
  return {out};
}

}  // namespace

void register_template_ops() {
  // No compute: the kernel builder lowers anchors through the template itself
  // (driver/lower_group.cc, lower_group_template).
  register_op({"kiln.Template", OpPattern::kAnchor, evaluate, nullptr, {}});
}

}  // namespace kiln::graph
