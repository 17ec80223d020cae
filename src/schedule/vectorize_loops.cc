#include "schedule/vectorize_loops.h"

#include <optional>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

struct CannotVectorize {};

// The scalar condition under which every lane of the vector condition c is
// true, for conjunctions of comparisons that are linear in the lane: a ramp
// d = base + stride * lane against 0 is decided by its first or last lane.
std::optional<Expr> all_lanes_true(const Expr& c) {
  if (c.dtype().lanes == 1) return c;
  if (auto* b = c.as<BroadcastNode>()) return b->value;
  if (auto* a = c.as<AndNode>()) {
    auto x = all_lanes_true(a->a), y = all_lanes_true(a->b);
    if (!x || !y) return std::nullopt;
    return logical_and(*x, *y);
  }
  if (!is_comparison(c.kind()) || c.kind() == ExprKind::EQ || c.kind() == ExprKind::NE)
    return std::nullopt;
  auto* cmp = static_cast<const BinaryNode*>(c.get());
  if (!cmp->a.dtype().is_integer()) return std::nullopt;
  Expr d = simplify(cmp->a - cmp->b);
  auto* r = d.as<RampNode>();
  const int64_t* stride = r ? as_const_int(r->stride) : nullptr;
  if (!stride) return std::nullopt;
  Expr first = r->base, last = simplify(r->base + make_int(*stride * (r->lanes - 1)));
  // d < 0 and d <= 0 hold for all lanes when the largest lane does; d > 0 and
  // d >= 0 when the smallest does.
  bool upper = c.kind() == ExprKind::LT || c.kind() == ExprKind::LE;
  Expr extreme = (*stride >= 0) == upper ? last : first;
  return make_binary(c.kind(), extreme, make_int(0));
}

// Rewrites one loop body with the loop variable replaced by a ramp.
class Vectorizer : public IRMutator {
 public:
  Vectorizer(Var var, Expr ramp, int lanes)
      : var_(std::move(var)), ramp_(std::move(ramp)), lanes_(lanes) {}

 protected:
  Expr mutate_var(const Expr& e, const VarNode* op) override {
    if (op == var_.get()) return ramp_;
    for (auto& [from, to] : lets_)
      if (from.get() == op) return to;
    return e;
  }
  Expr mutate_ramp(const Expr&, const RampNode*) override { throw CannotVectorize(); }
  Expr mutate_broadcast(const Expr&, const BroadcastNode*) override { throw CannotVectorize(); }
  Expr mutate_let(const Expr& e, const LetNode* op) override {
    if (uses_var(e, var_)) throw CannotVectorize();
    return e;
  }

  Stmt mutate_store(const Stmt& s, const StoreNode* op) override {
    Expr index = simplify(mutate(op->index)), value = mutate(op->value);
    if (index.dtype().lanes == 1) {
      // Every lane would write the same element: order matters, keep the loop.
      if (value.dtype().lanes != 1) throw CannotVectorize();
      return index.same_as(op->index) && value.same_as(op->value)
                 ? s
                 : make_store(op->buffer, value, index);
    }
    // Lanes must write distinct elements (a ramp with a non-zero constant stride).
    auto* r = index.as<RampNode>();
    const int64_t* stride = r ? as_const_int(r->stride) : nullptr;
    if (!stride || *stride == 0 || index.dtype().lanes != lanes_) throw CannotVectorize();
    if (value.dtype().lanes == 1) value = broadcast(value, lanes_);
    return make_store(op->buffer, value, index);
  }

  // A lane-dependent guard (a split that does not divide) is hoisted: the
  // vector body runs without it when it holds for every lane, and the caller
  // keeps the serial loop for the iterations where it does not.
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* op) override {
    Expr c = simplify(mutate(op->cond));
    if (c.dtype().lanes == 1) return IRMutator::mutate_if(s, op);
    auto all = all_lanes_true(c);
    if (op->else_case || !all || uses_inner_var(*all)) throw CannotVectorize();
    hoisted_guards.push_back(*all);
    return mutate(op->then_case);
  }
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    if (uses_var(op->min, var_) || uses_var(op->extent, var_)) throw CannotVectorize();
    inner_vars_.push_back(op->var);
    Stmt r = IRMutator::mutate_for(s, op);
    inner_vars_.pop_back();
    return r;
  }
  Stmt mutate_allocate(const Stmt&, const AllocateNode*) override { throw CannotVectorize(); }
  Stmt mutate_let_stmt(const Stmt& s, const LetStmtNode* op) override {
    Expr v = mutate(op->value);
    if (v.dtype().lanes == 1) return IRMutator::mutate_let_stmt(s, op);
    Var vec(op->var.name(), v.dtype());
    lets_.emplace_back(op->var, vec);
    Stmt body = mutate(op->body);
    lets_.pop_back();
    return make_stmt<LetStmtNode>(vec, v, body);
  }

 public:
  std::vector<Expr> hoisted_guards;  // scalar conditions the vector body needs

 private:
  // Whether e mentions a variable bound inside the loop (so it cannot be hoisted).
  bool uses_inner_var(const Expr& e) const {
    for (auto& v : inner_vars_)
      if (uses_var(e, v)) return true;
    for (auto& [from, to] : lets_)
      if (uses_var(e, from)) return true;
    return uses_var(e, var_);
  }
  std::vector<Var> inner_vars_;

 private:
  Var var_;
  Expr ramp_;
  int lanes_;
  std::vector<std::pair<Var, Expr>> lets_;
};

class LoopVectorizer : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    const int64_t* ext = as_const_int(op->extent);
    if (op->for_kind != ForKind::Vectorized || !ext || *ext < 2 || *ext > 64) {
      ForKind kind = op->for_kind == ForKind::Vectorized ? ForKind::Serial : op->for_kind;
      return make_for(op->var, op->min, op->extent, kind, body);
    }
    int lanes = static_cast<int>(*ext);
    Stmt serial = make_for(op->var, op->min, op->extent, ForKind::Serial, body);
    try {
      Vectorizer v(op->var, ramp(op->min, make_int(1), lanes), lanes);
      Stmt vec = v.mutate(body);
      if (v.hoisted_guards.empty()) return vec;
      Expr all = v.hoisted_guards[0];
      for (size_t i = 1; i < v.hoisted_guards.size(); ++i)
        all = logical_and(all, v.hoisted_guards[i]);
      return make_if(simplify(all), vec, serial);
    } catch (const CannotVectorize&) {
      return serial;
    }
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) {
  LoopVectorizer v;
  return v.mutate(s);
}

}  // namespace kiln::schedule
