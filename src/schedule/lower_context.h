// What lowering knows about a schedule while it builds the loop nest: the
// definition of each stage after inlining, the region each stage computes,
// and its derived loops.
#pragma once

#include <map>
#include <vector>

#include "schedule/schedule.h"
#include "schedule/stage_loops.h"

namespace kiln::schedule {

// Per root iteration variable: coordinate of the first element computed, and
// how many elements (constant; the loops iterate [0, extent)).
struct StageBounds {
  std::vector<ir::Expr> min;
  std::vector<int64_t> extent;
  // Per data axis: the region may reach past the tensor's shape and reads
  // there could leave their tensors, so each element is guarded with
  // 0 <= coordinate < shape.
  std::vector<bool> may_exceed;
};

struct LowerContext {
  const Schedule* sch = nullptr;
  std::map<const StageNode*, ir::Tensor> def;  // definitions with inlined stages substituted
  std::map<const StageNode*, StageBounds> bounds;
  std::map<const StageNode*, StageLoops> loops;

  const ir::Tensor& definition(const Stage& s) const { return def.at(s.get()); }
  // Stages (not inlined, not placeholders) whose definition reads s.
  std::vector<Stage> readers(const Stage& s) const;
};

// Substitutes inlined stages into their readers' definitions.
void inline_stages(LowerContext& ctx);

// Infers the region of every stage, consumers first, and derives its loops.
void infer_bounds(LowerContext& ctx);

}  // namespace kiln::schedule
