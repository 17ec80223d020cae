// Graph-level layout choice (the idea of TVM's graph tuner): pick every
// blocked convolution's config jointly, so that a tuned config whose channel
// blocks differ from its neighbours' wins only where its kernel time pays for
// the layout transforms it adds.
//
// Why here (graph/passes) and not in tuner/: the problem is the graph's
// structure, which tensors propagate_layout keeps in one blocked layout; the
// tuner may not see graphs (layering). Times come in as plain numbers: the
// build's caller reads them from tuning records (tuner/layout_records.h).
//
// The model. A *layout class* is a set of 4-D activations that propagate_layout
// keeps in one layout: a value and what elementwise / broadcast operators,
// channel Concats and pools make of it (they run in NCHW[b]c when all their
// blocked inputs agree). A residual Add joins its inputs' classes. A class
// with any other producer (a graph input, an operator that runs in NCHW) is
// *fixed*: NCHW. A free class is blocked with the one block all the
// convolutions writing into it use: a join's writers must agree (were it
// NCHW, the residual Add would leave its convolution's epilogue for a kernel
// of its own, with transforms: that lost on ResNet-18). Only a join whose
// writers share no block is NCHW: each writer then keeps its own block and
// pays its output's transform back to NCHW (as propagate_layout does).
//
// Each convolution has options (a config: kernel time, in_block, out_block)
// and pays the transform of its input from its input class's block to its
// in_block, and of its output to NCHW when its class is NCHW. Given every
// class's block, each convolution's best option is independent of the
// others', so the problem is a min-sum problem over class blocks with one
// factor per convolution (over its input and output classes). solve_layouts
// eliminates the classes one by one (dynamic programming over the class
// graph: a chain of convolutions is the classic DP, ResNet's residual stream
// a chain of classes with each block's inner class eliminated first); it is
// exact while every table it builds stays under LayoutProblem::max_table
// entries, and otherwise falls back to greedy coordinate descent over class
// blocks from the blocks of the per-convolution fastest options
// (LayoutSolution::exact says which). Ignored: operators that need NCHW
// reading a blocked class (their transform costs the same whatever the
// block), and the time of the operators between convolutions.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/select_templates.h"

namespace kiln::graph {

// One implementation-and-config of a convolution.
struct LayoutOption {
  double ms = 0;  // kernel time
  int64_t in_block = 0, out_block = 0;
};

struct LayoutConv {
  std::string name;
  int in_class = 0, out_class = 0;    // indices into LayoutProblem::fixed
  std::vector<int64_t> in_shape;      // NCHW shape of the input (for transform costs)
  std::vector<LayoutOption> options;  // at least one
  // NCHW shape of the output: a conv writing into a class that is NCHW
  // (fixed, or a join whose writers share no block) pays the transform of
  // its output back to NCHW (empty: none counted).
  std::vector<int64_t> out_shape;
};

struct LayoutProblem {
  std::vector<bool> fixed;  // per class: NCHW, not chosen (see above)
  std::vector<LayoutConv> convs;
  // Time of transforming an activation of NCHW `shape` from block `from` to
  // block `to` (0 = NCHW); called only with from != to.
  std::function<double(const std::vector<int64_t>& shape, int64_t from, int64_t to)> transform_ms;
  size_t max_table = size_t{1} << 20;  // largest elimination table before falling back
};

struct LayoutSolution {
  std::vector<size_t> choice;  // per conv: index into its options
  std::vector<int64_t> block;  // per class: its block (0: NCHW)
  double total_ms = 0;         // layout_cost(problem, choice)
  bool exact = true;           // false: the greedy fallback ran
};

// The predicted time of a choice: kernels plus transforms, each free class
// blocked as its writers when they agree, else NCHW (as propagate_layout).
double layout_cost(const LayoutProblem& p, const std::vector<size_t>& choice);

// The cheapest choice (exactly, unless the fallback ran). Throws
// std::invalid_argument for a conv without options or a class out of range.
LayoutSolution solve_layouts(const LayoutProblem& p);

// ---- The problem of a graph ----------------------------------------------

// A candidate config of one workload, with its blocks and measured time.
struct ConfigCandidate {
  std::string config_json;
  double ms = 0;
  int64_t in_block = 0, out_block = 0;
};

struct LayoutChoice {
  // Per selected node name: the workload and config it gets.
  std::map<std::string, std::pair<ops::Workload, std::string>> configs;
  size_t convs = 0;         // blocked convolutions in the problem
  size_t changed = 0;       // of them, with blocks other than the baseline's
  double baseline_ms = 0;   // the given baseline configs, costed alike
  double predicted_ms = 0;  // the chosen ones
  bool exact = true;
};

// Builds the problem for the blocked convolutions among `selected` (nodes of
// `g` before apply_templates) whose implementations have candidates (by
// workload key), solves it and returns each such node's config. `baseline`
// (workload key -> config JSON, the per-workload best the build would take
// without this pass) is costed the same way for the report; a node whose
// baseline config is not among its candidates counts with its fastest one.
LayoutChoice choose_layouts(
    const Graph& g, const std::vector<TemplateSelection>& selected,
    const std::map<std::string, std::vector<ConfigCandidate>>& candidates,
    const std::map<std::string, std::string>& baseline,
    const std::function<double(const std::vector<int64_t>&, int64_t, int64_t)>& transform_ms);

}  // namespace kiln::graph
