// Operators whose meaning changed at an opset: the registry implements the
// newest meaning only (a Node does not carry its model's opset), so the
// frontend rewrites older nodes into equivalent newest-opset ones. Private to
// src/frontend.
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace kiln::frontend {

// Softmax, LogSoftmax and Hardmax before opset 13 flatten their input to 2-D, [prod(dims before
// axis), prod(dims from axis on)], normalize each row and restore the shape; the axis defaults
// to 1. Opset 13 normalizes along the one axis (default -1). For `opset` < 13 every such node gets
// an explicit axis, and where the two meanings differ (the axis is not the last one) it becomes
// Reshape -> Softmax(axis=-1) (or LogSoftmax, Hardmax) -> Reshape. Needs the input's inferred type;
// throws ImportError naming the node without it.
//
// RoiAlign before opset 16 always used output_half_pixel coordinates: such a node gets that
// coordinate_transformation_mode explicitly (opset 16's default is half_pixel).
void upgrade_legacy_ops(graph::Graph* g, int64_t opset);

}  // namespace kiln::frontend
