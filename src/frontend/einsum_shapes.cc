#include "frontend/einsum_shapes.h"

#include <map>
#include <string>
#include <vector>

#include "frontend/onnx_import.h"
#include "graph/ops/einsum.h"

namespace kiln::frontend {
namespace {

// Full static shape of a typed value; false when a dim or the shape is unknown.
bool static_shape(const onnx::TypeProto& t, std::vector<int64_t>* dims) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return false;
  dims->clear();
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return false;
    dims->push_back(d.dim_value());
  }
  return true;
}

std::map<std::string, onnx::TypeProto> known_types(const onnx::GraphProto& g) {
  std::map<std::string, onnx::TypeProto> types;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list) types[vi.name()] = vi.type();
  for (const auto& t : g.initializer()) {
    onnx::TypeProto tp;
    tp.mutable_tensor_type()->set_elem_type(t.data_type());
    auto* shape = tp.mutable_tensor_type()->mutable_shape();
    for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    types[t.name()] = tp;
  }
  return types;
}

}  // namespace

int type_einsum_outputs(onnx::ModelProto* model) {
  auto* g = model->mutable_graph();
  const std::map<std::string, onnx::TypeProto> types = known_types(*g);
  int typed = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (n.op_type() != "Einsum" || !(n.domain().empty() || n.domain() == "ai.onnx") ||
        n.output_size() != 1 || n.input_size() == 0)
      continue;
    std::vector<int64_t> known;
    auto out = types.find(n.output(0));
    if (out != types.end() && static_shape(out->second, &known)) continue;
    std::vector<std::vector<int64_t>> shapes;
    int elem = 0;
    for (const std::string& in : n.input()) {
      auto it = types.find(in);
      std::vector<int64_t> dims;
      if (it == types.end() || !static_shape(it->second, &dims)) break;
      shapes.push_back(dims);
      elem = it->second.tensor_type().elem_type();
    }
    if (shapes.size() != static_cast<size_t>(n.input_size())) continue;
    graph::Node node;
    node.op_type = "Einsum";
    node.name = n.name().empty() ? "Einsum_" + std::to_string(i) : n.name();
    for (const auto& a : n.attribute())
      if (a.name() == "equation") node.attrs["equation"] = a.s();
    const graph::op_util::EinsumSpec spec = graph::op_util::parse_einsum(node, shapes);
    // Every entry that names the value (value_info, and the graph output it
    // may be), or a new value_info entry.
    std::vector<onnx::ValueInfoProto*> entries;
    for (auto* list : {g->mutable_value_info(), g->mutable_output()})
      for (auto& v : *list)
        if (v.name() == n.output(0)) entries.push_back(&v);
    if (entries.empty()) {
      entries.push_back(g->add_value_info());
      entries.back()->set_name(n.output(0));
    }
    for (onnx::ValueInfoProto* vi : entries) {
      auto* tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(elem);
      tt->mutable_shape()->clear_dim();
      for (char c : spec.output) tt->mutable_shape()->add_dim()->set_dim_value(spec.extent.at(c));
    }
    ++typed;
  }
  return typed;
}

}  // namespace kiln::frontend
