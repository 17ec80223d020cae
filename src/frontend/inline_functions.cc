#include "frontend/inline_functions.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <set>
#include <unordered_map>

#include "frontend/onnx_import.h"
#include "frontend/op_support.h"
#include "frontend/opset_upgrade.h"

namespace kiln::frontend {
namespace {

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The schema at the model's opset whose body would replace `n`, or nullptr
// when kiln runs the operator itself or ONNX gives it no body.
const onnx::OpSchema* function_schema(const onnx::NodeProto& n, int64_t opset) {
  if (!default_domain(n.domain()) || n.op_type() == "Constant" || is_supported_op("", n.op_type()))
    return nullptr;
  const onnx::OpSchema* s =
      onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset), onnx::ONNX_DOMAIN);
  if (!s || (!s->HasFunction() && !s->HasContextDependentFunction())) return nullptr;
  return s;
}

// Every value's type as far as ONNX's (lenient) shape inference knows it: a
// context-dependent body depends on its inputs' element types.
std::map<std::string, onnx::TypeProto> value_types(const onnx::ModelProto& model) {
  onnx::ModelProto copy = model;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    // Types stay unknown; a builder that needs one fails below, by name.
  }
  std::map<std::string, onnx::TypeProto> types;
  const auto& g = copy.graph();
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list) types[vi.name()] = vi.type();
  for (const auto& t : g.initializer()) {
    onnx::TypeProto tp;
    tp.mutable_tensor_type()->set_elem_type(t.data_type());
    for (int64_t d : t.dims())
      tp.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    types[t.name()] = tp;
  }
  return types;
}

// The node checked against its schema first: a body builder indexes the
// node's inputs and attributes as the schema promises them (a malformed node
// would read past them). Throws ImportError naming the node.
void check_call(const onnx::ModelProto& model, const onnx::NodeProto& n, const std::string& what) {
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : model.opset_import())
    opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  ctx.set_opset_imports(opsets);
  onnx::checker::LexicalScopeContext scope;
  try {
    onnx::checker::check_node(n, ctx, scope);
  } catch (const std::exception& e) {
    throw ImportError(what + ": ONNX checker: " + e.what());
  }
}

onnx::FunctionProto function_body(const onnx::OpSchema& s, const onnx::NodeProto& n,
                                  const std::map<std::string, onnx::TypeProto>& types,
                                  const std::string& what) {
  if (s.HasFunction()) return *s.GetFunction();
  std::vector<onnx::TypeProto> input_types;
  for (const std::string& in : n.input()) {
    auto it = types.find(in);
    input_types.push_back(it == types.end() ? onnx::TypeProto() : it->second);
  }
  onnx::FunctionBodyBuildContextImpl ctx(n, input_types);
  onnx::FunctionProto body;
  bool built = false;
  try {
    built = s.BuildContextDependentFunction(ctx, body);
  } catch (const std::exception& e) {
    throw ImportError(what + ": ONNX cannot expand it into its function body: " + e.what());
  }
  if (!built)
    throw ImportError(what +
                      ": ONNX cannot expand it into its function body (its inputs' types "
                      "are unknown or not supported by the operator)");
  return body;
}

// The node's attribute `name`, or nullptr.
const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// The value of the caller's attribute `name`: the one it gives, else the
// schema's default (a body refers to the caller's attributes; ONNX 1.12's
// FunctionProto carries no defaults of its own). nullptr when neither has one.
const onnx::AttributeProto* caller_attr(const onnx::NodeProto& call, const onnx::OpSchema& schema,
                                        const std::string& name) {
  if (const onnx::AttributeProto* given = find_attr(call, name)) return given;
  auto it = schema.attributes().find(name);
  if (it == schema.attributes().end()) return nullptr;
  const onnx::AttributeProto& d = it->second.default_value;
  return d.type() == onnx::AttributeProto::UNDEFINED ? nullptr : &d;
}

// The body's nodes with the caller's values and attributes substituted.
std::vector<onnx::NodeProto> expand(const onnx::NodeProto& call, const std::string& call_name,
                                    const onnx::OpSchema& schema, const onnx::FunctionProto& body) {
  std::map<std::string, std::string> rename;
  for (int i = 0; i < body.input_size(); ++i)
    rename[body.input(i)] = i < call.input_size() ? call.input(i) : "";
  const std::string prefix = call_name + "/";
  for (int i = 0; i < body.output_size(); ++i) {
    const bool used = i < call.output_size() && !call.output(i).empty();
    rename[body.output(i)] = used ? call.output(i) : prefix + body.output(i);
  }
  auto value = [&](const std::string& v) {
    if (v.empty()) return v;
    auto it = rename.find(v);
    return it != rename.end() ? it->second : prefix + v;
  };
  std::vector<onnx::NodeProto> out;
  for (int k = 0; k < body.node_size(); ++k) {
    onnx::NodeProto n = body.node(k);
    n.set_name(prefix + (n.name().empty() ? n.op_type() + "_" + std::to_string(k) : n.name()));
    for (auto& in : *n.mutable_input()) in = value(in);
    for (auto& o : *n.mutable_output()) o = value(o);
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> attrs;
    for (const auto& a : n.attribute()) {
      if (a.ref_attr_name().empty()) {
        *attrs.Add() = a;
      } else if (const onnx::AttributeProto* given = caller_attr(call, schema, a.ref_attr_name())) {
        onnx::AttributeProto copy = *given;
        copy.set_name(a.name());
        *attrs.Add() = copy;
      }  // neither given nor defaulted: the inner operator's own default
    }
    n.mutable_attribute()->Swap(&attrs);
    out.push_back(std::move(n));
  }
  return out;
}

// One round over the graph; returns the number of nodes expanded.
int inline_round(onnx::ModelProto* model, int64_t opset) {
  auto* g = model->mutable_graph();
  std::vector<int> calls;
  for (int i = 0; i < g->node_size(); ++i)
    if (function_schema(g->node(i), opset)) calls.push_back(i);
  if (calls.empty()) return 0;
  const std::map<std::string, onnx::TypeProto> types = value_types(*model);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  std::set<int> expand_at(calls.begin(), calls.end());
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    if (!expand_at.count(i)) {
      *nodes.Add() = n;
      continue;
    }
    const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    const std::string what = "node '" + name + "' (" + n.op_type() + ")";
    check_call(*model, n, what);
    const onnx::OpSchema& schema = *function_schema(n, opset);
    onnx::FunctionProto body = function_body(schema, n, types, what);
    for (onnx::NodeProto& inner : expand(n, name, schema, body)) *nodes.Add() = std::move(inner);
  }
  g->mutable_node()->Swap(&nodes);
  return static_cast<int>(calls.size());
}

}  // namespace

int inline_onnx_functions(onnx::ModelProto* model) {
  const int64_t opset = model_default_opset(*model);
  if (opset <= 0) return 0;
  int total = 0;
  // A body may call another function (SoftmaxCrossEntropyLoss calls
  // NegativeLogLikelihoodLoss); ONNX's bodies nest a few levels at most.
  for (int round = 0; round < 8; ++round) {
    const int n = inline_round(model, opset);
    if (n == 0) break;
    total += n;
  }
  return total;
}

}  // namespace kiln::frontend
