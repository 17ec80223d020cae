#include "schedule/schedule_ops.h"

#include <algorithm>
#include <stdexcept>

#include "ir/functor.h"
#include "schedule/lower_context.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

ForKind for_kind_of(const StageNode& s, const IterVar& iv) {
  auto it = s.annotations.find(iv.get());
  if (it == s.annotations.end()) return ForKind::Serial;
  switch (it->second) {
    case IterAnnotation::Parallel: return ForKind::Parallel;
    case IterAnnotation::Vectorize: return ForKind::Vectorized;
    case IterAnnotation::Unroll: return ForKind::Unrolled;
    case IterAnnotation::KeepRolled: return ForKind::Rolled;
    default: return ForKind::Serial;
  }
}

Expr conjunction(const std::vector<Expr>& conds) {
  Expr c;
  for (auto& x : conds) c = c ? logical_and(c, x) : x;
  return c;
}

Stmt guarded(const std::vector<Expr>& conds, Stmt body) {
  Expr c = conjunction(conds);
  return c ? make_if(c, std::move(body)) : body;
}

Expr combine(ReduceOp op, Expr acc, Expr v) {
  switch (op) {
    case ReduceOp::Sum: return acc + v;
    case ReduceOp::Max: return max(acc, v);
    case ReduceOp::Min: return min(acc, v);
    case ReduceOp::Prod: return acc * v;
  }
  return Expr();
}

// Renames loop variables, in loop headers and in uses.
Stmt rename_loop_vars(const Stmt& s, const std::vector<std::pair<Var, Var>>& names) {
  class Renamer : public IRMutator {
   public:
    explicit Renamer(const std::vector<std::pair<Var, Var>>& m) : m_(m) {}

   protected:
    Expr mutate_var(const Expr& e, const VarNode* op) override {
      for (auto& [from, to] : m_)
        if (from.get() == op) return to;
      return e;
    }
    Stmt mutate_for(const Stmt& st, const ForNode* op) override {
      Stmt body = mutate(op->body);
      Var v = op->var;
      for (auto& [from, to] : m_)
        if (from == op->var) v = to;
      return make_for(v, mutate(op->min), mutate(op->extent), op->for_kind, body);
    }

   private:
    const std::vector<std::pair<Var, Var>>& m_;
  } renamer(names);
  return renamer.mutate(s);
}

class NestBuilder {
 public:
  explicit NestBuilder(LowerContext& ctx) : ctx_(ctx) {
    for (auto& s : ctx.sch->stages()) {
      if (s->attach != AttachKind::At) continue;
      attached_[{s->attach_stage.lock().get(), s->attach_ivar.get()}].push_back(s);
    }
  }

  // The loop nest computing stage s over its inferred region.
  Stmt build(const Stage& s);

  // Realize(s, region) { body }.
  Stmt realize(const Stage& s, Stmt body) const {
    const StageBounds& b = ctx_.bounds.at(s.get());
    std::vector<Range> bounds;
    for (size_t d = 0; d < ctx_.definition(s)->axis.size(); ++d)
      bounds.push_back(Range{b.min[d], make_int(b.extent[d])});
    MemScope scope = s->scope;
    if (!s->scope_set) {
      int64_t bytes = ctx_.definition(s)->dtype.bytes();
      for (auto e : b.extent) bytes *= e;
      scope =
          s->attach == AttachKind::At && bytes <= 32 * 1024 ? MemScope::Local : MemScope::Global;
    }
    if (scope == MemScope::Local && !bounds.empty()) pad_for_vector_tail(s, bounds.back());
    return make_stmt<RealizeNode>(s->origin, std::move(bounds), scope, std::move(body));
  }

 private:
  // A vectorized loop whose split does not divide the extent writes a Local
  // buffer on every lane of its last vector (vectorize_loops: Local buffers
  // are not predicated), so the innermost dim is padded to a whole number of
  // vectors: Softmax's row buffer of 197 floats takes 208.
  void pad_for_vector_tail(const Stage& s, Range& innermost) const {
    const StageLoops& L = ctx_.loops.at(s.get());
    int64_t lanes = 1;
    for (const IterVar& iv : s->leaf_iter_vars)
      if (for_kind_of(*s, iv) == ForKind::Vectorized)
        lanes = std::max(lanes, L.extent.at(iv.get()));
    const int64_t* extent = as_const_int(innermost.extent);
    if (lanes > 1 && extent && *extent % lanes != 0)
      innermost.extent = make_int((*extent + lanes - 1) / lanes * lanes);
  }

  // Stages computed at the start of loop iv of s, each realized around the rest.
  Stmt with_attached(const Stage& s, const IterVar& iv, Stmt body) {
    auto it = attached_.find({s.get(), iv.get()});
    if (it == attached_.end()) return body;
    const auto& list = it->second;
    for (auto p = list.rbegin(); p != list.rend(); ++p)
      body = realize(*p, make_seq({build(*p), body}));
    return body;
  }

  // Loops over leaves [from, to) of s around body, innermost first.
  Stmt wrap_loops(const Stage& s, size_t from, size_t to, Stmt body, bool data_only, bool attach) {
    const StageLoops& L = ctx_.loops.at(s.get());
    for (size_t i = to; i-- > from;) {
      const IterVar& iv = s->leaf_iter_vars[i];
      if (data_only && iv->kind == IterKind::Reduce) continue;
      if (attach) body = with_attached(s, iv, body);
      body = make_for(iv->var, make_int(0), make_int(L.extent.at(iv.get())), for_kind_of(*s, iv),
                      body);
    }
    return body;
  }

  LowerContext& ctx_;
  std::map<std::pair<const StageNode*, const IterVarNode*>, std::vector<Stage>> attached_;
};

Stmt NestBuilder::build(const Stage& s) {
  const Tensor& def = ctx_.definition(s);
  const StageLoops& L = ctx_.loops.at(s.get());
  const StageBounds& b = ctx_.bounds.at(s.get());

  // Coordinates of the element computed, in leaf loop variables.
  std::vector<std::pair<Var, Expr>> coords;
  std::vector<Expr> out_index;
  std::vector<Expr> data_guards = L.data_guards;
  for (size_t r = 0; r < s->root_iter_vars.size(); ++r) {
    const IterVar& iv = s->root_iter_vars[r];
    Expr c = b.min[r] + L.value.at(iv.get());
    coords.emplace_back(iv->var, c);
    if (r < def->axis.size()) {
      out_index.push_back(c);
      if (b.may_exceed[r]) {
        data_guards.push_back(c >= make_int(0));
        data_guards.push_back(c < def->shape[r]);
      }
    }
  }

  size_t n = s->leaf_iter_vars.size();
  auto* red = def->body.as<ReduceNode>();
  if (!red) {
    Stmt store = make_stmt<TensorStoreNode>(s->origin, out_index, substitute(def->body, coords));
    return wrap_loops(s, 0, n, guarded(data_guards, store), false, true);
  }

  // Reduction: the accumulator is initialized just outside the first loop
  // that a reduce axis drives, over the data loops inside that point.
  size_t p = 0;
  while (p < n && s->leaf_iter_vars[p]->kind != IterKind::Reduce) ++p;
  Expr acc = make_expr<TensorReadNode>(s->origin, out_index);
  Expr update_value = combine(red->op, acc, substitute(red->source, coords));
  std::vector<Expr> all_guards = data_guards;
  all_guards.insert(all_guards.end(), L.reduce_guards.begin(), L.reduce_guards.end());
  Stmt update = guarded(all_guards, make_stmt<TensorStoreNode>(s->origin, out_index, update_value));
  Stmt update_nest = wrap_loops(s, p, n, update, false, true);

  Stmt init = guarded(data_guards, make_stmt<TensorStoreNode>(s->origin, out_index,
                                                              cast(def->dtype, red->identity)));
  Stmt init_nest = wrap_loops(s, p, n, init, true, false);
  // The init nest gets fresh copies of its loop variables: each loop binds its own.
  std::vector<std::pair<Var, Var>> fresh;
  for (size_t i = p; i < n; ++i) {
    const IterVar& iv = s->leaf_iter_vars[i];
    if (iv->kind != IterKind::Reduce) fresh.emplace_back(iv->var, Var(iv->var.name() + ".init"));
  }
  init_nest = rename_loop_vars(init_nest, fresh);
  return wrap_loops(s, 0, p, make_seq({init_nest, update_nest}), false, true);
}

}  // namespace

Stmt schedule_ops(const Schedule& sch) {
  LowerContext ctx;
  ctx.sch = &sch;
  inline_stages(ctx);
  infer_bounds(ctx);
  NestBuilder builder(ctx);

  // Root stages in producer order; each intermediate is realized around the
  // statements that follow it.
  std::vector<Stage> roots;
  for (auto& s : sch.stages())
    if (!s->is_placeholder() && s->attach == AttachKind::Root) roots.push_back(s);
  Stmt body;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
    Stmt nest = builder.build(*it);
    body = body ? make_seq({nest, body}) : nest;
    if (!(*it)->is_output) body = builder.realize(*it, body);
  }
  if (!body) throw std::invalid_argument("schedule has nothing to compute");
  return body;
}

}  // namespace kiln::schedule
