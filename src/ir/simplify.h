// The arithmetic simplifier.
//
// Canonicalizes affine integer index expressions (sum of coefficient * term
// plus a constant, like terms merged, constants folded) and, using the ranges
// of loop variables, removes min/max/div/mod/comparisons whose result is
// provably known. The statement form tracks the ranges of the loops it enters
// and drops provably true/false branches.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "ir/expr.h"
#include "ir/stmt.h"

namespace kiln::ir {

// Inclusive bounds of an integer expression; nullopt side = unbounded.
struct ConstIntBound {
  std::optional<int64_t> min_value, max_value;
};

// Known ranges of variables: var -> [min, min + extent), given as constants.
using VarRanges = std::map<Var, ConstIntBound>;

Expr simplify(const Expr& e, const VarRanges& ranges = {});
Stmt simplify(const Stmt& s, const VarRanges& ranges = {});

// Constant bounds of an integer expression given the ranges of its variables.
ConstIntBound const_int_bound(const Expr& e, const VarRanges& ranges = {});

// True if cond simplifies to true under ranges (false means "not proven").
bool can_prove(const Expr& cond, const VarRanges& ranges = {});

}  // namespace kiln::ir
