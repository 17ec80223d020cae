#include "frontend/constant_branches.h"

#include <onnx/onnx_pb.h>

#include <map>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"

namespace kiln::frontend {

namespace {

// The condition's value when it is a one-element initializer.
bool constant_condition(const onnx::TensorProto& t, const std::string& what, bool* value) {
  graph::Initializer c = convert_tensor(t, what);
  if (c.type.num_elements() != 1 || c.data.empty()) return false;
  bool any = false;
  for (uint8_t b : c.data) any |= b != 0;  // nonzero in any element type
  *value = any;
  return true;
}

const onnx::GraphProto* branch(const onnx::NodeProto& n, bool cond) {
  for (const auto& a : n.attribute())
    if (a.type() == onnx::AttributeProto::GRAPH &&
        a.name() == (cond ? "then_branch" : "else_branch"))
      return &a.g();
  return nullptr;
}

bool is_if(const onnx::NodeProto& n) {
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == "If";
}

}  // namespace

bool has_if(const onnx::ModelProto& model) {
  for (const auto& n : model.graph().node())
    if (is_if(n)) return true;
  return false;
}

int inline_constant_branches(onnx::ModelProto* model, std::vector<std::string>* names) {
  onnx::GraphProto* g = model->mutable_graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g->initializer()) inits[t.name()] = &t;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  std::vector<std::string> kept_names;
  std::vector<onnx::TensorProto> added;
  int inlined = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const std::string& name = (*names)[i];
    bool cond = false;
    auto c = is_if(n) && n.input_size() == 1 ? inits.find(n.input(0)) : inits.end();
    const onnx::GraphProto* taken = nullptr;
    if (c != inits.end() &&
        constant_condition(*c->second, "node '" + name + "' (If) condition", &cond))
      taken = branch(n, cond);
    if (!taken || taken->output_size() != n.output_size()) {
      *kept.Add() = n;
      kept_names.push_back(name);
      continue;
    }
    for (const auto& t : taken->initializer()) added.push_back(t);
    for (int k = 0; k < taken->node_size(); ++k) {
      const onnx::NodeProto& b = taken->node(k);
      const std::string inner =
          name + "/" + (b.name().empty() ? b.op_type() + "_" + std::to_string(k) : b.name());
      if ((b.domain().empty() || b.domain() == "ai.onnx") && b.op_type() == "Constant" &&
          b.output_size() == 1) {
        added.push_back(constant_tensor(b, "node '" + inner + "' (Constant)"));
        continue;
      }
      onnx::NodeProto* copy = kept.Add();
      *copy = b;
      copy->set_name(inner);
      kept_names.push_back(inner);
    }
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty()) continue;
      onnx::NodeProto* id = kept.Add();
      id->set_op_type("Identity");
      id->add_input(taken->output(k).name());
      id->add_output(n.output(k));
      id->set_name(name + "/output_" + std::to_string(k));
      kept_names.push_back(id->name());
    }
    ++inlined;
  }
  if (!inlined) return 0;
  g->mutable_node()->Swap(&kept);
  *names = std::move(kept_names);
  for (auto& t : added) *g->add_initializer() = std::move(t);
  return inlined;
}

}  // namespace kiln::frontend
