// Calibration data: the samples a model is run on to observe its activations.
//
// Two forms (README, "kiln quantize"):
//  - DATA.npz: one array per model input, named as the input, holding N
//    samples stacked along a NEW leading axis: an input of shape [1, 3, 32, 32]
//    takes an array of [N, 1, 3, 32, 32]. (A new axis, not the batch axis:
//    the model is built and run for its own input shape, and inputs without a
//    batch axis work the same way.)
//  - DIR: every *.npz in it (sorted by name) is one sample, exactly like
//    `kiln run --inputs`: one array per input, of the input's shape.
// Every sample must give every input, nothing else, with the input's dtype,
// rank and static axes; dynamic axes may take any size, the same in every
// sample. Errors name the file and the tensor.
#pragma once

#include <string>
#include <vector>

#include "frontend/model_outputs.h"
#include "runtime/npz.h"

namespace kiln::quantize {

struct CalibrationSample {
  std::string origin;                       // "DATA.npz sample 3" or "DIR/x.npz", for messages
  std::vector<runtime::NamedArray> inputs;  // in the model's input order
};

std::vector<CalibrationSample> load_calibration(const std::string& path,
                                                const frontend::OnnxModelSummary& model);

}  // namespace kiln::quantize
