// LSTM, GRU and RNN nodes unrolled over their (static) sequence into nodes kiln
// compiles: one MatMul of the whole input sequence by W (every step's input
// projection at once), then per step a Gather of that step's row, a MatMul of
// the previous hidden state by R, a Split into the gates and the gates'
// elementwise update; Y, Y_h and Y_c are Concats of the steps' states. This
// is how TVM's ONNX frontend runs recurrent operators too. The per-step
// elementwise nodes fuse into few kernels, and a step's recurrent MatMul is a
// dense_pack or dense_nopack workload like any Linear.
//
// W, R, B, the peepholes P and the initial states may be constants or
// computed at run time: constant weights are sliced and transposed here, at
// build time; run-time ones by Gather, Slice and Transpose nodes. A
// sequence_lens that may be shorter than the sequence (computed, or a
// constant that is) becomes a [T, N, 1] mask that keeps a batch entry's
// states and zeroes its Y past its length. The attributes kiln does not take
// (graph/ops/recurrent.h) fail with an error naming the node.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of LSTM, GRU and RNN nodes unrolled.
int unroll_recurrent(Graph& g);

}  // namespace kiln::graph::passes
