// Template selection and layout: rewrites every Conv, Gemm and MatMul that a
// tunable x86 template covers into a kiln.Template node in the template's
// layouts, with weights re-laid out at build time:
//
//   Conv(x, W, b)  ->  LT(x: NCHW -> NCHW[ic]c) -> kiln.Template(conv2d_NCHWc.x86 or
//                      depthwise_conv2d_NCHWc.x86; x_c, W packed) -> Add(bias blocked)
//                      -> LT(NCHW[oc]c -> NCHW)
//   Gemm(A, B, C) / MatMul(A, B const)  ->  kiln.Template(dense_pack.x86; A, B packed)
//                      -> Add(C)
//
// Then layout transforms that undo each other are cancelled, and elementwise
// operators between two convolutions run in the blocked layout, so a chain of
// convolutions keeps its activations in NCHW[x]c (TVM's AlterOpLayout).
//
// The config of each workload is options' explicit config for its key, else
// the template's fallback; `uses` reports which.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph {

struct TemplateUse {
  std::string template_name;
  std::string workload;
  bool configured = false;  // an explicit config, not the fallback
};

// configs: workload key -> Config JSON. Returns one entry per rewritten node.
std::vector<TemplateUse> alter_layout(Graph& g, const std::map<std::string, std::string>& configs);

}  // namespace kiln::graph
