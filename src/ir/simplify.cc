// The simplifier's public entry points and its statement pass.
//
// Expressions go through arith::Rewriter (canonical_rewriter.cc); this file
// tracks which ranges hold where: loop variables over their iteration
// domain, let variables over their value's bounds, and, inside an if, the
// simple facts its condition states about a variable.
#include "ir/simplify.h"

#include "ir/canonical_rewriter.h"
#include "ir/functor.h"

namespace kiln::ir {

namespace {

using arith::Bound;
using arith::kNegInf;
using arith::kPosInf;

bool is_empty(const Stmt& s) {
  if (!s) return true;
  auto* seq = s.as<SeqNode>();
  return seq && seq->seq.empty();
}

Stmt empty_stmt() { return make_seq({}); }

bool is_true(const Expr& e) {
  const int64_t* v = as_const_int(e);
  return e.dtype().is_bool() && v && *v != 0;
}

// Facts `var in bound` implied by cond being `truth`: comparisons of a
// variable with a constant, through && (when true) and || (when false).
void collect_facts(const Expr& cond, bool truth, std::vector<std::pair<Expr, Bound>>& out) {
  if (auto* n = cond.as<NotNode>()) return collect_facts(n->a, !truth, out);
  auto* op = dynamic_cast<const BinaryNode*>(cond.get());
  if (!op) return;
  if ((cond.kind() == ExprKind::And && truth) || (cond.kind() == ExprKind::Or && !truth)) {
    collect_facts(op->a, truth, out);
    collect_facts(op->b, truth, out);
    return;
  }
  auto* v = op->a.as<VarNode>();
  auto* c = op->b.as<IntImmNode>();
  if (!v || !c || !op->a.dtype().is_int() || c->value == kNegInf || c->value == kPosInf) return;
  ExprKind k = cond.kind();
  if (!truth) {
    static const std::pair<ExprKind, ExprKind> kNeg[] = {
        {ExprKind::LT, ExprKind::GE}, {ExprKind::LE, ExprKind::GT}, {ExprKind::GT, ExprKind::LE},
        {ExprKind::GE, ExprKind::LT}, {ExprKind::EQ, ExprKind::NE}, {ExprKind::NE, ExprKind::EQ}};
    for (auto& [from, to] : kNeg)
      if (from == k) {
        k = to;
        break;
      }
  }
  int64_t x = c->value;
  Bound b;
  switch (k) {
    case ExprKind::LT: b.hi = x - 1; break;
    case ExprKind::LE: b.hi = x; break;
    case ExprKind::GT: b.lo = x + 1; break;
    case ExprKind::GE: b.lo = x; break;
    case ExprKind::EQ: b = {x, x}; break;
    default: return;
  }
  out.emplace_back(op->a, b);
}

class StmtSimplifier : public IRMutator {
 public:
  StmtSimplifier() : rw_(an_) {}
  using IRMutator::mutate;

  Expr mutate(const Expr& e) override { return e ? rw_.simplify(e) : e; }
  arith::BoundAnalyzer& bounds() { return an_; }

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override;
  Stmt mutate_let_stmt(const Stmt& s, const LetStmtNode* op) override;
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* op) override;
  Stmt mutate_allocate(const Stmt& s, const AllocateNode* op) override;
  Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* op) override;

 private:
  // Simplifies body with v bound to b (intersected with what is known).
  Stmt with_bound(const VarNode* v, Bound b, const Stmt& body) {
    auto old = an_.bind(v, b);
    Stmt r = mutate(body);
    an_.restore(v, old);
    return r;
  }
  Stmt with_facts(const Expr& cond, bool truth, const Stmt& body);

  arith::BoundAnalyzer an_;
  arith::Rewriter rw_;
};

Stmt StmtSimplifier::mutate_for(const Stmt& s, const ForNode* op) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  const int64_t* n = as_const_int(ext);
  if (n && *n <= 0) return empty_stmt();
  // A single iteration is the body with the variable fixed.
  if (n && *n == 1) return mutate(substitute(op->body, {{op->var, mn}}));
  Bound lo = an_.get(mn);
  Bound hi = an_.get(rw_.simplify(mn + ext - make_const(ext.dtype(), 1)));
  Stmt body = with_bound(op->var.get(), {lo.lo, hi.hi}, op->body);
  if (is_empty(body)) return empty_stmt();
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return s;
  return make_for(op->var, mn, ext, op->for_kind, body);
}

Stmt StmtSimplifier::mutate_let_stmt(const Stmt& s, const LetStmtNode* op) {
  Expr value = mutate(op->value);
  if (value.as<IntImmNode>() || value.as<FloatImmNode>())
    return mutate(substitute(op->body, {{op->var, value}}));
  Stmt body = with_bound(op->var.get(), an_.get(value), op->body);
  if (is_empty(body)) return empty_stmt();
  if (value.same_as(op->value) && body.same_as(op->body)) return s;
  return make_stmt<LetStmtNode>(op->var, value, body);
}

Stmt StmtSimplifier::with_facts(const Expr& cond, bool truth, const Stmt& body) {
  if (!body) return body;
  std::vector<std::pair<Expr, Bound>> facts;
  collect_facts(cond, truth, facts);
  std::vector<std::pair<const VarNode*, std::optional<Bound>>> saved;
  for (auto& [v, b] : facts) {
    Bound cur = an_.get(v);
    Bound both{std::max(cur.lo, b.lo), std::min(cur.hi, b.hi)};
    auto* node = v.as<VarNode>();
    saved.emplace_back(node, an_.bind(node, both));
  }
  Stmt r = mutate(body);
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) an_.restore(it->first, it->second);
  return r;
}

Stmt StmtSimplifier::mutate_if(const Stmt& s, const IfThenElseNode* op) {
  Expr cond = mutate(op->cond);
  if (const int64_t* c = as_const_int(cond)) {
    Stmt taken = *c ? op->then_case : op->else_case;
    return taken ? mutate(taken) : empty_stmt();
  }
  Stmt then_case = with_facts(cond, true, op->then_case);
  Stmt else_case = with_facts(cond, false, op->else_case);
  if (is_empty(else_case)) else_case = Stmt();
  if (is_empty(then_case)) {
    if (!else_case) return empty_stmt();
    return make_if(rw_.make_not(cond), else_case);
  }
  if (cond.same_as(op->cond) && then_case.same_as(op->then_case) &&
      else_case.same_as(op->else_case))
    return s;
  return make_if(cond, then_case, else_case);
}

Stmt StmtSimplifier::mutate_allocate(const Stmt& s, const AllocateNode* op) {
  Expr size = mutate(op->size);
  Stmt body = mutate(op->body);
  if (is_empty(body)) return empty_stmt();
  if (size.same_as(op->size) && body.same_as(op->body)) return s;
  return make_stmt<AllocateNode>(op->buffer, size, body);
}

Stmt StmtSimplifier::mutate_evaluate(const Stmt& s, const EvaluateNode* op) {
  Expr v = mutate(op->value);
  // Expressions have no side effects: a constant one does nothing.
  if (v.as<IntImmNode>() || v.as<FloatImmNode>()) return empty_stmt();
  return v.same_as(op->value) ? s : make_stmt<EvaluateNode>(v);
}

void bind_ranges(arith::BoundAnalyzer& an, const VarRanges& ranges) {
  for (auto& [v, r] : ranges)
    an.bind(v.get(), {r.min_value.value_or(kNegInf), r.max_value.value_or(kPosInf)});
}

}  // namespace

Expr simplify(const Expr& e, const VarRanges& ranges) {
  if (!e) return e;
  arith::BoundAnalyzer an;
  bind_ranges(an, ranges);
  arith::Rewriter rw(an);
  return rw.simplify(e);
}

Stmt simplify(const Stmt& s, const VarRanges& ranges) {
  if (!s) return s;
  StmtSimplifier ss;
  bind_ranges(ss.bounds(), ranges);
  return ss.mutate(s);
}

bool can_prove(const Expr& cond, const VarRanges& ranges) {
  return is_true(simplify(cond, ranges));
}

}  // namespace kiln::ir
