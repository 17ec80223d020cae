#include "schedule/stage_loops.h"

#include <stdexcept>

namespace kiln::schedule {

using namespace kiln::ir;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

StageLoops derive_stage_loops(const StageNode& stage, const std::vector<int64_t>& root_extents) {
  StageLoops L;
  for (size_t i = 0; i < stage.root_iter_vars.size(); ++i)
    L.extent[stage.root_iter_vars[i].get()] = root_extents.at(i);

  // Extents flow forward, from roots to leaves, in the order relations were made.
  for (auto& r : stage.relations) {
    if (r.kind == IterRelation::Split) {
      int64_t e = L.extent.at(r.parent.get());
      int64_t inner = r.nparts ? ceil_div(e, r.nparts) : r.factor;
      int64_t outer = r.nparts ? r.nparts : ceil_div(e, r.factor);
      L.extent[r.inner.get()] = inner;
      L.extent[r.outer.get()] = outer;
    } else {
      L.extent[r.fused.get()] = L.extent.at(r.outer.get()) * L.extent.at(r.inner.get());
    }
  }
  // Values flow backward, from leaves to roots.
  for (auto& iv : stage.leaf_iter_vars) L.value[iv.get()] = iv->var;
  for (auto it = stage.relations.rbegin(); it != stage.relations.rend(); ++it) {
    const IterRelation& r = *it;
    if (r.kind == IterRelation::Split) {
      int64_t e = L.extent.at(r.parent.get());
      int64_t inner = L.extent.at(r.inner.get()), outer = L.extent.at(r.outer.get());
      Expr v = L.value.at(r.outer.get()) * make_int(inner) + L.value.at(r.inner.get());
      L.value[r.parent.get()] = v;
      if (inner * outer != e) {
        Expr guard = v < make_int(e);
        (r.parent->kind == IterKind::Reduce ? L.reduce_guards : L.data_guards).push_back(guard);
      }
    } else {
      Expr f = L.value.at(r.fused.get());
      int64_t inner = L.extent.at(r.inner.get());
      L.value[r.outer.get()] = floordiv(f, make_int(inner));
      L.value[r.inner.get()] = floormod(f, make_int(inner));
    }
  }
  return L;
}

}  // namespace kiln::schedule
