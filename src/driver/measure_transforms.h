// Timing layout transforms (kiln.LayoutTransform kernels) as the build
// compiles them, for the graph-level layout choice
// (graph/passes/choose_layouts.h): a tuned convolution whose channel blocks
// differ from its neighbours' costs a transform that its own measurement does
// not see, so the build needs that transform's time.
//
// Each transform is one node of a small graph built with build_module() (the
// same passes, fusion, lowering and codegen as a model), run by the runtime's
// executor; its output is checked against the operator's reference before it
// is timed (DESIGN.md invariant 2: nothing unverified is stored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/target.h"

namespace kiln::driver {

struct TransformSpec {
  std::vector<int64_t> shape;  // logical NCHW shape of the activation
  int64_t from = 0, to = 0;    // blocks (0: NCHW); from != to
};

// Per spec, `repeats` per-call times in ms. Transforms are built a batch at a
// time (one package per batch, a kernel per transform). Throws
// std::invalid_argument for a spec whose blocks do not divide its channels
// or that moves nothing, std::runtime_error when a kernel's output differs
// from the reference (naming the transform).
std::vector<std::vector<double>> measure_transforms(const std::vector<TransformSpec>& specs,
                                                    const codegen::Target& target,
                                                    int repeats = 20);

}  // namespace kiln::driver
