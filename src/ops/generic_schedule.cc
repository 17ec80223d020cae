#include "ops/generic_schedule.h"

#include <algorithm>

#include "ir/canonical_form.h"
#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::ops {

using schedule::Stage;

namespace {

// Rows (the fused loops outside a reduction's innermost spatial loop) that
// keep that loop nested: enough to share between threads.
constexpr int64_t kMinParallelRows = 16;
// A reduce loop of at most this many taps is unrolled inside a nested column.
constexpr int64_t kMaxUnrolledTaps = 3;

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

// Every tensor read in an expression.
class ReadCollector : public ir::IRVisitor {
 public:
  std::vector<const ir::TensorReadNode*> reads;

 protected:
  void visit_tensor_read(const ir::TensorReadNode* op) override {
    reads.push_back(op);
    ir::IRVisitor::visit_tensor_read(op);
  }
};

// Whether every read in the stage's body steps through memory by one element
// (or not at all) as `v` steps by one: then a vector of consecutive `v`
// reads each input with one vector load (or a broadcast). The test is on the
// flat row-major offset, so a row walked through a div/mod unflattening
// (floordiv(k, 7) * 7 + floormod(k, 7)) counts once the simplifier merges it.
bool contiguous_along(const Stage& s, const ir::Var& v) {
  ReadCollector c;
  c.visit(s->op->body);
  for (const ir::TensorReadNode* r : c.reads) {
    ir::Expr flat = ir::Expr(int64_t{0});
    for (size_t d = 0; d < r->indices.size(); ++d) {
      const int64_t* e = ir::as_const_int(r->tensor->shape[d]);
      if (!e) return false;
      flat = flat * ir::Expr(*e) + r->indices[d];
    }
    if (!ir::uses_var(flat, v)) continue;
    std::optional<ir::arith::Linear> l = ir::arith::to_linear(ir::simplify(flat));
    if (!l) return false;
    for (const auto& [atom, coef] : l->terms) {
      const bool is_v = atom.get() == static_cast<const ir::ExprNode*>(v.get());
      if (is_v ? coef != 1 : ir::uses_var(atom, v)) return false;
    }
  }
  return true;
}

// An NCHW[x]c stage's loops outside its innermost ones with the rows before
// the channel blocks, (n, h, c_block, ...): the threads' blocks of the fused
// loop are then rows of every channel (graph/passes/parallel_splits.h).
void rows_before_channel_blocks(const Stage& s, std::vector<ir::IterVar>& outer, bool rows_first) {
  if (!rows_first || s->op->axis.size() != 5 || outer.size() < 3) return;
  s->reorder({outer[2], outer[1]});
  std::swap(outer[1], outer[2]);
}

// A reduction whose innermost spatial axis is a multiple of the lanes and
// contiguous in its inputs (a row reduction's partials, pooling over a
// channel block) runs that axis as vectors inside its reduction loops:
// [spatial..., reduce..., lanes] keeps one vector accumulator per lane group
// and loads whole vectors. The lane groups outside the vector (16 partials
// with 8 lanes) are unrolled: independent accumulators.
bool vectorize_reduction(const Stage& s, int64_t vector_lanes, bool parallel, bool rows_first) {
  const auto& axis = s->op->axis;
  const ir::IterVar last = axis.back();
  const int64_t extent = extent_of(last);
  // A channel block narrower than the vector (8 channels under AVX-512) runs
  // as one narrower vector: still whole loads, no gathers.
  if (extent >= 4 && extent < vector_lanes && vector_lanes % extent == 0) vector_lanes = extent;
  if (vector_lanes <= 1 || extent < vector_lanes || extent % vector_lanes != 0 ||
      extent > 4 * vector_lanes || !contiguous_along(s, last->var))
    return false;
  std::vector<ir::IterVar> outer(axis.begin(), axis.end() - 1);
  // The innermost spatial loop (a pool's output column) stays its own loop
  // when the loops outside it give the threads enough rows: its index then
  // needs no division, and a window's bounds tests, which read only that
  // column and the rows outside it, are unswitched per column
  // (schedule/unswitch_selects.h) instead of blending every tap of every
  // vector (MaxPool 3x3 ran ~150 instructions per output vector).
  ir::IterVar column;
  if (outer.size() >= 2 && extent_of(outer.back()) > 1) {
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < outer.size(); ++d) rows *= extent_of(outer[d]);
    if (rows >= kMinParallelRows) {
      column = outer.back();
      outer.pop_back();
    }
  }
  rows_before_channel_blocks(s, outer, rows_first);
  ir::IterVar fused;
  if (!outer.empty()) fused = outer.size() == 1 ? outer[0] : s->fuse(outer);
  auto [lo, li] = s->split(last, vector_lanes);
  std::vector<ir::IterVar> order;
  if (fused) order.push_back(fused);
  if (column) order.push_back(column);
  for (const ir::IterVar& r : s->op->reduce_axis) order.push_back(r);
  order.push_back(lo);
  order.push_back(li);
  s->reorder(order);
  s->vectorize(li);
  if (extent > vector_lanes) s->unroll(lo);
  // A small window's taps unrolled: each tap's bounds test then reads only
  // the loops outside the taps, so unswitching can resolve it.
  if (column)
    for (const ir::IterVar& r : s->op->reduce_axis)
      if (extent_of(r) > 1 && extent_of(r) <= kMaxUnrolledTaps) s->unroll(r);
  if (fused && parallel) s->parallel(fused);
  return true;
}

// Iterations of a stage's whole loop nest, reductions included: what a
// reduction stage's parallel launch is paid from.
int64_t work_of(const Stage& s) {
  int64_t n = spatial_elements(s);
  for (auto& r : s->op->reduce_axis) n *= extent_of(r);
  return n;
}

}  // namespace

namespace {

void schedule_loops_impl(const Stage& s, int64_t vector_lanes, bool may_parallel,
                         bool rows_first = false) {
  const auto& axis = s->op->axis;
  if (axis.empty()) return;
  bool parallel = may_parallel && spatial_elements(s) >= kMinParallelElements;
  if (!s->op->reduce_axis.empty()) {
    // A reduction's loop nest covers its reduce loops too: 512 softmax rows
    // of 128 are 64K iterations, worth two threads although only 512 outputs.
    parallel = may_parallel && work_of(s) >= kMinParallelElements && spatial_elements(s) > 1;
    if (vectorize_reduction(s, vector_lanes, parallel, rows_first)) return;
    // The innermost spatial loop stays its own loop: indices inside the
    // reduction then need no division by the fused extents.
    std::vector<ir::IterVar> outer(axis.begin(), axis.end() - (axis.size() > 1 ? 1 : 0));
    rows_before_channel_blocks(s, outer, rows_first);
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
  rows_before_channel_blocks(s, outer, rows_first);
  fuse_leading_and_parallelize(s, outer, parallel);
}

std::vector<int64_t> static_shape_of(const Stage& s) {
  std::vector<int64_t> shape;
  for (const ir::Expr& e : s->op->shape) {
    const int64_t* c = ir::as_const_int(e);
    shape.push_back(c ? *c : -1);
  }
  return shape;
}

// The row dims of a normalization-like group: the D leading dims of the
// output such that every other computed stage is a per-row statistic (its
// first rank(out) dims are the output's for d < D and 1 from D on; row
// partials carry one more dim). 0 when the stages do not have that form, or
// when D would cover the whole output (a pooling window is not a row).
size_t row_dims(const Stage& out, const std::vector<Stage>& stats) {
  const std::vector<int64_t> o = static_shape_of(out);
  size_t D = 0;
  for (const Stage& s : stats) {
    std::vector<int64_t> sh = static_shape_of(s);
    if (sh.size() < o.size() || sh.size() > o.size() + 1) return 0;
    size_t d = o.size();
    while (d > 0 && sh[d - 1] == 1) --d;
    D = std::max(D, d);
  }
  if (D == 0 || D >= o.size()) return 0;
  for (const Stage& s : stats) {
    std::vector<int64_t> sh = static_shape_of(s);
    for (size_t d = 0; d < o.size(); ++d)
      if (d < D ? sh[d] != o[d] || o[d] < 0 : sh[d] != 1) return 0;
  }
  return D;
}

// Whether an expression calls an intrinsic (exp, erf, tanh, ...); a run-time
// index check (a compare and an OR) does not count.
bool calls_intrinsic(const ir::Expr& e) {
  class Finder : public ir::IRVisitor {
   public:
    bool found = false;

   protected:
    void visit_call(const ir::CallNode* op) override {
      found = found || op->op != ir::Intrinsic::CheckIndex;
      ir::IRVisitor::visit_call(op);
    }
  } f;
  f.visit(e);
  return f.found;
}

// A full-size injective stage of a row kernel that a row statistic and at
// least one other stage read, and that calls an intrinsic: Softmax's
// exp(x - max), read by the row sum and by the scaling. Inlined, its
// intrinsic would run once per reader, and once per lane of a row
// reduction's combine loop (whose select evaluates both sides); computed
// once per row into a row buffer, it runs once per element.
bool is_shared_row_stage(const schedule::Schedule& sch, const Stage& s,
                         const std::vector<Stage>& reductions) {
  if (!calls_intrinsic(s->op->body)) return false;
  int readers = 0;
  bool read_by_reduction = false;
  for (const Stage& t : sch.stages()) {
    if (t->is_placeholder()) continue;
    for (const ir::Tensor& in : ir::input_tensors(t->op)) {
      if (in != s->op) continue;
      ++readers;
      read_by_reduction = read_by_reduction ||
                          std::find(reductions.begin(), reductions.end(), t) != reductions.end();
      break;
    }
  }
  return read_by_reduction && readers >= 2;
}

// Softmax, LayerNorm, ReduceMean and global pooling as one row kernel: the
// output's D row dims fused into one parallel loop, and every statistic
// (row maxima, sums, their vector partials, mean and 1/std) computed inside
// it for the current row only. A row is read by each pass while it is still
// in L1, instead of one full pass over the tensor per statistic with a
// parallel launch each; 1/std is computed once per row, not per element.
// at_row: the stages computed inside the row loop, in producer order: the
// statistics and the shared row stages (is_shared_row_stage).
bool schedule_rows(const Stage& out, const std::vector<Stage>& stats,
                   const std::vector<Stage>& at_row, int64_t vector_lanes) {
  if (!out->op->reduce_axis.empty() || stats.empty()) return false;
  const size_t D = row_dims(out, stats);
  if (D == 0) return false;
  const auto& axis = out->op->axis;
  std::vector<ir::IterVar> rows(axis.begin(), axis.begin() + static_cast<std::ptrdiff_t>(D));
  ir::IterVar row = rows.size() == 1 ? rows[0] : out->fuse(rows);
  std::vector<ir::IterVar> inner(axis.begin() + static_cast<std::ptrdiff_t>(D), axis.end());
  ir::IterVar last = inner.back();
  if (extent_of(last) >= vector_lanes) {
    auto [lo, li] = out->split(last, vector_lanes);
    (void)lo;
    out->vectorize(li);
  }
  int64_t n_rows = 1;
  for (size_t d = 0; d < D; ++d) n_rows *= extent_of(axis[d]);
  if (spatial_elements(out) >= kMinParallelElements && n_rows > 1) out->parallel(row);
  for (const Stage& s : at_row) {
    schedule_loops_impl(s, vector_lanes, false);
    s->compute_at(out, row);
  }
  return true;
}

// A normalization over a dim that is not innermost, as NCHW[b]c holds a
// pixel's channels: C/b vectors of b lanes (kiln.ChannelNorm). Every
// statistic has the output's rank (plus one trailing dim for lane
// partials) and, at each dim, the output's extent (a "pixel" dim) or 1 (a
// normalized dim), and the innermost dim is a normalized one. Then the
// output's loops are reordered pixel dims first, those fused into one
// parallel loop, and every statistic computed inside it for the current
// pixel only: one pass over the tensor with a pixel's channels in L1,
// instead of a parallel pass per statistic.
// pixel_row_kinds: per output dim, 1 a pixel dim, 2 a normalized one, 0 of
// extent 1; empty when the stages do not have that form (Softmax over
// NCHW's channels: its innermost dim is a pixel dim, so it keeps its
// schedule).
std::vector<int> pixel_row_kinds(const Stage& out, const std::vector<Stage>& stats) {
  if (!out->op->reduce_axis.empty() || stats.empty()) return {};
  const std::vector<int64_t> o = static_shape_of(out);
  const size_t R = o.size();
  if (R < 2) return {};
  std::vector<int> kind(R, 0);
  for (const Stage& s : stats) {
    std::vector<int64_t> sh = static_shape_of(s);
    if (sh.size() != R && sh.size() != R + 1) return {};
    for (size_t d = 0; d < R; ++d) {
      if (o[d] < 0) return {};
      if (o[d] == 1) continue;
      int k = sh[d] == o[d] ? 1 : sh[d] == 1 ? 2 : 0;
      if (k == 0 || (kind[d] && kind[d] != k)) return {};
      kind[d] = k;
    }
  }
  if (kind[R - 1] != 2 || std::find(kind.begin(), kind.end(), 1) == kind.end()) return {};
  return kind;
}

void schedule_pixel_rows(const Stage& out, const std::vector<Stage>& stats,
                         const std::vector<int>& kind, int64_t vector_lanes) {
  const std::vector<int64_t> o = static_shape_of(out);
  const size_t R = o.size();
  const auto& axis = out->op->axis;
  std::vector<ir::IterVar> pixel, normalized;
  for (size_t d = 0; d < R; ++d) (kind[d] == 1 ? pixel : normalized).push_back(axis[d]);
  std::vector<ir::IterVar> order = pixel;
  order.insert(order.end(), normalized.begin(), normalized.end());
  out->reorder(order);
  ir::IterVar px = pixel.size() == 1 ? pixel[0] : out->fuse(pixel);
  ir::IterVar last = axis[R - 1];
  int64_t lanes = vector_lanes;
  const int64_t extent = extent_of(last);
  // A block narrower than the vector runs as one narrower vector.
  if (extent >= 4 && extent < lanes && lanes % extent == 0) lanes = extent;
  if (extent >= lanes && extent % lanes == 0) {
    auto [lo, li] = out->split(last, lanes);
    (void)lo;
    out->vectorize(li);
  }
  int64_t n_pixels = 1;
  for (size_t d = 0; d < R; ++d)
    if (kind[d] == 1) n_pixels *= o[d];
  if (spatial_elements(out) >= kMinParallelElements && n_pixels > 1) out->parallel(px);
  for (const Stage& s : stats) {
    schedule_loops_impl(s, vector_lanes, false);
    s->compute_at(out, px);
  }
}

}  // namespace

void schedule_loops(const Stage& s, int64_t vector_lanes, bool rows_first) {
  schedule_loops_impl(s, vector_lanes, true, rows_first);
}

schedule::Schedule schedule_generic(const std::vector<ir::Tensor>& outputs, int64_t vector_lanes,
                                    bool rows_first) {
  schedule::Schedule sch = schedule::create_schedule(outputs);
  std::vector<Stage> outs, reductions, injective;
  for (const Stage& s : sch.stages()) {
    if (s->is_placeholder()) continue;
    if (s->is_output)
      outs.push_back(s);
    else if (s->op->reduce_axis.empty())
      injective.push_back(s);
    else
      reductions.push_back(s);
  }
  // A row kernel also keeps the per-row stages between the reductions (mean,
  // 1/std) as stages of their own inside the row loop.
  if (outs.size() == 1 && !reductions.empty()) {
    std::vector<Stage> stats = reductions, row_injective, inlined, shared;
    const std::vector<int64_t> o = static_shape_of(outs[0]);
    for (const Stage& s : injective) {
      std::vector<int64_t> sh = static_shape_of(s);
      if (sh.size() == o.size() && sh != o)
        row_injective.push_back(s);
      else if (sh == o && is_shared_row_stage(sch, s, reductions))
        shared.push_back(s);
      else
        inlined.push_back(s);
    }
    std::vector<Stage> all = stats;
    all.insert(all.end(), row_injective.begin(), row_injective.end());
    // Stage order (producers first) decides the order inside the row loop.
    auto in_stage_order = [&](const std::vector<Stage>& set) {
      std::vector<Stage> ordered;
      for (const Stage& s : sch.stages())
        if (std::find(set.begin(), set.end(), s) != set.end()) ordered.push_back(s);
      return ordered;
    };
    std::vector<Stage> ordered = in_stage_order(all);
    all.insert(all.end(), shared.begin(), shared.end());
    if (row_dims(outs[0], ordered) > 0) {
      for (const Stage& s : inlined) s->compute_inline();
      schedule_rows(outs[0], ordered, in_stage_order(all), vector_lanes);
      return sch;
    }
    inlined.insert(inlined.end(), shared.begin(), shared.end());
    std::vector<int> kinds = pixel_row_kinds(outs[0], ordered);
    if (!kinds.empty()) {
      for (const Stage& s : inlined) s->compute_inline();
      schedule_pixel_rows(outs[0], ordered, kinds, vector_lanes);
      return sch;
    }
  }
  for (const Stage& s : sch.stages()) {
    if (s->is_placeholder()) continue;
    if (!s->is_output && s->op->reduce_axis.empty()) {
      s->compute_inline();
      continue;
    }
    schedule_loops(s, vector_lanes, rows_first);
  }
  return sch;
}

}  // namespace kiln::ops
