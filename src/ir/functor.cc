#include "ir/functor.h"

#include <stdexcept>

#include "ir/tensor.h"

namespace kiln::ir {

// ---- IRVisitor ----------------------------------------------------------------

void IRVisitor::visit(const Expr& e) {
  if (!e) return;
  switch (e.kind()) {
    case ExprKind::IntImm: return visit_int_imm(e.as<IntImmNode>());
    case ExprKind::FloatImm: return visit_float_imm(e.as<FloatImmNode>());
    case ExprKind::Var: return visit_var(e.as<VarNode>());
    case ExprKind::Not: return visit_not(e.as<NotNode>());
    case ExprKind::Select: return visit_select(e.as<SelectNode>());
    case ExprKind::Cast: return visit_cast(e.as<CastNode>());
    case ExprKind::Call: return visit_call(e.as<CallNode>());
    case ExprKind::Let: return visit_let(e.as<LetNode>());
    case ExprKind::Load: return visit_load(e.as<LoadNode>());
    case ExprKind::Ramp: return visit_ramp(e.as<RampNode>());
    case ExprKind::Broadcast: return visit_broadcast(e.as<BroadcastNode>());
    case ExprKind::TensorRead: return visit_tensor_read(e.as<TensorReadNode>());
    case ExprKind::Reduce: return visit_reduce(e.as<ReduceNode>());
    default: return visit_binary(static_cast<const BinaryNode*>(e.get()));
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s.kind()) {
    case StmtKind::For: return visit_for(s.as<ForNode>());
    case StmtKind::Store: return visit_store(s.as<StoreNode>());
    case StmtKind::Allocate: return visit_allocate(s.as<AllocateNode>());
    case StmtKind::LetStmt: return visit_let_stmt(s.as<LetStmtNode>());
    case StmtKind::IfThenElse: return visit_if(s.as<IfThenElseNode>());
    case StmtKind::Seq: return visit_seq(s.as<SeqNode>());
    case StmtKind::Evaluate: return visit_evaluate(s.as<EvaluateNode>());
    case StmtKind::TensorStore: return visit_tensor_store(s.as<TensorStoreNode>());
    case StmtKind::Realize: return visit_realize(s.as<RealizeNode>());
  }
}

void IRVisitor::visit_binary(const BinaryNode* op) {
  visit(op->a);
  visit(op->b);
}
void IRVisitor::visit_not(const NotNode* op) { visit(op->a); }
void IRVisitor::visit_select(const SelectNode* op) {
  visit(op->cond);
  visit(op->true_value);
  visit(op->false_value);
}
void IRVisitor::visit_cast(const CastNode* op) { visit(op->value); }
void IRVisitor::visit_call(const CallNode* op) {
  for (auto& a : op->args) visit(a);
}
void IRVisitor::visit_let(const LetNode* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_load(const LoadNode* op) {
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_ramp(const RampNode* op) {
  visit(op->base);
  visit(op->stride);
}
void IRVisitor::visit_broadcast(const BroadcastNode* op) { visit(op->value); }
void IRVisitor::visit_tensor_read(const TensorReadNode* op) {
  for (auto& i : op->indices) visit(i);
}
void IRVisitor::visit_reduce(const ReduceNode* op) {
  visit(op->source);
  visit(op->identity);
}

void IRVisitor::visit_for(const ForNode* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit_store(const StoreNode* op) {
  visit(op->value);
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_allocate(const AllocateNode* op) {
  visit(op->size);
  visit(op->body);
}
void IRVisitor::visit_let_stmt(const LetStmtNode* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_if(const IfThenElseNode* op) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit_seq(const SeqNode* op) {
  for (auto& s : op->seq) visit(s);
}
void IRVisitor::visit_evaluate(const EvaluateNode* op) { visit(op->value); }
void IRVisitor::visit_tensor_store(const TensorStoreNode* op) {
  for (auto& i : op->indices) visit(i);
  visit(op->value);
}
void IRVisitor::visit_realize(const RealizeNode* op) {
  for (auto& r : op->bounds) {
    visit(r.min);
    visit(r.extent);
  }
  visit(op->body);
}

// ---- IRMutator ----------------------------------------------------------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e) return e;
  switch (e.kind()) {
    case ExprKind::IntImm: return mutate_int_imm(e, e.as<IntImmNode>());
    case ExprKind::FloatImm: return mutate_float_imm(e, e.as<FloatImmNode>());
    case ExprKind::Var: return mutate_var(e, e.as<VarNode>());
    case ExprKind::Not: return mutate_not(e, e.as<NotNode>());
    case ExprKind::Select: return mutate_select(e, e.as<SelectNode>());
    case ExprKind::Cast: return mutate_cast(e, e.as<CastNode>());
    case ExprKind::Call: return mutate_call(e, e.as<CallNode>());
    case ExprKind::Let: return mutate_let(e, e.as<LetNode>());
    case ExprKind::Load: return mutate_load(e, e.as<LoadNode>());
    case ExprKind::Ramp: return mutate_ramp(e, e.as<RampNode>());
    case ExprKind::Broadcast: return mutate_broadcast(e, e.as<BroadcastNode>());
    case ExprKind::TensorRead: return mutate_tensor_read(e, e.as<TensorReadNode>());
    case ExprKind::Reduce: return mutate_reduce(e, e.as<ReduceNode>());
    default: return mutate_binary(e, static_cast<const BinaryNode*>(e.get()));
  }
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s.kind()) {
    case StmtKind::For: return mutate_for(s, s.as<ForNode>());
    case StmtKind::Store: return mutate_store(s, s.as<StoreNode>());
    case StmtKind::Allocate: return mutate_allocate(s, s.as<AllocateNode>());
    case StmtKind::LetStmt: return mutate_let_stmt(s, s.as<LetStmtNode>());
    case StmtKind::IfThenElse: return mutate_if(s, s.as<IfThenElseNode>());
    case StmtKind::Seq: return mutate_seq(s, s.as<SeqNode>());
    case StmtKind::Evaluate: return mutate_evaluate(s, s.as<EvaluateNode>());
    case StmtKind::TensorStore: return mutate_tensor_store(s, s.as<TensorStoreNode>());
    case StmtKind::Realize: return mutate_realize(s, s.as<RealizeNode>());
  }
  return s;
}

Expr IRMutator::mutate_binary(const Expr& e, const BinaryNode* op) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return e;
  return make_binary(op->kind, a, b);
}
Expr IRMutator::mutate_not(const Expr& e, const NotNode* op) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? e : logical_not(a);
}
Expr IRMutator::mutate_select(const Expr& e, const SelectNode* op) {
  Expr c = mutate(op->cond), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return e;
  return select(c, t, f);
}
Expr IRMutator::mutate_cast(const Expr& e, const CastNode* op) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return e;
  DataType t = op->dtype;
  if (v.dtype().lanes != t.lanes) t = t.with_lanes(v.dtype().lanes);
  return cast(t, v);
}
Expr IRMutator::mutate_call(const Expr& e, const CallNode* op) {
  std::vector<Expr> args;
  bool changed = false;
  for (auto& a : op->args) {
    args.push_back(mutate(a));
    changed |= !args.back().same_as(a);
  }
  return changed ? call(op->op, std::move(args)) : e;
}
Expr IRMutator::mutate_let(const Expr& e, const LetNode* op) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return e;
  return make_expr<LetNode>(op->var, v, b);
}
Expr IRMutator::mutate_load(const Expr& e, const LoadNode* op) {
  Expr i = mutate(op->index), p = mutate(op->predicate);
  return i.same_as(op->index) && p.same_as(op->predicate) ? e : load(op->buffer, i, p);
}
Expr IRMutator::mutate_ramp(const Expr& e, const RampNode* op) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return e;
  return ramp(b, s, op->lanes);
}
Expr IRMutator::mutate_broadcast(const Expr& e, const BroadcastNode* op) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return e;
  if (v.dtype().lanes != 1) return v;  // already vector: broadcasting it again is meaningless
  return broadcast(v, op->lanes);
}
Expr IRMutator::mutate_tensor_read(const Expr& e, const TensorReadNode* op) {
  std::vector<Expr> idx;
  bool changed = false;
  for (auto& i : op->indices) {
    idx.push_back(mutate(i));
    changed |= !idx.back().same_as(i);
  }
  return changed ? make_expr<TensorReadNode>(op->tensor, std::move(idx)) : e;
}
Expr IRMutator::mutate_reduce(const Expr& e, const ReduceNode* op) {
  Expr s = mutate(op->source);
  if (s.same_as(op->source)) return e;
  return make_expr<ReduceNode>(op->op, s, op->axes, op->identity);
}

Stmt IRMutator::mutate_for(const Stmt& s, const ForNode* op) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && b.same_as(op->body)) return s;
  return make_for(op->var, mn, ext, op->for_kind, b);
}
Stmt IRMutator::mutate_store(const Stmt& s, const StoreNode* op) {
  Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
  if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return s;
  return make_store(op->buffer, v, i, p);
}
Stmt IRMutator::mutate_allocate(const Stmt& s, const AllocateNode* op) {
  Expr sz = mutate(op->size);
  Stmt b = mutate(op->body);
  if (sz.same_as(op->size) && b.same_as(op->body)) return s;
  return make_stmt<AllocateNode>(op->buffer, sz, b);
}
Stmt IRMutator::mutate_let_stmt(const Stmt& s, const LetStmtNode* op) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return s;
  return make_stmt<LetStmtNode>(op->var, v, b);
}
Stmt IRMutator::mutate_if(const Stmt& s, const IfThenElseNode* op) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return s;
  return make_if(c, t, e);
}
Stmt IRMutator::mutate_seq(const Stmt& s, const SeqNode* op) {
  std::vector<Stmt> seq;
  bool changed = false;
  for (auto& st : op->seq) {
    seq.push_back(mutate(st));
    changed |= !seq.back().same_as(st);
  }
  return changed ? make_seq(std::move(seq)) : s;
}
Stmt IRMutator::mutate_evaluate(const Stmt& s, const EvaluateNode* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? s : make_stmt<EvaluateNode>(v);
}
Stmt IRMutator::mutate_tensor_store(const Stmt& s, const TensorStoreNode* op) {
  std::vector<Expr> idx;
  bool changed = false;
  for (auto& i : op->indices) {
    idx.push_back(mutate(i));
    changed |= !idx.back().same_as(i);
  }
  Expr v = mutate(op->value);
  changed |= !v.same_as(op->value);
  return changed ? make_stmt<TensorStoreNode>(op->tensor, std::move(idx), v) : s;
}
Stmt IRMutator::mutate_realize(const Stmt& s, const RealizeNode* op) {
  std::vector<Range> bounds;
  bool changed = false;
  for (auto& r : op->bounds) {
    Range m{mutate(r.min), mutate(r.extent)};
    changed |= !m.min.same_as(r.min) || !m.extent.same_as(r.extent);
    bounds.push_back(m);
  }
  Stmt b = mutate(op->body);
  changed |= !b.same_as(op->body);
  return changed ? make_stmt<RealizeNode>(op->tensor, std::move(bounds), op->scope, b) : s;
}

// ---- helpers ------------------------------------------------------------------

namespace {
class FnVisitor : public IRVisitor {
 public:
  explicit FnVisitor(const std::function<void(const Expr&)>& f) : f_(f) {}
  void visit(const Expr& e) override {
    if (!e) return;
    IRVisitor::visit(e);
    f_(e);
  }
  using IRVisitor::visit;

 private:
  const std::function<void(const Expr&)>& f_;
};

class Substituter : public IRMutator {
 public:
  explicit Substituter(const std::vector<std::pair<Var, Expr>>& m) : map_(m) {}

 protected:
  Expr mutate_var(const Expr& e, const VarNode* op) override {
    for (auto& [v, repl] : map_)
      if (v.get() == op) return repl;
    return e;
  }

 private:
  const std::vector<std::pair<Var, Expr>>& map_;
};
class TensorReadReplacer : public IRMutator {
 public:
  TensorReadReplacer(const Tensor& t, const std::function<Expr(const std::vector<Expr>&)>& f)
      : tensor_(t), rewrite_(f) {}

 protected:
  Expr mutate_tensor_read(const Expr& e, const TensorReadNode* op) override {
    Expr r = IRMutator::mutate_tensor_read(e, op);
    auto* rn = r.as<TensorReadNode>();
    return rn->tensor == tensor_ ? rewrite_(rn->indices) : r;
  }

 private:
  const Tensor& tensor_;
  const std::function<Expr(const std::vector<Expr>&)>& rewrite_;
};
}  // namespace

Expr replace_tensor_reads(const Expr& e, const Tensor& t,
                          const std::function<Expr(const std::vector<Expr>&)>& rewrite) {
  TensorReadReplacer r(t, rewrite);
  return r.mutate(e);
}

void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& f) {
  FnVisitor v(f);
  v.visit(e);
}
void post_order_visit(const Stmt& s, const std::function<void(const Expr&)>& f) {
  FnVisitor v(f);
  v.visit(s);
}

Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map) {
  if (map.empty()) return e;
  Substituter s(map);
  return s.mutate(e);
}
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map) {
  if (map.empty()) return s;
  Substituter sub(map);
  return sub.mutate(s);
}

bool uses_var(const Expr& e, const Var& v) {
  bool found = false;
  post_order_visit(e, [&](const Expr& x) {
    if (x.get() == v.get()) found = true;
  });
  return found;
}
bool uses_var(const Stmt& s, const Var& v) {
  bool found = false;
  post_order_visit(s, [&](const Expr& x) {
    if (x.get() == v.get()) found = true;
  });
  return found;
}

std::set<const VarNode*> vars_bound_in(const Stmt& s) {
  struct Collect : IRVisitor {
    std::set<const VarNode*> vars;
    void visit_for(const ForNode* op) override {
      vars.insert(op->var.get());
      IRVisitor::visit_for(op);
    }
    void visit_let_stmt(const LetStmtNode* op) override {
      vars.insert(op->var.get());
      IRVisitor::visit_let_stmt(op);
    }
    void visit_let(const LetNode* op) override {
      vars.insert(op->var.get());
      IRVisitor::visit_let(op);
    }
  } c;
  c.visit(s);
  return c.vars;
}

}  // namespace kiln::ir
