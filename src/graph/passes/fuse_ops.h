// Operator fusion: partitions a graph's nodes into groups, each of which
// becomes one kernel.
//
// Rules (TVM's FuseOps, simplified to chains):
//  - an anchor (Conv, Gemm, MatMul, ...) absorbs the elementwise/broadcast
//    ops that follow it while the value keeps the anchor's output shape
//    (bias, activation, clip, residual add): its epilogue;
//  - injective ops (reshape, transpose, elementwise, ...) fuse into each
//    other, and an injective chain fuses into the reduction that reads it;
//  - a reduction absorbs elementwise ops of its output shape;
//  - a value consumed by more than one node, or that is a graph output,
//    ends its group (so a group has one external output and no cycles),
//    except a diamond: an elementwise group that alone reads an anchor's
//    float output, twice or more (SiLU's x * Sigmoid(x)), joins the anchor.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace kiln::graph {

struct FusedGroup {
  std::vector<size_t> nodes;  // indices into Graph::nodes, in topological order
  int64_t anchor = -1;        // index of the anchor node (into Graph::nodes), -1 when none
  OpPattern pattern = OpPattern::kOpaque;  // the group's dominant pattern
  std::vector<std::string>
      inputs;  // values read from outside the group (incl. initializers), first use order
  std::vector<std::string> outputs;  // values used after the group or graph outputs
};

std::vector<FusedGroup> fuse_ops(const Graph& g);

// Whether a value of `shape` can be read by an epilogue computed in a
// template's flat [rows, N] output space when the graph's value has shape
// `out` = [..., N] (a dense on a [B, S, C] or [1, H, W, C] activation): the
// full shape itself, a scalar, or a trailing broadcast [1, ..., 1, N or 1].
// fuse_ops fuses only such epilogues into such anchors; lowering
// (driver/lower_group.cc) computes them in the flat space.
bool flat_epilogue_input(const std::vector<int64_t>& shape, const std::vector<int64_t>& out);

// A group that is one Reshape, Flatten, Squeeze or Unsqueeze only renames
// its input's elements: every value is dense and row-major, so its output is
// the input's memory read with another shape. Returns {output, input} for such
// a group, whose output the memory plan places in the input's storage
// (passes::PlanAlias) and the build gives no kernel; nothing when the group
// computes something or its output is a graph output (which owns its storage).
std::optional<std::pair<std::string, std::string>> storage_alias(const Graph& g,
                                                                 const FusedGroup& group);

// A group that is one Concat along a dim with only 1s before it (the
// channels of a batch-1 NCHW or NCHW[x]c value) only places its inputs side
// by side: each input is one contiguous run of the output's bytes, at
// `offsets` (bytes). The build lets the memory plan put the inputs there
// (passes::PlanConcat), their producers writing them in place, when every
// input comes from a kernel and joins no other concat. Nothing when the
// group computes something else, an input repeats, or the output is a graph
// output (which owns its storage).
struct ConcatView {
  std::string output;
  std::vector<std::string> inputs;
  std::vector<size_t> offsets;
};
std::optional<ConcatView> concat_view(const Graph& g, const FusedGroup& group);

// "fused_conv_add_relu" style name from the op types (for mod.json and profiles).
std::string group_label(const Graph& g, const FusedGroup& group);

}  // namespace kiln::graph
