// The loops of one stage, derived from its relations: the extent of every
// iteration variable and the value of every root variable as an expression
// of the leaf loop variables. Bound inference and loop-nest construction
// both read it.
#pragma once

#include <map>
#include <vector>

#include "schedule/schedule.h"

namespace kiln::schedule {

struct StageLoops {
  // Extent of every iteration variable of the stage (root, derived, leaf).
  std::map<const ir::IterVarNode*, int64_t> extent;
  // Offset of every iteration variable within its domain, in leaf loop vars.
  std::map<const ir::IterVarNode*, ir::Expr> value;
  // Conditions that a non-dividing split needs: value(parent) < extent(parent).
  std::vector<ir::Expr> data_guards, reduce_guards;
};

// root_extents: the extent each root variable iterates over (from bound
// inference), in stage->root_iter_vars order.
StageLoops derive_stage_loops(const StageNode& stage, const std::vector<int64_t>& root_extents);

}  // namespace kiln::schedule
