#include "frontend/host_subgraphs.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <memory>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"

namespace kiln::frontend {

namespace {

using AP = onnx::AttributeProto;

bool onnx_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

template <typename F>
void for_each_subgraph(const onnx::NodeProto& n, F&& f) {
  for (const auto& a : n.attribute()) {
    if (a.type() == AP::GRAPH) f(a.name(), a.g());
    if (a.type() == AP::GRAPHS)
      for (const auto& g : a.graphs()) f(a.name(), g);
  }
}

void graph_reads(const onnx::GraphProto& g, std::set<std::string>* out) {
  std::set<std::string> defined;
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) defined.insert(o);
  auto read = [&](const std::string& v) {
    if (!v.empty() && !defined.count(v)) out->insert(v);
  };
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) read(in);
    for (const std::string& v : subgraph_reads(n)) read(v);
  }
  for (const auto& o : g.output()) read(o.name());
}

std::string node_name(const onnx::NodeProto& n, int i) {
  return n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
}

std::string join(const std::set<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : " ") + i;
  return s;
}

// `prefix` names the body's nodes and values ("<node>/<attribute>/"), so
// that a name the body defines never meets one of another scope in the host
// region's single table of values, even where a model reuses names across
// scopes; `scope` renames the values of the scopes around it. `where` is the
// body in messages.
std::shared_ptr<graph::Subgraph> convert_body(const onnx::GraphProto& body,
                                              const std::string& prefix, const std::string& where,
                                              const std::set<std::string>& host_ops, Renames scope,
                                              graph::HostRegion* host) {
  std::map<std::string, const onnx::TypeProto*> types;
  for (const auto* list : {&body.input(), &body.value_info(), &body.output()})
    for (const auto& vi : *list) types[vi.name()] = &vi.type();
  auto type_of = [&](const std::string& v, const std::string& what) {
    auto it = types.find(v);
    std::string t = it == types.end() ? "" : host_type_name(*it->second, what);
    if (t.empty()) throw ImportError(where + ": ONNX gave " + what + " no element type");
    return t;
  };
  for (const auto& in : body.input()) scope[in.name()] = prefix + in.name();
  for (const auto& t : body.initializer()) scope[t.name()] = prefix + t.name();
  for (const auto& n : body.node())
    for (const auto& o : n.output())
      if (!o.empty()) scope[o] = prefix + o;
  auto renamed = [&](const std::string& v) {
    auto it = scope.find(v);
    return v.empty() || it == scope.end() ? v : it->second;
  };

  auto sub = std::make_shared<graph::Subgraph>();
  for (const auto& in : body.input()) {
    sub->inputs.push_back(renamed(in.name()));
    host->dtypes[renamed(in.name())] = type_of(in.name(), "input '" + in.name() + "'");
  }
  for (const auto& t : body.initializer())
    host->constants[renamed(t.name())] =
        convert_tensor(t, where + " initializer '" + t.name() + "'");
  for (int i = 0; i < body.node_size(); ++i) {
    const onnx::NodeProto& n = body.node(i);
    const std::string name = prefix + node_name(n, i);
    const std::string what = "node '" + name + "' (" + n.op_type() + ")";
    if (onnx_domain(n) && n.op_type() == "Constant" && n.output_size() == 1) {
      host->constants[renamed(n.output(0))] = convert_tensor(constant_tensor(n, what), what);
      continue;
    }
    if (!onnx_domain(n) || !host_ops.count(n.op_type()))
      throw ImportError(where + ": " + what +
                        ": inside a subgraph kiln runs only these operators: " + join(host_ops));
    graph::Node node = convert_node(n, name);
    for (std::string& in : node.inputs) in = renamed(in);
    for (std::string& out : node.outputs) out = renamed(out);
    convert_subgraphs(n, name, host_ops, &node, host, scope);
    for (const auto& o : n.output())
      if (!o.empty()) host->dtypes[renamed(o)] = type_of(o, "output '" + o + "' of " + what);
    sub->nodes.push_back(std::move(node));
  }
  for (const auto& o : body.output()) sub->outputs.push_back(renamed(o.name()));
  return sub;
}

}  // namespace

std::string host_type_name(const onnx::TypeProto& t, const std::string& what) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      if (t.tensor_type().elem_type() == onnx::TensorProto::UNDEFINED) return "";
      return dtype_name(t.tensor_type().elem_type(), what);
    case onnx::TypeProto::kSequenceType: {
      const onnx::TypeProto& e = t.sequence_type().elem_type();
      if (!e.has_tensor_type())
        throw ImportError(what + ": a sequence of sequences, maps or optionals is not supported");
      std::string inner = host_type_name(e, what);
      return inner.empty() ? "" : "sequence<" + inner + ">";
    }
    case onnx::TypeProto::kOptionalType: {
      const onnx::TypeProto& e = t.optional_type().elem_type();
      if (!e.has_tensor_type() && !e.has_sequence_type())
        throw ImportError(what + ": an optional of a map or an optional is not supported");
      std::string inner = host_type_name(e, what);
      return inner.empty() ? "" : "optional<" + inner + ">";
    }
    case onnx::TypeProto::kMapType: throw ImportError(what + ": map values are not supported");
    default: return "";
  }
}

bool is_host_only_type(const onnx::TypeProto& t) {
  return t.has_sequence_type() || t.has_optional_type();
}

bool has_subgraphs(const onnx::NodeProto& n) {
  bool any = false;
  for_each_subgraph(n, [&](const std::string&, const onnx::GraphProto&) { any = true; });
  return any;
}

std::set<std::string> subgraph_reads(const onnx::NodeProto& n) {
  std::set<std::string> reads;
  for_each_subgraph(n,
                    [&](const std::string&, const onnx::GraphProto& g) { graph_reads(g, &reads); });
  return reads;
}

void convert_subgraphs(const onnx::NodeProto& n, const std::string& name,
                       const std::set<std::string>& host_ops, graph::Node* node,
                       graph::HostRegion* host, const Renames& scope) {
  for (const auto& a : n.attribute()) {
    const std::string where =
        "node '" + name + "' (" + n.op_type() + ") subgraph '" + a.name() + "'";
    if (a.type() == AP::GRAPHS) throw ImportError(where + ": a list of graphs is not supported");
    if (a.type() == AP::GRAPH)
      node->subgraphs[a.name()] =
          convert_body(a.g(), name + "/" + a.name() + "/", where, host_ops, scope, host);
  }
}

}  // namespace kiln::frontend
