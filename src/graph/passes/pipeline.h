// The default graph-level pass pipeline a build runs before layout and fusion.
#pragma once

#include <string>

#include "graph/graph.h"

namespace kiln::graph::passes {

// Applies, in this order:
//   1. simplify             drop Identity/Dropout/no-op reshapes first, so that the
//                           patterns below see producers and readers directly
//                           (Conv -> Identity -> BN folds too);
//   2. fold_constants       evaluate constant subgraphs, incl. Shape chains on
//                           value_info, so weights reach the anchors as initializers
//                           (e.g. a Reshape'd or Transpose'd weight);
//      then the rewrites of operators the templates do not take: depth_to_space,
//      decompose_reductions, instance_norm, unroll_recurrent, lift_1d_windows,
//      lower_conv_transpose, trim_conv_taps (docs/architecture.md);
//   3. fuse_layer_norm      the decomposed LayerNorm pattern -> LayerNormalization
//                           (its eps, exponent and axes must be constants by now);
//   4. fuse_gelu            the exported Erf GELU pattern -> Gelu (one elementwise
//                           op, so that it joins a Linear's epilogue);
//   5. div_by_constant      Div by a scalar constant -> Mul by its reciprocal
//                           (after fuse_layer_norm and fuse_gelu, whose patterns
//                           have a Div);
//   6. channels_last_to_nchw  Transpose(NHWC) -> LayerNorm / Linear / elementwise ->
//                           Transpose(NCHW) regions run in NCHW (kiln.ChannelNorm,
//                           1x1 Conv): ConvNeXt's blocks join the blocked layout;
//   7. fold_batch_norm      fold BN and per-channel Mul/Add into anchor weights: it
//                           needs constant weights, hence after folding;
//   8. fold_constants       again: folding BN can leave constant chains (rare, cheap);
//   9. eliminate_dead_code  drop nodes and initializers nobody reads any more
//                           (the original weights of folded anchors, folded inputs).
// KILN_DEBUG_PASSES=1 prints each pass's effect to stderr.
// The target-dependent pass (pad_channels) runs after these, in the driver
// (driver/build.cc, run_graph_passes).
void run_default_passes(Graph& g);

// KILN_DEBUG_PASSES=1: one line to stderr, what `pass` did and the graph's size.
void trace_pass(const Graph& g, const char* pass, const std::string& what);

}  // namespace kiln::graph::passes
