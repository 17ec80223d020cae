// Template selection: which tunable template runs each operator of a graph
// that a row of the strategy table (strategy.h) covers, and on which workload.
// Pure analysis; apply_templates does the rewrite with the same row. Every
// decision about whether a node is covered lives in the table's matchers, so
// that apply_templates rewrites exactly the nodes selected. The rows today:
//
//   Conv, groups 1, constant float32 4-D weight   conv2d_NCHWc.x86
//     and, 3x3 stride 1 (any dilation) with >= 16 channels, conv2d_winograd_NCHWc.x86
//     beside it
//   Conv, depthwise (groups = C = OC, multiplier 1)   depthwise_conv2d_NCHWc.x86
//   Conv, 1 < groups, not depthwise (ResNeXt, RegNet)   group_conv2d_NCHWc.x86
//   Gemm (transA = 0) / MatMul with a constant 2-D B   dense_pack.x86 (A flattened to [M, K])
//   MatMul of two activations (rank >= 3 on the left) whose batch dims match,
//     or with no batch to broadcast on the right   batch_matmul.x86
//   with Precision::kBf16 (kiln build --precision bf16), before the above:
//     Conv, groups 1, constant float32 4-D weight   conv2d_NCHWc_bf16.x86 (no Winograd)
//     Gemm / MatMul with a constant 2-D B   dense_bf16.x86
//
// Anything else (transA, batch broadcast, other dtypes) keeps its operator
// and runs as a generic kernel. To add a template or a target-specific
// choice, add a row to strategy.cc (strategy.h says how); this file does not
// change.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/strategy.h"
#include "ops/workload.h"
#include "support/isa.h"

namespace kiln::graph {

// Which tunable template each Conv / Gemm / MatMul gets, and its workload (the
// canonical key depends only on NCHW shapes and attributes, never on a config,
// so that tuning records found before layout decisions still apply).
struct TemplateSelection {
  std::string node;           // the node's name
  std::string template_name;  // e.g. "conv2d_NCHWc.x86"
  ops::Workload workload;     // w.key() is the workload key
  // Every implementation of the node, this one included, in table order: the
  // first matching row and the alternative rows after it (strategy.h). A
  // 3x3 stride-1 Conv has two (direct and Winograd); most nodes have one.
  // Each is a tuning task; choose_implementations picks the one built.
  std::vector<ops::Workload> implementations;
  // The implementation built without records (the row marked untuned_default,
  // else the first); an index into implementations.
  size_t untuned_default = 0;
  // This node's own config (Config JSON of `workload`'s template), set by the
  // build's layout choice (choose_layouts.h) when it differs per node; empty:
  // the workload's config (apply_templates' `configs`), else the fallback.
  std::string config_json;
};

// One entry per covered node, in node order; the graph is unchanged. `isa` is
// the target's row of the per-ISA table (codegen::Target::isa()), which rows
// may condition on; the default (generic) row suits target-independent
// analysis. Throws std::runtime_error naming the node for a Conv whose bias is
// not a constant (the blocked bias is laid out at build time).
// `precision`: Precision::kBf16 lets the bf16 rows (Conv groups 1, Gemm and
// MatMul with a constant B) take the nodes they match; every other node keeps
// its float template.
std::vector<TemplateSelection> select_templates(const Graph& g, const Isa& isa = Isa{},
                                                Precision precision = Precision::kFp32);

// Makes each selection's workload the implementation to build: the one whose
// record runs fastest (`gflops` by workload key, from the tuning records;
// every implementation of a node counts the same operations, so GFLOP/s
// compare), else, when none has a record, its untuned default.
void choose_implementations(std::vector<TemplateSelection>& selected,
                            const std::map<std::string, double>& gflops);

}  // namespace kiln::graph
