// A vector index as one scalar base plus a constant offset per lane.
//
// Why: a template that reads a fixed permutation of a contiguous block
// (group_conv2d_lanes_NCHWc.x86 reads, for lane l, lane (l / Cg) * Cg + j of
// the pixel's channel block) vectorizes to an index such as
// x16(base) + floordiv(ramp(0, 1, 16), x16(4)) * x16(4) + x16(j). Emitted
// as a gather that is 16 scalar loads; as base + constant offsets it is one
// vector load and a shuffle (codegen_llvm.cc, emit_load).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/expr.h"

namespace kiln::codegen {

struct LaneOffsets {
  ir::Expr base;                 // scalar, the index type
  std::vector<int64_t> offsets;  // one per lane
};

// index = broadcast(base) + offsets, for an integer vector index built from
// broadcasts, ramps with constant strides, +, -, * by a uniform constant,
// and floordiv / floormod of constant vectors by constants. Nullopt for
// anything else (a lane offset that depends on a variable).
// A constant part of the base is moved into the offsets.
std::optional<LaneOffsets> lane_offsets(const ir::Expr& index);

// Whether an integer expression is a multiple of m by its form: a constant
// multiple, a product with one, or a sum, difference, min or max of such.
bool is_multiple_of(const ir::Expr& e, int64_t m);

}  // namespace kiln::codegen
