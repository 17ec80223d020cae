#include "ops/generic_schedule.h"

namespace kiln::ops {

using schedule::Stage;

namespace {

int64_t extent_of(const ir::IterVar& iv) {
  const int64_t* e = ir::as_const_int(iv->dom.extent);
  return e ? *e : 0;
}

int64_t spatial_elements(const Stage& s) {
  int64_t n = 1;
  for (auto& a : s->op->axis) n *= extent_of(a);
  return n;
}

void fuse_and_parallelize(const Stage& s, const std::vector<ir::IterVar>& outer, bool parallel) {
  if (outer.empty()) return;
  ir::IterVar fused = outer.size() == 1 ? outer[0] : s->fuse(outer);
  if (parallel) s->parallel(fused);
}

// Fuses only the leading loops that parallelism needs (until there are
// kParallelGrain iterations to share) and leaves the inner ones nested: every
// loop in the fused one costs a division and a modulo per iteration to
// recover its index, which dominated small-inner-axis copies such as layout
// transforms (NCHW -> NCHW3c ran at ~1 GB/s fully fused).
void fuse_leading_and_parallelize(const Stage& s, const std::vector<ir::IterVar>& outer,
                                  bool parallel) {
  constexpr int64_t kParallelGrain = 256;
  size_t k = 0;
  int64_t iterations = 1;
  while (k < outer.size() && iterations < kParallelGrain) iterations *= extent_of(outer[k++]);
  fuse_and_parallelize(s, std::vector<ir::IterVar>(outer.begin(), outer.begin() + k), parallel);
}

}  // namespace

void schedule_loops(const Stage& s, int64_t vector_lanes) {
  const auto& axis = s->op->axis;
  if (axis.empty()) return;
  bool parallel = spatial_elements(s) >= kMinParallelElements;
  if (!s->op->reduce_axis.empty()) {
    // The innermost spatial loop stays its own loop: indices inside the
    // reduction then need no division by the fused extents.
    std::vector<ir::IterVar> outer(axis.begin(), axis.end() - (axis.size() > 1 ? 1 : 0));
    fuse_and_parallelize(s, outer, parallel);
    return;
  }
  std::vector<ir::IterVar> outer(axis.begin(), axis.end() - 1);
  ir::IterVar last = axis.back();
  if (extent_of(last) >= vector_lanes) {
    auto [lo, li] = s->split(last, vector_lanes);
    outer.push_back(lo);
    s->vectorize(li);
  } else {
    outer.push_back(last);
  }
  fuse_leading_and_parallelize(s, outer, parallel);
}

schedule::Schedule schedule_generic(const std::vector<ir::Tensor>& outputs, int64_t vector_lanes) {
  schedule::Schedule sch = schedule::create_schedule(outputs);
  for (const Stage& s : sch.stages()) {
    if (s->is_placeholder()) continue;
    if (!s->is_output && s->op->reduce_axis.empty()) {
      s->compute_inline();
      continue;
    }
    schedule_loops(s, vector_lanes);
  }
  return sch;
}

}  // namespace kiln::ops
