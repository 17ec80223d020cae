#include "frontend/pool_ceil_mode.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::frontend {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ONNX 1.12's ceil_mode output size of one axis (what its shape inference gives).
int64_t onnx112_out(int64_t in, int64_t pad_begin, int64_t pad_end, int64_t extent,
                    int64_t stride) {
  return ceil_div(in + pad_begin + pad_end - extent, stride) + 1;
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}

std::vector<int64_t> ints_attr(const onnx::NodeProto& n, const std::string& name,
                               std::vector<int64_t> fallback) {
  const onnx::AttributeProto* a = find_attr(n, name);
  if (!a) return fallback;
  return {a->ints().begin(), a->ints().end()};
}

// The static dims of every value inference typed (inputs, value_info, outputs).
std::map<std::string, std::vector<int64_t>> static_shapes(const onnx::GraphProto& g) {
  std::map<std::string, std::vector<int64_t>> shapes;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    std::vector<int64_t> dims;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      dims.push_back(d.dim_value());
    }
    shapes[v.name()] = dims;
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  return shapes;
}

bool pool_with_droppable_window(const onnx::NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  bool max = n.op_type() == "MaxPool", avg = n.op_type() == "AveragePool";
  if (!max && !avg) return false;
  if (avg && int_attr(n, "count_include_pad", 0) != 0) return false;
  const onnx::AttributeProto* auto_pad = find_attr(n, "auto_pad");
  if (auto_pad && auto_pad->s() != "NOTSET") return false;
  return int_attr(n, "ceil_mode", 0) != 0 && find_attr(n, "pads") && find_attr(n, "kernel_shape");
}

// Lowers n's end pads where its last window starts in the padding; true if any.
bool fix_node(onnx::NodeProto* n, const std::vector<int64_t>& in_shape) {
  std::vector<int64_t> kernel = ints_attr(*n, "kernel_shape", {});
  size_t rank = kernel.size();
  if (in_shape.size() != rank + 2) return false;
  std::vector<int64_t> pads = ints_attr(*n, "pads", {});
  std::vector<int64_t> strides = ints_attr(*n, "strides", std::vector<int64_t>(rank, 1));
  std::vector<int64_t> dilations = ints_attr(*n, "dilations", std::vector<int64_t>(rank, 1));
  if (pads.size() != 2 * rank || strides.size() != rank || dilations.size() != rank) return false;
  bool changed = false;
  for (size_t d = 0; d < rank; ++d) {
    int64_t in = in_shape[d + 2], pb = pads[d], pe = pads[d + rank];
    int64_t extent = (kernel[d] - 1) * dilations[d] + 1, s = strides[d];
    if (s <= 0 || in + pb + pe < extent) continue;
    int64_t out = onnx112_out(in, pb, pe, extent, s);
    if ((out - 1) * s < in + pb) continue;  // the last window starts in the data
    // The largest end pad (>= 0) giving one window fewer.
    for (int64_t p = pe - 1; p >= 0; --p) {
      if (in + pb + p < extent || onnx112_out(in, pb, p, extent, s) != out - 1) continue;
      pads[d + rank] = p;
      changed = true;
      break;
    }
  }
  if (!changed) return false;
  for (auto& a : *n->mutable_attribute()) {
    if (a.name() != "pads") continue;
    a.clear_ints();
    for (int64_t p : pads) a.add_ints(p);
  }
  return true;
}

}  // namespace

bool drop_pool_windows_starting_in_padding(onnx::ModelProto* model) {
  auto* g = model->mutable_graph();
  std::map<std::string, std::vector<int64_t>> shapes = static_shapes(*g);
  bool changed = false;
  for (auto& n : *g->mutable_node()) {
    if (!pool_with_droppable_window(n) || n.input_size() < 1) continue;
    auto it = shapes.find(n.input(0));
    if (it != shapes.end()) changed |= fix_node(&n, it->second);
  }
  return changed;
}

}  // namespace kiln::frontend
