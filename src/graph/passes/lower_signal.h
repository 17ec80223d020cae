// Rewrites DFT and STFT into operators kiln compiles: a DFT of length n as a
// dense product with a constant twiddle matrix (graph/ops/signal.h,
// dft_matrix), so that it runs on the dense / batch_matmul templates and is
// tuned like any MatMul. O(n^2) multiply-adds per line where an FFT needs
// O(n log n), but as one vectorized, register-blocked GEMM over every line
// at once, which for the lengths audio front ends use (n <= 1024, hundreds
// of frames) beats a scalar FFT; no twiddle is ever computed at run time.
//
//   DFT:  [Slice to dft_length] -> [Transpose: the axis before the channels]
//         -> Reshape [lines, length * channels] -> MatMul W -> Reshape
//         [..., bins, 2] -> [Transpose back]
//   STFT: Gather of the frames (constant [frames, frame_length] indices)
//         -> [Mul by a run-time window] -> Reshape [batch, frames,
//         frame_length * channels] -> MatMul W -> Reshape [batch, frames, bins, 2]
//
// A constant window is folded into W's rows. Steps that would not move
// anything are left out.
#pragma once

#include "graph/graph.h"

namespace kiln::graph::passes {

// Returns the number of DFT and STFT nodes rewritten. Throws OpError naming
// the node for inputs that do not fit it (or a dft_length, frame_step or
// frame_length that is not a constant).
int lower_signal(Graph& g);

}  // namespace kiln::graph::passes
