// The signal operators (opset 17): DFT, STFT and MelWeightMatrix. Their
// geometry is parsed once here, for the reference evaluation (signal.cc) and
// for the pass that compiles DFT and STFT (graph/passes/lower_signal.h): a
// DFT of length N is a dense product with an [N x 2, bins x 2] twiddle
// matrix (real and imaginary parts interleaved), which runs on the dense /
// batch_matmul templates like any MatMul and is tuned the same way.
// MelWeightMatrix has no kernel: its inputs are constants in the models that
// use it, and the constant folder evaluates it (fed at run time, it runs in
// the executor, runtime/host_ops/signal_ops.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph::op_util {

// DFT over `axis` of x = [batch, signal dims..., channels]: channels 1 (real)
// or 2 (real, imaginary).
struct DftSpec {
  int64_t axis = 1;      // normalized
  int64_t length = 0;    // x's extent along the axis
  int64_t n = 0;         // dft_length (default: length); zero-padded or cut to it
  int64_t bins = 0;      // output extent along the axis: n, or n / 2 + 1 onesided
  int64_t channels = 1;  // 1 or 2
  bool inverse = false;
  std::vector<int64_t> out;  // [..., bins at axis, ..., 2]
};

// dft_length: the optional input's value (nullptr when absent). Throws
// OpError naming the node for a bad rank, axis, dtype or length.
DftSpec dft_spec(const Node& node, const std::vector<int64_t>& x, const std::string& dtype,
                 const Initializer* dft_length);

// STFT of signal = [batch, length, channels]: frames of frame_length samples
// every frame_step, each multiplied by the window, each transformed.
struct StftSpec {
  int64_t batch = 0, length = 0, channels = 1;
  int64_t step = 0, frame = 0, frames = 0, bins = 0;
  std::vector<int64_t> out;  // [batch, frames, bins, 2]
};

// window: the window input's shape (nullptr when absent); frame_length the
// optional input's value. One of the two gives the frame length.
StftSpec stft_spec(const Node& node, const std::vector<int64_t>& signal, const std::string& dtype,
                   const Initializer& frame_step, const std::vector<int64_t>* window,
                   const Initializer* frame_length);

// The DFT as a matrix W [rows * channels, bins * 2]: input position r < rows
// (rows <= n: positions past the signal are its zero padding), channel c
// (real, imaginary) to bin k, part p (real, imaginary), each row scaled by
// window[r] when a window is given, by 1 / n for the inverse. The angle
// 2 pi (k r mod n) / n is reduced exactly before its sine and cosine, so
// that a twiddle of exactly 0 or +-1 is one (a DFT of real data then has
// imaginary parts of exactly 0 at bin 0, as ONNX's reference results do).
std::vector<double> dft_matrix(int64_t rows, int64_t channels, int64_t n, int64_t bins,
                               bool inverse, const std::vector<double>* window);

}  // namespace kiln::graph::op_util
