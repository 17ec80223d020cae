// The layout stage of the pipeline as one call, kept for the existing callers:
// exactly the composition
//
//   apply_templates(g, select_templates(g), configs);  // select_templates.h, apply_templates.h
//   propagate_layout(g);                                // propagate_layout.h
//
// that is, every Conv / Gemm / MatMul a tunable template covers becomes a
// kiln.Template with its weights packed (the config of a workload is configs'
// explicit one for its key, else the template's fallback), then chains of
// convolutions keep their activations in NCHW[x]c.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/apply_templates.h"

namespace kiln::graph {

// configs: workload key -> Config JSON. Returns apply_templates' uses: one
// entry per rewritten node, in node order.
std::vector<TemplateUse> alter_layout(Graph& g, const std::map<std::string, std::string>& configs);

}  // namespace kiln::graph
