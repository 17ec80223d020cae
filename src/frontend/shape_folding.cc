#include "frontend/shape_folding.h"

#include <onnx/onnx_pb.h>

#include <deque>
#include <map>
#include <optional>
#include <set>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"
#include "graph/op_registry.h"
#include "graph/ops/op_util.h"

namespace kiln::frontend {
namespace {

int onnx_elem_type(const std::string& dtype, const std::string& what) {
  using TP = onnx::TensorProto;
  static const std::map<std::string, int> types = {
      {"float32", TP::FLOAT}, {"float64", TP::DOUBLE}, {"int8", TP::INT8},   {"int16", TP::INT16},
      {"int32", TP::INT32},   {"int64", TP::INT64},    {"uint8", TP::UINT8}, {"bool", TP::BOOL}};
  auto it = types.find(dtype);
  if (it == types.end()) throw ImportError(what + ": cannot store a " + dtype + " constant");
  return it->second;
}

onnx::TensorProto to_proto(const graph::Initializer& t, const std::string& name,
                           const std::string& what) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnx_elem_type(t.type.dtype, what));
  for (int64_t d : t.type.shape) p.add_dims(d);
  p.set_raw_data(std::string(t.data.begin(), t.data.end()));
  return p;
}

// Static types of every value ONNX inference typed.
std::map<std::string, graph::TensorType> static_types(const onnx::GraphProto& g) {
  std::map<std::string, graph::TensorType> out;
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list) {
      graph::TensorType t;
      if (convert_type(vi.type(), "value '" + vi.name() + "'", &t)) out[vi.name()] = t;
    }
  return out;
}

}  // namespace

std::vector<std::string> untyped_outputs(const onnx::ModelProto& model) {
  const auto& g = model.graph();
  std::map<std::string, graph::TensorType> types = static_types(g);
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  std::vector<std::string> out;
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (!o.empty() && !types.count(o) && !inits.count(o)) out.push_back(o);
  return out;
}

int fold_small_constants(onnx::ModelProto* model, std::vector<std::string>* names) {
  auto* g = model->mutable_graph();
  std::map<std::string, graph::TensorType> types = static_types(*g);
  std::map<std::string, const onnx::TensorProto*> protos;
  for (const auto& t : g->initializer()) protos[t.name()] = &t;
  std::map<std::string, graph::Initializer> values;  // converted on first use
  auto constant = [&](const std::string& v) -> const graph::Initializer* {
    if (auto it = values.find(v); it != values.end()) return &it->second;
    auto p = protos.find(v);
    if (p == protos.end()) return nullptr;
    const int64_t n =
        graph::checked_num_elements({p->second->dims().begin(), p->second->dims().end()});
    if (n > kMaxFoldElements) return nullptr;
    return &(values[v] = convert_tensor(*p->second, "initializer '" + v + "'"));
  };

  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  std::vector<std::string> kept_names;
  std::vector<onnx::TensorProto> added;
  int folded = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& np = g->node(i);
    const std::string& name = (*names)[i];
    const bool onnx_domain = np.domain().empty() || np.domain() == "ai.onnx";
    const graph::OpDef* def = onnx_domain ? graph::find_op(np.op_type()) : nullptr;
    std::deque<graph::Initializer> shape_only;  // args point into it
    std::vector<const graph::Initializer*> args;
    bool ok = def && def->evaluate;
    for (int k = 0; ok && k < np.input_size(); ++k) {
      const std::string& in = np.input(k);
      if (!in.empty() && graph::is_type_only_input(*def, static_cast<size_t>(k))) {
        // Only the input's type (Shape, Size): inferred, or an initializer's
        // (a value this loop folded in an earlier round has no value_info any more).
        auto t = types.find(in);
        auto p = protos.find(in);
        ok = t != types.end() || p != protos.end();
        if (!ok) break;
        graph::TensorType type = t != types.end() ? t->second : graph::TensorType{};
        if (t == types.end()) {
          type.dtype = dtype_name(p->second->data_type(), "initializer '" + p->first + "'");
          type.shape.assign(p->second->dims().begin(), p->second->dims().end());
        }
        shape_only.push_back(graph::Initializer{type, {}});
        args.push_back(&shape_only.back());
        continue;
      }
      const graph::Initializer* c = in.empty() ? nullptr : constant(in);
      ok = in.empty() || c;
      args.push_back(c);
    }
    if (!ok) {
      *kept.Add() = np;
      kept_names.push_back(name);
      continue;
    }
    const std::string what = "node '" + name + "' (" + np.op_type() + ")";
    std::vector<graph::Initializer> results;
    try {
      results = def->evaluate(convert_node(np, name), args);
    } catch (const std::exception& e) {
      throw ImportError(what + ": " + e.what());
    }
    if (results.size() < static_cast<size_t>(np.output_size()))
      throw ImportError(what + ": evaluates to fewer results than it has outputs");
    // A small constant that expands into a large one (ConstantOfShape, Expand)
    // stays a node: the graph's own folder decides about those.
    bool small = true;
    for (const auto& r : results) small &= r.type.num_elements() <= kMaxFoldElements;
    if (!small) {
      *kept.Add() = np;
      kept_names.push_back(name);
      continue;
    }
    for (int k = 0; k < np.output_size(); ++k) {
      const std::string& out = np.output(k);
      if (out.empty()) continue;
      added.push_back(to_proto(results[k], out, what));
      values[out] = std::move(results[k]);
    }
    ++folded;
  }
  if (!folded) return 0;
  g->mutable_node()->Swap(&kept);
  *names = std::move(kept_names);
  for (auto& t : added) *g->add_initializer() = std::move(t);
  return folded;
}

namespace {

// OneHot's output type: the indices' shape with depth inserted at axis, the
// values' dtype; nullopt unless depth is an initializer and both inputs have
// static types.
std::optional<graph::TensorType> one_hot_type(
    const onnx::NodeProto& np, const std::string& name,
    const std::map<std::string, graph::TensorType>& types,
    const std::map<std::string, const onnx::TensorProto*>& protos) {
  if (np.input_size() != 3) return std::nullopt;
  auto indices = types.find(np.input(0));
  auto depth = protos.find(np.input(1));
  auto values = types.find(np.input(2));
  if (indices == types.end() || depth == protos.end() || values == types.end()) return std::nullopt;
  const graph::Node node = convert_node(np, name);
  const std::string what = "node '" + name + "' (OneHot)";
  std::vector<double> d =
      graph::op_util::to_doubles(node, convert_tensor(*depth->second, what + " depth"));
  if (d.size() != 1 || !(d[0] >= 1)) throw ImportError(what + ": depth must be one positive value");
  graph::TensorType out{values->second.dtype, indices->second.shape};
  const int64_t rank = static_cast<int64_t>(out.shape.size()) + 1;
  const int64_t axis =
      graph::op_util::normalize_axis(node, graph::op_util::attr_int(node, "axis", -1), rank);
  out.shape.insert(out.shape.begin() + axis, static_cast<int64_t>(d[0]));
  return out;
}

// MaxUnpool's output type with output_shape an initializer: that shape, X's
// dtype (ONNX 1.12 gives it only a rank); nullopt otherwise.
std::optional<graph::TensorType> max_unpool_type(
    const onnx::NodeProto& np, const std::string& name,
    const std::map<std::string, graph::TensorType>& types,
    const std::map<std::string, const onnx::TensorProto*>& protos) {
  if (np.input_size() != 3 || np.input(2).empty()) return std::nullopt;
  auto x = types.find(np.input(0));
  auto shape = protos.find(np.input(2));
  if (x == types.end() || shape == protos.end()) return std::nullopt;
  const graph::Node node = convert_node(np, name);
  const std::string what = "node '" + name + "' (MaxUnpool)";
  std::vector<int64_t> dims =
      graph::op_util::to_ints(node, convert_tensor(*shape->second, what + " output_shape"));
  for (int64_t d : dims)
    if (d < 0) throw ImportError(what + ": output_shape has a negative dim");
  return graph::TensorType{x->second.dtype, dims};
}

void set_tensor_type(onnx::ValueInfoProto* vi, const std::string& name,
                     const graph::TensorType& t) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_elem_type(t.dtype, "value '" + name + "'"));
  tt->clear_shape();
  auto* shape = tt->mutable_shape();
  for (int64_t d : t.shape) shape->add_dim()->set_dim_value(d);
}

}  // namespace

int complete_constant_shaped_types(onnx::ModelProto* model, const std::vector<std::string>& names) {
  auto* g = model->mutable_graph();
  std::map<std::string, graph::TensorType> types = static_types(*g);
  std::map<std::string, const onnx::TensorProto*> protos;
  for (const auto& t : g->initializer()) protos[t.name()] = &t;
  int typed = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& np = g->node(i);
    const bool onnx_domain = np.domain().empty() || np.domain() == "ai.onnx";
    const bool one_hot = np.op_type() == "OneHot", unpool = np.op_type() == "MaxUnpool";
    if (!onnx_domain || !(one_hot || unpool) || np.output_size() < 1) continue;
    const std::string& out = np.output(0);
    if (out.empty() || types.count(out)) continue;
    std::optional<graph::TensorType> t;
    try {
      const std::string& name = names[static_cast<size_t>(i)];
      t = one_hot ? one_hot_type(np, name, types, protos)
                  : max_unpool_type(np, name, types, protos);
    } catch (const graph::OpError& e) {
      throw ImportError(e.what());
    }
    if (!t) continue;
    onnx::ValueInfoProto* vi = nullptr;
    for (auto& o : *g->mutable_output())
      if (o.name() == out) vi = &o;
    for (auto& v : *g->mutable_value_info())
      if (!vi && v.name() == out) vi = &v;
    if (!vi) vi = g->add_value_info();
    set_tensor_type(vi, out, *t);
    types[out] = *t;
    ++typed;
  }
  return typed;
}

}  // namespace kiln::frontend
