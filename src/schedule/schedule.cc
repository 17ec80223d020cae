#include "schedule/schedule.h"

#include <algorithm>
#include <stdexcept>

#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

[[noreturn]] void fail(const StageNode& s, const std::string& what) {
  throw std::invalid_argument("schedule of '" + s.op->name + "': " + what);
}

int64_t const_extent(const IterVar& iv) {
  const int64_t* v = as_const_int(iv->dom.extent);
  if (!v)
    throw std::invalid_argument("iteration variable '" + iv->var.name() +
                                "' has a non-constant extent");
  return *v;
}

IterVar derived(const IterVar& parent, const std::string& suffix, int64_t extent) {
  return make_iter_var(Range{make_int(0), make_int(extent)}, parent->var.name() + suffix,
                       parent->kind);
}

// Copies t's definition with fresh iteration variables, so that two stages
// never share loops.
Tensor clone_compute(const Tensor& t, const std::string& name) {
  std::vector<std::pair<Var, Expr>> sub;
  auto fresh = [&](const IterVar& iv) {
    auto n = make_iter_var(iv->dom, iv->var.name(), iv->kind);
    sub.emplace_back(iv->var, n->var);
    return n;
  };
  auto c = std::make_shared<TensorNode>(*t);
  c->name = name;
  c->axis.clear();
  c->reduce_axis.clear();
  for (auto& iv : t->axis) c->axis.push_back(fresh(iv));
  for (auto& iv : t->reduce_axis) c->reduce_axis.push_back(fresh(iv));
  if (auto* r = t->body.as<ReduceNode>()) {
    c->body = make_expr<ReduceNode>(r->op, substitute(r->source, sub), c->reduce_axis, r->identity);
  } else {
    c->body = substitute(t->body, sub);
  }
  return c;
}

// A copy stage: out(i...) = in(i...).
Tensor identity_compute(const Tensor& in, const std::vector<Expr>& shape, const std::string& name) {
  return compute(
      shape,
      [&](const std::vector<Var>& i) { return read(in, std::vector<Expr>(i.begin(), i.end())); },
      name);
}

// Rewrites reads of `from` into reads of `to` in t's body (same iteration variables).
Tensor replace_reads(const Tensor& t, const Tensor& from, const Tensor& to) {
  auto c = std::make_shared<TensorNode>(*t);
  c->body = replace_tensor_reads(t->body, from, [&](const std::vector<Expr>& idx) {
    return make_expr<TensorReadNode>(to, idx);
  });
  return c;
}

}  // namespace

// ---- Stage primitives -----------------------------------------------------------

size_t StageNode::leaf_position(const IterVar& iv) const {
  auto it = std::find(leaf_iter_vars.begin(), leaf_iter_vars.end(), iv);
  if (it == leaf_iter_vars.end())
    fail(*this, "'" + (iv ? iv->var.name() : std::string("null")) + "' is not a current loop");
  return static_cast<size_t>(it - leaf_iter_vars.begin());
}

std::pair<IterVar, IterVar> StageNode::split(const IterVar& iv, int64_t factor) {
  size_t pos = leaf_position(iv);
  if (factor < 1) fail(*this, "split factor must be positive");
  int64_t ext = const_extent(iv);
  IterVar outer = derived(iv, ".o", (ext + factor - 1) / factor);
  IterVar inner = derived(iv, ".i", factor);
  relations.push_back({IterRelation::Split, iv, outer, inner, nullptr, factor, 0});
  leaf_iter_vars[pos] = outer;
  leaf_iter_vars.insert(leaf_iter_vars.begin() + pos + 1, inner);
  return {outer, inner};
}

std::pair<IterVar, IterVar> StageNode::split_nparts(const IterVar& iv, int64_t nparts) {
  size_t pos = leaf_position(iv);
  if (nparts < 1) fail(*this, "split nparts must be positive");
  int64_t ext = const_extent(iv);
  int64_t factor = (ext + nparts - 1) / nparts;
  IterVar outer = derived(iv, ".o", nparts);
  IterVar inner = derived(iv, ".i", factor);
  relations.push_back({IterRelation::Split, iv, outer, inner, nullptr, factor, nparts});
  leaf_iter_vars[pos] = outer;
  leaf_iter_vars.insert(leaf_iter_vars.begin() + pos + 1, inner);
  return {outer, inner};
}

std::vector<IterVar> StageNode::tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy) {
  auto [xo, xi] = split(x, fx);
  auto [yo, yi] = split(y, fy);
  reorder({xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

void StageNode::reorder(const std::vector<IterVar>& order) {
  std::vector<size_t> positions;
  for (auto& iv : order) positions.push_back(leaf_position(iv));
  std::vector<size_t> sorted = positions;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(*this, "reorder names a loop twice");
  for (size_t i = 0; i < order.size(); ++i) leaf_iter_vars[sorted[i]] = order[i];
}

IterVar StageNode::fuse(const IterVar& outer, const IterVar& inner) {
  size_t po = leaf_position(outer), pi = leaf_position(inner);
  if (pi != po + 1) fail(*this, "fuse needs adjacent loops, outer first");
  if (outer->kind != inner->kind) fail(*this, "cannot fuse a data axis with a reduce axis");
  IterVar fused =
      make_iter_var(Range{make_int(0), make_int(const_extent(outer) * const_extent(inner))},
                    outer->var.name() + "." + inner->var.name() + ".f", outer->kind);
  relations.push_back({IterRelation::Fuse, nullptr, outer, inner, fused, 0, 0});
  leaf_iter_vars[po] = fused;
  leaf_iter_vars.erase(leaf_iter_vars.begin() + pi);
  return fused;
}

IterVar StageNode::fuse(const std::vector<IterVar>& adjacent) {
  if (adjacent.empty()) fail(*this, "fuse of no loops");
  IterVar acc = adjacent[0];
  for (size_t i = 1; i < adjacent.size(); ++i) acc = fuse(acc, adjacent[i]);
  return acc;
}

void StageNode::vectorize(const IterVar& iv) {
  leaf_position(iv);
  annotations[iv.get()] = IterAnnotation::Vectorize;
}
void StageNode::unroll(const IterVar& iv) {
  leaf_position(iv);
  annotations[iv.get()] = IterAnnotation::Unroll;
}
void StageNode::keep_rolled(const IterVar& iv) {
  leaf_position(iv);
  annotations[iv.get()] = IterAnnotation::KeepRolled;
}
void StageNode::parallel(const IterVar& iv) {
  leaf_position(iv);
  if (iv->kind == IterKind::Reduce) fail(*this, "a reduce loop cannot be parallel");
  annotations[iv.get()] = IterAnnotation::Parallel;
}

void StageNode::compute_at(const Stage& parent, const IterVar& ivar) {
  if (is_output) fail(*this, "an output cannot be computed inside another stage");
  parent->leaf_position(ivar);
  attach = AttachKind::At;
  attach_stage = parent;
  attach_ivar = ivar;
}

void StageNode::compute_inline() {
  if (is_output) fail(*this, "an output cannot be inlined");
  if (!op->reduce_axis.empty()) fail(*this, "a reduction cannot be inlined");
  attach = AttachKind::Inline;
}

void StageNode::compute_root() { attach = AttachKind::Root; }

void StageNode::set_scope(MemScope s) {
  scope = s;
  scope_set = true;
}

const IterVar& StageNode::axis(size_t d) const {
  if (d >= op->axis.size()) fail(*this, "no axis " + std::to_string(d));
  return op->axis[d];
}
const IterVar& StageNode::reduce_axis(size_t d) const {
  if (d >= op->reduce_axis.size()) fail(*this, "no reduce axis " + std::to_string(d));
  return op->reduce_axis[d];
}

// ---- Schedule ---------------------------------------------------------------------

Schedule::Schedule(std::vector<Tensor> outputs) : outputs_(std::move(outputs)) {
  for (auto& t : post_order(outputs_)) add_stage(t, t, stages_.size());
  for (auto& t : outputs_) (*this)[t]->is_output = true;
}

Schedule create_schedule(std::vector<Tensor> outputs) { return Schedule(std::move(outputs)); }

Stage Schedule::add_stage(const Tensor& origin, const Tensor& op, size_t position) {
  auto s = std::make_shared<StageNode>();
  s->origin = origin;
  s->op = op;
  s->root_iter_vars = op->axis;
  s->root_iter_vars.insert(s->root_iter_vars.end(), op->reduce_axis.begin(), op->reduce_axis.end());
  s->leaf_iter_vars = s->root_iter_vars;
  stages_.insert(stages_.begin() + position, s);
  by_tensor_[origin.get()] = s;
  return s;
}

Stage Schedule::operator[](const Tensor& t) const {
  auto it = by_tensor_.find(t.get());
  if (it == by_tensor_.end())
    throw std::invalid_argument("tensor '" + t->name + "' is not part of this schedule");
  return it->second;
}

std::vector<Stage> Schedule::readers_of(const Tensor& t) const {
  std::vector<Stage> out;
  for (auto& s : stages_) {
    for (auto& in : input_tensors(s->op))
      if (in == t) out.push_back(s);
  }
  return out;
}

Tensor Schedule::cache_write(const Tensor& t, MemScope scope) {
  Stage st = (*this)[t];
  if (st->is_placeholder())
    throw std::invalid_argument("cache_write of placeholder '" + t->name + "'");
  if (!st->relations.empty())
    throw std::invalid_argument("cache_write of '" + t->name + "' after it was split or fused");
  const char* suffix = scope == MemScope::Local ? ".local" : ".global";
  Tensor cache = clone_compute(st->op, st->op->name + suffix);
  auto pos = std::find(stages_.begin(), stages_.end(), st) - stages_.begin();
  Stage cs = add_stage(cache, cache, static_cast<size_t>(pos));
  cs->set_scope(scope);
  // t's stage now copies the cache out, over fresh data-parallel loops.
  Tensor copy = identity_compute(cache, st->op->shape, st->op->name);
  st->op = copy;
  st->root_iter_vars = copy->axis;
  st->leaf_iter_vars = copy->axis;
  st->annotations.clear();
  return cache;
}

Tensor Schedule::cache_read(const Tensor& t, MemScope scope, const std::vector<Tensor>& readers) {
  Stage src = (*this)[t];
  const char* suffix = scope == MemScope::Local ? ".local" : ".shared";
  Tensor cache = identity_compute(t, src->op->shape, t->name + suffix);
  size_t pos =
      static_cast<size_t>(std::find(stages_.begin(), stages_.end(), src) - stages_.begin()) + 1;
  Stage cs = add_stage(cache, cache, pos);
  cs->set_scope(scope);
  for (auto& r : readers) {
    Stage rs = (*this)[r];
    rs->op = replace_reads(rs->op, t, cache);
  }
  return cache;
}

}  // namespace kiln::schedule
