// Quantization's pre-processing (what ONNX Runtime's quant_pre_process does
// through its optimizer): a BatchNormalization whose input is a Conv's
// output, read by nothing else, is folded into that Conv's weight and bias.
// Left in place, the Conv's output would be quantized before the BatchNorm,
// the BatchNorm run in float between QDQ pairs, and the Conv could not fuse
// with a following Relu into one integer kernel.
#pragma once

#include <string>

namespace kiln::frontend {

// Writes the model at `path` with every such pair folded to `out_path`
// (ATOMICALLY) and returns how many were folded; 0 writes nothing. Folded:
// Conv with float32 initializer weight (and bias), BatchNormalization in
// inference form (one output) with float32 initializer scale, B, mean, var:
//   W'[m] = W[m] * s[m],  b'[m] = (b[m] - mean[m]) * s[m] + B[m],
//   s[m] = scale[m] / sqrt(var[m] + epsilon).
// The Conv takes the BatchNorm's output name; the new weight and bias are new
// initializers (the old ones may be shared), unused ones are dropped.
int fold_batch_norms(const std::string& path, const std::string& out_path);

}  // namespace kiln::frontend
