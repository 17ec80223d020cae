// Small graphs and checks shared by the tests of the layout passes
// (select_templates, apply_templates, propagate_layout) and of fuse_ops.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "graph/graph.h"
#include "graph_builder.h"
#include "ops/op_template.h"

namespace kiln::test {

// This machine's row of the per-ISA table: what a build here hands the passes.
inline const Isa& host_isa() {
  static const Isa isa = codegen::Target::host().isa();
  return isa;
}

// Conv(x, W[oc, in_c / group, k, k] (, b[oc])) with random constants named
// after the node; attrs as ONNX's (pads, strides, group, auto_pad, ...).
inline std::string conv(GraphBuilder& b, const std::string& name, const std::string& x,
                        int64_t in_c, int64_t oc, int64_t k,
                        std::map<std::string, graph::Attribute> attrs = {}, bool bias = true) {
  int64_t group = 1;
  if (auto it = attrs.find("group"); it != attrs.end()) group = std::get<int64_t>(it->second);
  std::vector<std::string> in = {x, b.random_constant(name + "_w", {oc, in_c / group, k, k})};
  if (bias) in.push_back(b.random_constant(name + "_b", {oc}));
  return b.node("Conv", in, std::move(attrs), name);
}

inline std::map<std::string, graph::Attribute> pads(int64_t p) {
  return {{"pads", std::vector<int64_t>{p, p, p, p}}};
}

// The op types of the graph's nodes, in order.
inline std::vector<std::string> op_types(const graph::Graph& g) {
  std::vector<std::string> out;
  for (const graph::Node& n : g.nodes) out.push_back(n.op_type);
  return out;
}

inline int count_transforms(const graph::Graph& g) { return count_op(g, "kiln.LayoutTransform"); }

inline const graph::Node& node_named(const graph::Graph& g, const std::string& name) {
  const graph::Node* n = g.find_node(name);
  if (!n) throw std::runtime_error("no node " + name);
  return *n;
}

// The producer of `value`, or nullptr.
inline const graph::Node* producer(const graph::Graph& g, const std::string& value) {
  for (const graph::Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (o == value) return &n;
  return nullptr;
}

// The first config of a conv template's space whose activation blocks are
// (ic_bn, oc_bn), as Config JSON; fails the test when there is none.
inline std::string conv_config_with_blocks(const std::string& template_name,
                                           const std::string& workload_key, int64_t ic_bn,
                                           int64_t oc_bn) {
  const ops::OpTemplate& t = ops::get_template(template_name);
  ops::Workload w = ops::Workload::parse(workload_key);
  schedule::ConfigSpace space = t.space(w);
  for (int64_t i = 0; i < space.size(); ++i) {
    schedule::Config cfg = space.get(i);
    if (ops::layout_blocks(t, w, cfg) == std::pair<int64_t, int64_t>{ic_bn, oc_bn})
      return cfg.to_json();
  }
  ADD_FAILURE() << "no config with blocks " << ic_bn << ", " << oc_bn << " for " << workload_key;
  return "";
}

}  // namespace kiln::test
