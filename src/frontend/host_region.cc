#include "frontend/host_region.h"

#include <onnx/onnx_pb.h>

#include <map>

#include "frontend/host_subgraphs.h"
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
      "Mul", "Div", "Mod", "Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
      "GreaterOrEqual", "And", "Or", "Xor", "Where", "Neg", "Abs", "Not", "Relu", "Sigmoid", "Exp",
      "Sqrt", "Floor", "Ceil", "Sin", "Cos", "Tanh", "Log", "Reciprocal",
      // reductions (axes at run time, or over run-time shaped tensors)
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
      // constant-only inputs (OpDef::constant_inputs) fed at run time
      "CumSum", "OneHot", "Resize", "MaxUnpool", "DFT", "STFT", "MelWeightMatrix",
      // control flow: their subgraphs run on the host too (host_subgraphs.h)
      "If", "Loop", "Scan", "SequenceMap",
      // sequences and optionals, which only the executor holds
      "SequenceEmpty", "SequenceConstruct", "SequenceAt", "SequenceInsert", "SequenceErase",
      "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
      "OptionalGetElement"};
  return ops;
}

namespace {

// The host region's type names (host_type_name) of the values ONNX inference
// typed, shapes or not.
std::map<std::string, std::string> value_types(const onnx::GraphProto& g) {
  std::map<std::string, std::string> types;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list)
      if (std::string t = host_type_name(vi.type(), "value '" + vi.name() + "'"); !t.empty())
        types[vi.name()] = t;
  for (const auto& t : g.initializer())
    types[t.name()] = dtype_name(t.data_type(), "initializer '" + t.name() + "'");
  return types;
}

// What `n` reads: its inputs and what its subgraphs read of the scopes around them.
std::vector<std::string> node_reads(const onnx::NodeProto& n) {
  std::vector<std::string> reads(n.input().begin(), n.input().end());
  for (const std::string& v : subgraph_reads(n)) reads.push_back(v);
  return reads;
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
    for (const std::string& in : node_reads(n)) used.insert(in);
  for (const auto& o : g->output()) used.insert(o.name());

  std::map<std::string, std::string> types = value_types(*g);
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
  // Sequence and optional graph inputs go to the host region directly.
  for (const auto& in : g->input()) {
    if (!is_host_only_type(in.type())) continue;
    auto t = types.find(in.name());
    if (t == types.end())
      throw ImportError("input '" + in.name() +
                        "' has a sequence or optional type without an element type");
    host->inputs.push_back(in.name());
    host->dtypes[in.name()] = t->second;
    made_by[in.name()] = "input '" + in.name() + "'";
    why[in.name()] =
        "which is a " + t->second + " (the executor holds sequences and optionals, kernels do not)";
  }
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
    for (const std::string& in : node_reads(n))
      if (made_by.count(in)) read = in;
    // Control flow, and what makes sequences or optionals, run on the host
    // whatever their shapes.
    bool shapeless = has_subgraphs(n);
    for (const auto& o : n.output()) {
      if (!o.empty() && used.count(o) && untyped.count(o)) shapeless = true;
      if (auto t = types.find(o); t != types.end() && t->second.find('<') != std::string::npos)
        shapeless = true;
    }
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
      auto t = types.find(o);
      if (t == types.end())
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
      host->dtypes[o] = t->second;
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
    graph::Node node = convert_node(n, (*names)[i]);
    convert_subgraphs(n, (*names)[i], host_operators(), &node, host);
    host->nodes.push_back(std::move(node));
    for (const std::string& in : node_reads(n)) {
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
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> tensor_inputs;
  for (const auto& in : g->input())
    if (!is_host_only_type(in.type())) *tensor_inputs.Add() = in;
  g->mutable_input()->Swap(&tensor_inputs);

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
