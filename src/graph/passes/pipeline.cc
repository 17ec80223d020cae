#include "graph/passes/pipeline.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "graph/passes/channels_last_to_nchw.h"
#include "graph/passes/decompose_batch_norm.h"
#include "graph/passes/decompose_reductions.h"
#include "graph/passes/depth_to_space.h"
#include "graph/passes/div_by_constant.h"
#include "graph/passes/eliminate_dead_code.h"
#include "graph/passes/fold_batch_norm.h"
#include "graph/passes/fold_constants.h"
#include "graph/passes/fold_qdq.h"
#include "graph/passes/fuse_gelu.h"
#include "graph/passes/fuse_layer_norm.h"
#include "graph/passes/instance_norm.h"
#include "graph/passes/lift_1d_windows.h"
#include "graph/passes/lower_3d_windows.h"
#include "graph/passes/lower_conv_transpose.h"
#include "graph/passes/lower_einsum.h"
#include "graph/passes/lower_signal.h"
#include "graph/passes/simplify.h"
#include "graph/passes/strategy.h"
#include "graph/passes/trim_conv_taps.h"
#include "graph/passes/unroll_recurrent.h"

namespace kiln::graph::passes {

void trace_pass(const Graph& g, const char* pass, const std::string& what) {
  static const bool on = [] {
    const char* v = std::getenv("KILN_DEBUG_PASSES");
    return v && *v && std::string(v) != "0";
  }();
  if (on)
    std::fprintf(stderr, "[kiln passes] %-20s %s -> %zu nodes, %zu initializers\n", pass,
                 what.c_str(), g.nodes.size(), g.initializers.size());
}

namespace {
void trace(const Graph& g, const char* pass, const std::string& what) { trace_pass(g, pass, what); }
}  // namespace

void run_default_passes(Graph& g) {
  int removed = simplify(g);
  trace(g, "simplify", std::to_string(removed) + " removed");
  // Before folding constants, which would turn DequantizeLinear(weight) into
  // float weights and hide the pattern. Until the int8 templates take the
  // QLinear nodes, they run as DQ -> float op -> Q (expand_quantized_ops),
  // and the weights' DequantizeLinear then folds below. The QLinear nodes an
  // int8 template covers (the strategy table's QLinear rows) stay integer;
  // KILN_QUANT_FLOAT=1 runs them all in float (for comparing the two paths).
  int qdq = fold_qdq(g);
  trace(g, "fold_qdq", std::to_string(qdq) + " folded");
  static const bool all_float = [] {
    const char* v = std::getenv("KILN_QUANT_FLOAT");
    return v && *v && std::string(v) != "0";
  }();
  int qx = expand_quantized_ops(
      g, [&g](const Node& n) { return !all_float && int8_template_covers(g, n); });
  trace(g, "expand_quantized_ops", std::to_string(qx) + " expanded");
  FoldConstantsStats f = fold_constants(g);
  trace(g, "fold_constants",
        std::to_string(f.folded) + " folded, " + std::to_string(f.skipped_too_large) +
            " left (too large)");
  // After folding: a weight may have been a Constant node until then. 1-D
  // transposed convs are 2-D ones after lifting, and the phase convs of
  // lower_conv_transpose may have taps to trim.
  int ds = depth_to_space_as_transpose(g);
  trace(g, "depth_to_space", std::to_string(ds) + " rewritten");
  int es = lower_einsum(g);
  trace(g, "lower_einsum", std::to_string(es) + " rewritten");
  int sg = lower_signal(g);
  trace(g, "lower_signal", std::to_string(sg) + " rewritten");
  int dr = decompose_reductions(g);
  trace(g, "decompose_reductions", std::to_string(dr) + " rewritten");
  int in = instance_norm_as_layer_norm(g);
  trace(g, "instance_norm", std::to_string(in) + " rewritten");
  int ur = unroll_recurrent(g);
  trace(g, "unroll_recurrent", std::to_string(ur) + " unrolled");
  int l1 = lift_1d_windows(g);
  trace(g, "lift_1d_windows", std::to_string(l1) + " lifted");
  int l3 = lower_3d_windows(g);
  trace(g, "lower_3d_windows", std::to_string(l3) + " rewritten");
  int ct = lower_conv_transpose(g);
  trace(g, "lower_conv_transpose", std::to_string(ct) + " rewritten");
  int tt = trim_conv_taps(g);
  trace(g, "trim_conv_taps", std::to_string(tt) + " trimmed");
  // After folding: the pattern's eps, exponent and axes are Constant nodes
  // until then.
  int ln = fuse_layer_norm(g);
  trace(g, "fuse_layer_norm", std::to_string(ln) + " rewritten");
  int ge = fuse_gelu(g);
  trace(g, "fuse_gelu", std::to_string(ge) + " rewritten");
  int dv = div_by_constant(g);
  trace(g, "div_by_constant", std::to_string(dv) + " rewritten");
  // After fuse_layer_norm and fuse_gelu (the ops it moves to NCHW), before
  // fold_batch_norm (which folds the Linears' bias and layer scale into the
  // 1x1 convolutions it makes).
  int cl = channels_last_to_nchw(g);
  trace(g, "channels_last_to_nchw", std::to_string(cl) + " regions");
  int bn = fold_batch_norm(g);
  trace(g, "fold_batch_norm", std::to_string(bn) + " folded");
  int bd = decompose_batch_norm(g);
  trace(g, "decompose_batch_norm", std::to_string(bd) + " rewritten");
  f = fold_constants(g);
  trace(g, "fold_constants", std::to_string(f.folded) + " folded");
  DeadCodeStats d = eliminate_dead_code(g);
  trace(g, "eliminate_dead_code",
        std::to_string(d.nodes_removed) + " nodes, " + std::to_string(d.initializers_removed) +
            " initializers removed");
}

}  // namespace kiln::graph::passes
