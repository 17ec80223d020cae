#include "frontend/opset_upgrade.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <set>
#include <string>

#include "frontend/onnx_import.h"

namespace kiln::frontend {

int64_t model_default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

namespace {

// The rank of a value as a typed model knows it; -1 when unknown.
int value_rank(const onnx::GraphProto& g, const std::string& name) {
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list)
      if (vi.name() == name && vi.type().tensor_type().has_shape())
        return vi.type().tensor_type().shape().dim_size();
  return -1;
}

// PRelu before opset 7 applied a slope of C values along the channel axis
// (axis 1); from opset 7 on the slope broadcasts from the last axis, and the
// converter leaves it as it is. A constant slope is reshaped to [C, 1, ...].
void reshape_channel_slopes(onnx::ModelProto* typed) {
  auto* g = typed->mutable_graph();
  for (const auto& n : g->node()) {
    if (n.op_type() != "PRelu" || n.input_size() < 2) continue;
    const int rank = value_rank(*g, n.input(0));
    if (rank < 3) continue;
    for (auto& t : *g->mutable_initializer()) {
      if (t.name() != n.input(1) || t.dims_size() != 1 || t.dims(0) <= 1) continue;
      for (int k = 0; k < rank - 2; ++k) t.add_dims(1);
      for (auto& in : *g->mutable_input()) {  // IR 3 lists it as an input too
        if (in.name() != t.name()) continue;
        auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
        shape->clear_dim();
        for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      }
    }
  }
}

// ONNX's IR import (under the converter) trusts the graph's wiring: an
// output no node writes, or an input read before any node defines it, makes
// it dereference a null value (found by fuzz/onnx_import_fuzzer.cc), and the
// checker of ONNX 1.12 lets both through. Named here instead.
void check_wiring(const onnx::GraphProto& g, std::set<std::string> defined = {},
                  const std::string& where = "") {
  for (const auto& in : g.input()) defined.insert(in.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    // Named as node_names() in onnx_import.cc names a nameless node.
    const std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    for (const std::string& in : n.input())
      if (!in.empty() && !defined.count(in))
        throw ImportError(where + "node '" + name + "' (" + n.op_type() + ") reads '" + in +
                          "', which no input, initializer or earlier node defines");
    // A subgraph sees every value defined before its node.
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH)
        check_wiring(a.g(), defined, where + "node '" + name + "' subgraph '" + a.name() + "': ");
      for (const auto& sub : a.graphs())
        check_wiring(sub, defined, where + "node '" + name + "' subgraph '" + a.name() + "': ");
    }
    for (const std::string& out : n.output())
      if (!out.empty()) defined.insert(out);
  }
  for (const auto& out : g.output())
    if (!defined.count(out.name()))
      throw ImportError(where + "graph output '" + out.name() +
                        "' is not defined by any node, input or "
                        "initializer");
}

}  // namespace

int64_t upgrade_opset(onnx::ModelProto* model, int64_t target) {
  const int64_t from = model_default_opset(*model);
  if (from <= 0 || from >= target) return from;
  // The converter reads every node through ONNX's IR and needs a checked
  // model: a malformed one fails in the checker with its own message (the
  // caller names the file).
  onnx::checker::check_model(*model);
  check_wiring(model->graph());
  // Scan before opset 9 scans a batch axis with per-batch lengths; ONNX's
  // converter drops that axis from the model's inputs instead of keeping it.
  if (from < 9)
    for (int i = 0; i < model->graph().node_size(); ++i)
      if (const auto& n = model->graph().node(i); n.op_type() == "Scan" && n.domain().empty())
        throw ImportError("node '" + (n.name().empty() ? "Scan_" + std::to_string(i) : n.name()) +
                          "' (Scan): Scan of opset " + std::to_string(from) +
                          " (a batch axis and sequence_lens) is not supported; re-export the "
                          "model at opset 9 or newer");
  try {
    // Some adapters (Add/Mul's broadcast attribute before opset 7, Gemm's
    // before 11) need their inputs' shapes: a lenient shape inference first.
    onnx::ModelProto typed = *model;
    try {
      onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0);
      onnx::shape_inference::InferShapes(typed, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception&) {
      typed = *model;  // the converter then says which shape it lacks
    }
    if (from < 7) reshape_channel_slopes(&typed);
    *model = onnx::version_conversion::ConvertVersion(typed, static_cast<int>(target));
    // IR version 3 files list every initializer among the graph inputs, which
    // the converter does not keep; IR 6 is the one that came with opset 11.
    if (model->ir_version() < 6) model->set_ir_version(6);
  } catch (const std::exception& e) {
    std::string why = e.what();
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    throw ImportError("opset " + std::to_string(from) +
                      ": ONNX's version converter cannot bring the model to opset " +
                      std::to_string(target) + " (" + why + "); re-export it at opset " +
                      std::to_string(target) + " or newer");
  }
  return from;
}

}  // namespace kiln::frontend
