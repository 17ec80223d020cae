// The build's debug switches (README, "Debugging"):
//
//   KILN_DEBUG_GRAPH=1            print the graph (graph/printer.h) to stderr after
//                                 every graph step of build(): import, graph passes,
//                                 templates, layout, fusion;
//   KILN_DEBUG_GRAPH=layout,fusion  only after the named steps;
//   KILN_DEBUG_PASSES=1           one line per graph pass (graph/passes/pipeline.cc);
//   KILN_DEBUG_LOWER=1            the loop IR after every lowering pass (schedule/lower.cc);
//   KILN_DUMP_KERNELS=DIR         each kernel's LLVM IR and assembly into DIR (as
//                                 kiln build --dump-kernels DIR; =1: OUT.kernels/).
#pragma once

#include <string>
#include <vector>

#include "codegen/target.h"
#include "graph/graph.h"
#include "graph/passes/fuse_ops.h"
#include "ir/function.h"

namespace kiln::driver {

// Prints `g` (with its fused groups, if any) to stderr when KILN_DEBUG_GRAPH
// selects `step`.
void debug_graph(const std::string& step, const graph::Graph& g,
                 const std::vector<graph::FusedGroup>& groups = {});

// Writes DIR/<kernel>.ll (optimized LLVM IR) and DIR/<kernel>.s (assembly)
// for every kernel, creating DIR. Throws std::runtime_error naming a file it
// cannot write.
void dump_kernels(const std::vector<ir::LoweredFunc>& funcs, const codegen::Target& target,
                  const std::string& dir);

}  // namespace kiln::driver
