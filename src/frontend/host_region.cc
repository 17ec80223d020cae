#include "frontend/host_region.h"

#include <onnx/onnx_pb.h>

#include <map>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"
#include "frontend/shape_folding.h"
#include "graph/op_registry.h"

namespace kiln::frontend {

const std::set<std::string>& host_operators() {
  static const std::set<std::string> ops = {
      // shapes from run-time values
      "Reshape", "Expand", "Tile", "Slice", "Pad", "Squeeze", "Unsqueeze", "Split",
      "ConstantOfShape", "Range",
      // sizes from the data
      "NonZero", "Compress", "Unique", "TopK", "NonMaxSuppression",
      // what may read them
      "Concat", "Gather", "Transpose", "Flatten", "Identity", "Shape", "Size", "Cast", "Add", "Sub",
      "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "And", "Or", "Xor", "Where", "Neg", "Abs", "Not", "Relu", "Sigmoid", "Exp", "Sqrt", "Floor",
      "Ceil", "Sin", "Cos", "Tanh", "Log", "Reciprocal",
      // reductions (axes at run time, or over run-time shaped tensors)
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
      // constant-only inputs (OpDef::constant_inputs) fed at run time
      "CumSum", "OneHot", "Resize", "MaxUnpool"};
  return ops;
}

namespace {

// Element types ONNX inference gave, shapes or not.
std::map<std::string, int> element_types(const onnx::GraphProto& g) {
  std::map<std::string, int> types;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list)
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
        types[vi.name()] = vi.type().tensor_type().elem_type();
  for (const auto& t : g.initializer()) types[t.name()] = t.data_type();
  return types;
}

// The first input of `n` that the compiled operator needs as a build-time
// constant (graph::OpDef::constant_inputs) but whose value depends on a
// graph input's data (`varying`); empty when there is none.
std::string varying_constant_input(const onnx::NodeProto& n, const std::set<std::string>& varying) {
  const graph::OpDef* def = graph::find_op(n.op_type());
  if (!def || def->constant_inputs_may_vary) return "";
  for (int k = 0; k < n.input_size(); ++k)
    if (graph::is_constant_input(*def, k) && varying.count(n.input(k))) return n.input(k);
  return "";
}

std::string join(const std::set<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : " ") + i;
  return s;
}

}  // namespace

void split_host_region(onnx::ModelProto* model, std::vector<std::string>* names,
                       graph::HostRegion* host) {
  onnx::GraphProto* g = model->mutable_graph();
  std::set<std::string> untyped;
  for (const std::string& v : untyped_outputs(*model)) untyped.insert(v);
  std::set<std::string> used;
  for (const auto& n : g->node())
    for (const auto& in : n.input()) used.insert(in);
  for (const auto& o : g->output()) used.insert(o.name());

  std::map<std::string, int> elem = element_types(*g);
  // Values that depend on a graph input's data (not only on its shape): a
  // graph input, and what a node computes from one outside its type-only
  // inputs (Shape, Size). Everything else the graph's constant folder can
  // evaluate at build time.
  std::set<std::string> varying;
  std::set<std::string> inits_names;
  for (const auto& t : g->initializer()) inits_names.insert(t.name());
  for (const auto& in : g->input())
    if (!inits_names.count(in.name())) varying.insert(in.name());

  std::map<std::string, std::string> made_by;  // host value -> its node
  // host value -> why it is one, where not for a run-time shape
  std::map<std::string, std::string> why;
  std::vector<bool> to_host(g->node_size(), false);
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const std::string& name = (*names)[i];
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    {
      const graph::OpDef* def = onnx_domain ? graph::find_op(n.op_type()) : nullptr;
      bool reads_varying = false;
      for (int k = 0; k < n.input_size(); ++k)
        if (varying.count(n.input(k)) && !(def && graph::is_type_only_input(*def, k)))
          reads_varying = true;
      if (reads_varying)
        for (const auto& o : n.output())
          if (!o.empty()) varying.insert(o);
    }
    std::string read;  // a run-time shaped input, if any
    for (const auto& in : n.input())
      if (made_by.count(in)) read = in;
    bool shapeless = false;
    for (const auto& o : n.output())
      if (!o.empty() && used.count(o) && untyped.count(o)) shapeless = true;
    const bool host_op = onnx_domain && host_operators().count(n.op_type());
    // A compiled operator reads some inputs only at build time (Reshape's
    // shape, CumSum's axis, OneHot's depth): fed from a graph input, the
    // node runs on the host instead.
    const std::string varying_input = host_op ? varying_constant_input(n, varying) : "";
    if (read.empty() && !shapeless && varying_input.empty()) continue;
    if (!host_op) {
      if (read.empty()) continue;  // untyped for another reason: import_model names it
      const std::string& reason = why[read];
      throw ImportError(
          "node '" + name + "' (" + n.op_type() + ") reads '" + read + "', " +
          (reason.empty() ? "whose shape is known only at run time (it comes from "
                            "node '" +
                                made_by[read] + "')"
                          : reason) +
          "; kiln runs only these operators on such tensors: " + join(host_operators()));
    }
    to_host[i] = true;
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      auto t = elem.find(o);
      if (t == elem.end())
        throw ImportError("node '" + name + "' (" + n.op_type() + "): ONNX gave output '" + o +
                          "' no element type");
      made_by[o] = name;
      // Empty: run-time shaped (or computed from such a value).
      if (!read.empty())
        why[o] = shapeless ? "" : why[read];
      else if (!shapeless)
        why[o] = "which the executor computes after the kernels (node '" + name + "' (" +
                 n.op_type() + ") takes '" + varying_input +
                 "', which must otherwise be a build-time constant, at run time)";
      host->dtypes[o] = dtype_name(t->second, "value '" + o + "'");
    }
  }
  if (made_by.empty()) return;

  // The host nodes leave the graph; what they read from it stays reachable.
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g->initializer()) inits[t.name()] = &t;
  std::set<std::string> graph_inputs, outputs;
  for (const auto& in : g->input()) graph_inputs.insert(in.name());
  for (const auto& o : g->output()) outputs.insert(o.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  std::vector<std::string> kept_names;
  std::vector<std::string> reads;  // static values the host nodes read, in first-use order
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (!to_host[i]) {
      *kept.Add() = n;
      kept_names.push_back((*names)[i]);
      continue;
    }
    host->nodes.push_back(convert_node(n, (*names)[i]));
    for (const auto& in : n.input()) {
      if (in.empty() || made_by.count(in)) continue;
      if (auto it = inits.find(in); it != inits.end()) {
        if (!host->constants.count(in))
          host->constants[in] = convert_tensor(*it->second, "initializer '" + in + "'");
      } else {
        reads.push_back(in);
      }
    }
  }
  g->mutable_node()->Swap(&kept);
  *names = std::move(kept_names);

  for (const auto& o : g->output()) host->outputs.push_back(o.name());
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> static_outputs;
  for (const auto& o : g->output())
    if (!made_by.count(o.name())) *static_outputs.Add() = o;
  g->mutable_output()->Swap(&static_outputs);
  std::map<std::string, const onnx::ValueInfoProto*> infos;
  for (const auto& vi : g->value_info()) infos[vi.name()] = &vi;
  for (const std::string& v : reads) {
    if (graph_inputs.count(v) || outputs.count(v)) continue;
    onnx::ValueInfoProto* out = g->add_output();
    if (auto it = infos.find(v); it != infos.end()) *out = *it->second;
    out->set_name(v);
    outputs.insert(v);
  }
}

}  // namespace kiln::frontend
