// Layout propagation (TVM's AlterOpLayout, after apply_templates): keeps a
// chain of convolutions in the blocked NCHW[x]c layout instead of going back
// to NCHW between them.
//
//  1. Elementwise / broadcast operators whose activations all come out of an
//     LT(NCHW[b]c -> NCHW) run in NCHW[b]c (per-channel and scalar constants
//     re-laid out; a per-channel activation, a squeeze-excitation gate,
//     blocked alike), and so does a Concat along channels of inputs blocked
//     alike; each is followed by its own LT back to NCHW.
//  2. LT(NCHW -> b2) of an LT(b1 -> NCHW) output reads the blocked source:
//     nothing when b1 == b2, one blocked-to-blocked transform otherwise. An
//     LT that produces a graph output stays, so outputs stay NCHW.
//  3. The nodes and constants that this left unread are removed
//     (eliminate_dead_code).
//  4. A Resize read only by transforms back to a blocked layout is marked
//     (kiln_reblocked = 1): its fused kernel writes the channel block
//     innermost, so it interpolates in one stage (graph/ops/shape_ops.cc).
#pragma once

#include "graph/graph.h"

namespace kiln::graph {

void propagate_layout(Graph& g);

}  // namespace kiln::graph
