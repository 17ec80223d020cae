#include "frontend/legacy_ops.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "frontend/onnx_import.h"

namespace kiln::frontend {
namespace {

// A fresh value or initializer name derived from `base`.
std::string fresh_name(const graph::Graph& g, const std::string& base) {
  std::string name = base;
  while (g.value_info.count(name) || g.initializers.count(name)) name += "_";
  return name;
}

std::string shape_constant(graph::Graph* g, const std::string& base,
                           const std::vector<int64_t>& shape) {
  std::string name = fresh_name(*g, base);
  graph::Initializer t;
  t.type = {"int64", {static_cast<int64_t>(shape.size())}};
  t.data.resize(shape.size() * sizeof(int64_t));
  std::memcpy(t.data.data(), shape.data(), t.data.size());
  g->value_info[name] = t.type;
  g->initializers[name] = std::move(t);
  return name;
}

graph::Node reshape_node(const std::string& name, const std::string& in, const std::string& shape,
                         const std::string& out) {
  graph::Node n;
  n.op_type = "Reshape";
  n.name = name;
  n.inputs = {in, shape};
  n.outputs = {out};
  return n;
}

// Appends `n` (an opset < 13 Softmax, LogSoftmax or Hardmax) to `out`,
// rewritten to opset-13 form.
void upgrade_softmax(graph::Graph* g, graph::Node n, std::vector<graph::Node>* out) {
  const std::string what = "node '" + n.name + "' (" + n.op_type + ", opset < 13)";
  const graph::TensorType* t = n.inputs.empty() ? nullptr : g->type_of(n.inputs[0]);
  if (!t) throw ImportError(what + ": the input's shape is unknown");
  const graph::TensorType type = *t;
  const int64_t rank = static_cast<int64_t>(type.shape.size());
  int64_t axis = n.attr<int64_t>("axis").value_or(1);
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw ImportError(what + ": axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  if (axis < 0) axis += rank;
  if (rank == 0 || axis == rank - 1) {  // one row per last-axis line: the meanings agree
    n.attrs["axis"] = int64_t{-1};
    out->push_back(std::move(n));
    return;
  }
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? rows : cols) *= type.shape[d];
  const std::string x = n.inputs[0], y = n.outputs[0];
  const std::string x2 = fresh_name(*g, y + "/coerced_in");
  g->value_info[x2] = {type.dtype, {rows, cols}};
  const std::string y2 = fresh_name(*g, y + "/coerced_out");
  g->value_info[y2] = {type.dtype, {rows, cols}};
  out->push_back(
      reshape_node(n.name + "/coerce", x, shape_constant(g, y + "/shape_2d", {rows, cols}), x2));
  const std::string name = n.name;
  n.inputs[0] = x2;
  n.outputs[0] = y2;
  n.attrs["axis"] = int64_t{-1};
  out->push_back(std::move(n));
  out->push_back(
      reshape_node(name + "/restore", y2, shape_constant(g, y + "/shape", type.shape), y));
}

}  // namespace

void upgrade_legacy_ops(graph::Graph* g, int64_t opset) {
  // RoiAlign before opset 16 has no coordinate_transformation_mode and means
  // output_half_pixel (opset 16's default is half_pixel).
  if (opset < 16)
    for (graph::Node& n : g->nodes)
      if (n.op_type == "RoiAlign" && n.domain.empty() &&
          !n.attrs.count("coordinate_transformation_mode"))
        n.attrs["coordinate_transformation_mode"] = std::string("output_half_pixel");
  if (opset >= 13) return;
  std::vector<graph::Node> nodes;
  nodes.reserve(g->nodes.size());
  for (graph::Node& n : g->nodes) {
    const bool coerced_2d =
        n.op_type == "Softmax" || n.op_type == "LogSoftmax" || n.op_type == "Hardmax";
    if (coerced_2d && n.domain.empty())
      upgrade_softmax(g, std::move(n), &nodes);
    else
      nodes.push_back(std::move(n));
  }
  g->nodes = std::move(nodes);
}

}  // namespace kiln::frontend
