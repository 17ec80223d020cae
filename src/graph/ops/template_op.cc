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
  // Inputs and output in the template's element types (float32, or uint8/int8
  // data and weights and an int32 output for the integer templates).
  std::vector<ir::DataType> in_types = t.input_dtypes(w);
  if (in.size() != in_types.size())
    op_util::fail(node, "template " + t.name() + " takes " + std::to_string(in_types.size()) +
                            " inputs, got " + std::to_string(in.size()));
  std::vector<const void*> ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    const Initializer* x = in[i];
    std::string want = ops::graph_dtype_name(in_types[i]);
    if (!x || x->type.dtype != want)
      op_util::fail(node, "template input " + std::to_string(i) + " must be a " + want + " tensor" +
                              (x ? ", got " + x->type.dtype : ""));
    ptrs.push_back(x->data.data());
  }
  ir::DataType out_type = t.output_dtype(w);
  Initializer out;
  out.type = {ops::graph_dtype_name(out_type), *node.attr<std::vector<int64_t>>("output_shape")};
  int64_t n = 1;
  for (int64_t d : t.output_shape(w, cfg)) n *= d;
  if (n != out.type.num_elements())
    op_util::fail(node, "output_shape does not match the template's output");
  out.data.resize(static_cast<size_t>(n) * out_type.bytes());
  t.reference_typed(w, cfg, ptrs, out.data.data());
  return {out};
}

}  // namespace

void register_template_ops() {
  // No compute: the kernel builder lowers anchors through the template itself
  // (driver/lower_group.cc, lower_group_template).
  register_op({"kiln.Template", OpPattern::kAnchor, evaluate, nullptr, {}});
}

}  // namespace kiln::graph
