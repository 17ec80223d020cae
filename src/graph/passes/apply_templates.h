// Template rewrite: turns every node select_templates chose into a
// kiln.Template node in its template's layouts, with weights re-laid out at
// build time, by the rewrite of the strategy row that chose it (strategy.h):
//
//   Conv(x, W, b)  ->  LT(x: NCHW -> NCHW[ic]c) -> kiln.Template(conv2d_NCHWc.x86,
//                      depthwise_conv2d_NCHWc.x86 or group_conv2d_NCHWc.x86; x_c, W packed
//                      by the row's packer) -> Add(bias blocked) -> LT(NCHW[oc]c -> NCHW)
//   Gemm(A, B, C) / MatMul(A, B const)  ->  kiln.Template(dense_pack.x86; A, alpha * B
//                      packed) -> Add(beta * C)
//   MatMul(A, B)   ->  kiln.Template(batch_matmul.x86; A, B)
//
// Convolutions that read the same activation in the same block share one
// transform. Every graph value keeps its name and NCHW layout: the
// transforms back to NCHW are what propagate_layout then cancels between
// neighbouring convolutions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/select_templates.h"
#include "support/isa.h"

namespace kiln::graph {

struct TemplateUse {
  std::string template_name;
  std::string workload;
  bool configured = false;  // an explicit config, not the fallback
};

// configs: workload key -> Config JSON; a workload without one gets its
// template's fallback for `isa` (the target's row of the per-ISA table). Returns one TemplateUse
// per rewritten node (that is, per selection), in node order. Throws std::invalid_argument for a
// selection that names no node of `g`, std::runtime_error for a config that is not a point of its
// template's space.
std::vector<TemplateUse> apply_templates(Graph& g, const std::vector<TemplateSelection>& selected,
                                         const std::map<std::string, std::string>& configs,
                                         const Isa& isa);

}  // namespace kiln::graph
