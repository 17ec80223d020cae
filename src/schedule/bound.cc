// Bound inference: which region of each stage must be computed.
//
// Outputs and root stages compute their whole shape. A stage attached inside
// a consumer's loop computes the union of what its readers touch during one
// iteration of that loop: loops outside (and at) the attach point are fixed,
// loops inside range over their whole extent. Index expressions are evaluated
// over those ranges with interval arithmetic; the extent must come out a
// constant (or have a constant upper bound), since it sizes a buffer.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "ir/functor.h"
#include "ir/simplify.h"
#include "schedule/lower_context.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

struct Interval {
  Expr min, max;  // inclusive
};
using IntervalMap = std::map<const VarNode*, Interval>;

std::optional<Interval> eval_interval(const Expr& e, const IntervalMap& vars);

std::optional<Interval> eval_binary(const BinaryNode* op, const IntervalMap& vars) {
  auto a = eval_interval(op->a, vars);
  auto b = eval_interval(op->b, vars);
  if (!a || !b) return std::nullopt;
  const int64_t* cb = as_const_int(op->b);
  bool a_point = a->min.same_as(a->max), b_point = b->min.same_as(b->max);
  // A point stays one shared expression, so that max - min simplifies to 0.
  if (a_point && b_point) {
    Expr v = make_binary(op->kind, a->min, b->min);
    return Interval{v, v};
  }
  switch (op->kind) {
    case ExprKind::Add: return Interval{a->min + b->min, a->max + b->max};
    case ExprKind::Sub: return Interval{a->min - b->max, a->max - b->min};
    case ExprKind::Mul:
      if (cb)
        return *cb >= 0 ? Interval{a->min * op->b, a->max * op->b}
                        : Interval{a->max * op->b, a->min * op->b};
      if (const int64_t* ca = as_const_int(op->a))
        return *ca >= 0 ? Interval{op->a * b->min, op->a * b->max}
                        : Interval{op->a * b->max, op->a * b->min};
      return std::nullopt;
    case ExprKind::FloorDiv:
      if (cb && *cb > 0) return Interval{floordiv(a->min, op->b), floordiv(a->max, op->b)};
      break;
    case ExprKind::Div:  // truncating, and as floordiv non-decreasing in a for b > 0
      if (cb && *cb > 0 && op->dtype.is_integer()) return Interval{a->min / op->b, a->max / op->b};
      break;
    case ExprKind::Mod:  // truncating: the sign of a
      if (cb && *cb > 0 && op->dtype.is_integer()) {
        const int64_t* lo = as_const_int(a->min);
        return Interval{make_int(lo && *lo >= 0 ? 0 : 1 - *cb), make_int(*cb - 1)};
      }
      break;
    case ExprKind::FloorMod:
      if (cb && *cb > 0) {
        return Interval{make_int(0), make_int(*cb - 1)};
      }
      break;
    case ExprKind::Min: return Interval{min(a->min, b->min), min(a->max, b->max)};
    case ExprKind::Max: return Interval{max(a->min, b->min), max(a->max, b->max)};
    default: break;
  }
  return std::nullopt;
}

std::optional<Interval> eval_interval(const Expr& e, const IntervalMap& vars) {
  if (auto* v = e.as<VarNode>()) {
    auto it = vars.find(v);
    if (it != vars.end()) return it->second;
    return Interval{e, e};
  }
  if (e.as<IntImmNode>()) return Interval{e, e};
  if (is_binary(e.kind())) return eval_binary(static_cast<const BinaryNode*>(e.get()), vars);
  if (auto* s = e.as<SelectNode>()) {
    auto t = eval_interval(s->true_value, vars), f = eval_interval(s->false_value, vars);
    if (!t || !f) return std::nullopt;
    if (t->min.same_as(t->max) && f->min.same_as(f->max) && t->min.same_as(f->min)) return t;
    return Interval{min(t->min, f->min), max(t->max, f->max)};
  }
  if (auto* c = e.as<CastNode>()) {
    if (c->dtype.is_integer() && c->value.dtype().is_integer())
      return eval_interval(c->value, vars);
  }
  // Anything else is a point if it mentions no ranged variable.
  bool ranged = false;
  post_order_visit(e, [&](const Expr& x) {
    if (auto* v = x.as<VarNode>()) ranged |= vars.count(v) > 0;
  });
  if (!ranged) return Interval{e, e};
  return std::nullopt;
}

int64_t shape_extent(const Tensor& t, size_t d) {
  const int64_t* v = as_const_int(t->shape[d]);
  if (!v) throw std::invalid_argument("tensor '" + t->name + "' has a non-constant shape");
  return *v;
}

// Whether stage q runs inside loop position k of stage s (directly or through
// a chain of attachments).
bool runs_inside(const Stage& q, const Stage& s, size_t k) {
  Stage cur = q;
  while (cur->attach == AttachKind::At) {
    Stage parent = cur->attach_stage.lock();
    size_t pos =
        std::find(parent->leaf_iter_vars.begin(), parent->leaf_iter_vars.end(), cur->attach_ivar) -
        parent->leaf_iter_vars.begin();
    if (parent == s) return pos >= k;
    cur = parent;
  }
  return false;
}

StageBounds full_bounds(const StageNode& s, const Tensor& def) {
  StageBounds b;
  for (size_t d = 0; d < def->axis.size(); ++d) {
    b.min.push_back(make_int(0));
    b.extent.push_back(shape_extent(def, d));
    b.may_exceed.push_back(false);
  }
  return b;
}

// The ranges of the loops that vary while `host` runs one iteration of its
// loop k: the host's loops inside k, and every loop of the reader and of the
// stages between the reader and the host (they run whole inside k). Loops at
// or outside k stay symbolic.
IntervalMap reader_ranges(const LowerContext& ctx, const Stage& reader, const Stage& host,
                          size_t k) {
  IntervalMap m;
  auto add = [&](const Stage& s, size_t from) {
    const StageLoops& L = ctx.loops.at(s.get());
    for (size_t i = from; i < s->leaf_iter_vars.size(); ++i) {
      const IterVar& iv = s->leaf_iter_vars[i];
      m[iv->var.get()] = Interval{make_int(0), make_int(L.extent.at(iv.get()) - 1)};
    }
  };
  add(host, k + 1);
  for (Stage cur = reader; cur != host; cur = cur->attach_stage.lock()) add(cur, 0);
  return m;
}

// Ranges of the host's loops outside the attach point, to bound a symbolic extent.
VarRanges host_ranges(const LowerContext& ctx, const Stage& host, size_t k) {
  VarRanges r;
  Stage cur = host;
  size_t limit = k;
  while (true) {
    const StageLoops& L = ctx.loops.at(cur.get());
    for (size_t i = 0; i <= limit && i < cur->leaf_iter_vars.size(); ++i) {
      const IterVar& iv = cur->leaf_iter_vars[i];
      r[iv->var] = ConstIntBound{0, L.extent.at(iv.get()) - 1};
    }
    if (cur->attach != AttachKind::At) break;
    Stage parent = cur->attach_stage.lock();
    limit =
        std::find(parent->leaf_iter_vars.begin(), parent->leaf_iter_vars.end(), cur->attach_ivar) -
        parent->leaf_iter_vars.begin();
    cur = parent;
  }
  return r;
}

StageBounds attached_bounds(LowerContext& ctx, const Stage& s) {
  const Tensor& def = ctx.definition(s);
  Stage host = s->attach_stage.lock();
  size_t k = std::find(host->leaf_iter_vars.begin(), host->leaf_iter_vars.end(), s->attach_ivar) -
             host->leaf_iter_vars.begin();
  size_t nd = def->axis.size();
  std::vector<std::optional<Interval>> region(nd);
  bool ok = true;
  for (const Stage& q : ctx.readers(s)) {
    if (q != host && !runs_inside(q, host, k)) {
      ok = false;
      break;
    }
    const StageLoops& L = ctx.loops.at(q.get());
    const StageBounds& qb = ctx.bounds.at(q.get());
    IntervalMap ranges = reader_ranges(ctx, q, host, k);
    std::vector<std::pair<Var, Expr>> coords;
    for (size_t r = 0; r < q->root_iter_vars.size(); ++r)
      coords.emplace_back(q->root_iter_vars[r]->var,
                          qb.min[r] + L.value.at(q->root_iter_vars[r].get()));
    post_order_visit(ctx.definition(q)->body, [&](const Expr& e) {
      auto* rd = e.as<TensorReadNode>();
      if (!ok || !rd || rd->tensor != s->origin) return;
      for (size_t d = 0; d < nd; ++d) {
        auto iv = eval_interval(substitute(rd->indices[d], coords), ranges);
        if (!iv) {
          ok = false;
          return;
        }
        region[d] =
            region[d] ? Interval{min(region[d]->min, iv->min), max(region[d]->max, iv->max)} : *iv;
      }
    });
    if (!ok) break;
  }
  StageBounds full = full_bounds(*s, def);
  if (!ok) return full;
  VarRanges outer = host_ranges(ctx, host, k);
  StageBounds b;
  for (size_t d = 0; d < nd; ++d) {
    if (!region[d]) {  // never read: compute nothing useful, but keep one element
      b.min.push_back(make_int(0));
      b.extent.push_back(1);
      b.may_exceed.push_back(false);
      continue;
    }
    Expr mn = simplify(region[d]->min, outer);
    Expr ext = simplify(region[d]->max - region[d]->min + 1, outer);
    const int64_t* c = as_const_int(ext);
    int64_t e = c ? *c : const_int_bound(ext, outer).max_value.value_or(full.extent[d]);
    if (e >= full.extent[d]) {
      b.min.push_back(make_int(0));
      b.extent.push_back(full.extent[d]);
      b.may_exceed.push_back(false);
      continue;
    }
    b.min.push_back(mn);
    b.extent.push_back(e);
    ConstIntBound lo = const_int_bound(mn, outer);
    bool in_shape =
        lo.min_value && *lo.min_value >= 0 && lo.max_value && *lo.max_value + e <= full.extent[d];
    b.may_exceed.push_back(!in_shape);
  }
  return b;
}

// Whether computing an attached stage past its tensor's shape along `axis`
// is harmless: every read it makes, at every coordinate its loops reach on
// that axis (the other axes kept in shape by their guards), stays inside a
// fully realized tensor. Then the extra elements are scratch in its own
// region-sized buffer, never read by anyone, and need no guard (which would
// otherwise sit in the innermost, often vectorized, loop).
bool overrun_is_harmless(const LowerContext& ctx, const Stage& s, const StageBounds& b,
                         const StageLoops& L, size_t axis) {
  Stage host = s->attach_stage.lock();
  size_t k = std::find(host->leaf_iter_vars.begin(), host->leaf_iter_vars.end(), s->attach_ivar) -
             host->leaf_iter_vars.begin();
  VarRanges ranges = host_ranges(ctx, host, k);
  for (auto& iv : s->leaf_iter_vars) ranges[iv->var] = ConstIntBound{0, L.extent.at(iv.get()) - 1};
  std::vector<std::pair<Var, Expr>> coords;
  const Tensor& def = ctx.definition(s);
  for (size_t r = 0; r < s->root_iter_vars.size(); ++r) {
    Expr c = b.min[r] + L.value.at(s->root_iter_vars[r].get());
    if (r != axis && r < b.may_exceed.size() && b.may_exceed[r])
      c = max(min(c, def->shape[r] - 1), make_int(0));  // what the guard allows
    coords.emplace_back(s->root_iter_vars[r]->var, c);
  }
  bool safe = true;
  post_order_visit(def->body, [&](const Expr& e) {
    auto* rd = e.as<TensorReadNode>();
    if (!safe || !rd) return;
    Stage src = (*ctx.sch)[rd->tensor];
    if (!src->is_placeholder() && src->attach != AttachKind::Root) {
      safe = false;  // its buffer holds only a region: no shape to check against
      return;
    }
    for (size_t d = 0; d < rd->indices.size() && safe; ++d) {
      ConstIntBound bound = const_int_bound(simplify(substitute(rd->indices[d], coords)), ranges);
      const int64_t* extent = as_const_int(rd->tensor->shape[d]);
      safe = extent && bound.min_value && *bound.min_value >= 0 && bound.max_value &&
             *bound.max_value < *extent;
    }
  });
  return safe;
}

}  // namespace

void infer_bounds(LowerContext& ctx) {
  const auto& stages = ctx.sch->stages();
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    const Stage& s = *it;
    if (s->is_placeholder() || s->attach == AttachKind::Inline) continue;
    const Tensor& def = ctx.definition(s);
    StageBounds b = s->attach == AttachKind::At ? attached_bounds(ctx, s) : full_bounds(*s, def);
    for (auto& iv : def->reduce_axis) {
      const int64_t* ext = as_const_int(iv->dom.extent);
      if (!ext)
        throw std::invalid_argument("reduce axis '" + iv->var.name() + "' of '" + def->name +
                                    "' has a non-constant extent");
      b.min.push_back(iv->dom.min);
      b.extent.push_back(*ext);
    }
    StageLoops loops = derive_stage_loops(*s, b.extent);
    // One axis at a time: each check sees the axes already freed unclamped,
    // so the last check to succeed covers all freed axes together.
    for (size_t d = 0; d < b.may_exceed.size(); ++d)
      if (b.may_exceed[d] && overrun_is_harmless(ctx, s, b, loops, d)) b.may_exceed[d] = false;
    ctx.loops[s.get()] = std::move(loops);
    ctx.bounds[s.get()] = std::move(b);
  }
}

}  // namespace kiln::schedule
