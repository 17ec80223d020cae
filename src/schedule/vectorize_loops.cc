#include "schedule/vectorize_loops.h"

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

struct CannotVectorize {};

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

  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    if (uses_var(op->min, var_) || uses_var(op->extent, var_)) throw CannotVectorize();
    return IRMutator::mutate_for(s, op);
  }
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* op) override {
    Expr c = mutate(op->cond);
    if (c.dtype().lanes != 1) throw CannotVectorize();
    return IRMutator::mutate_if(s, op);
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
    try {
      Vectorizer v(op->var, ramp(op->min, make_int(1), lanes), lanes);
      return v.mutate(body);
    } catch (const CannotVectorize&) {
      return make_for(op->var, op->min, op->extent, ForKind::Serial, body);
    }
  }
};

}  // namespace

Stmt vectorize_loops(const Stmt& s) {
  LoopVectorizer v;
  return v.mutate(s);
}

}  // namespace kiln::schedule
