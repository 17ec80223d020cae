#include "schedule/version_guarded_loops.h"

#include <set>

#include "ir/canonical_form.h"
#include "ir/functor.h"
#include "schedule/code_size.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

// Whether cond reads no memory and none of `inner`.
bool invariant(const Expr& cond, const std::set<const VarNode*>& inner) {
  bool ok = true;
  post_order_visit(cond, [&](const Expr& e) {
    if (const auto* v = e.as<VarNode>()) ok &= inner.count(v) == 0;
    ok &= e.as<LoadNode>() == nullptr && e.as<TensorReadNode>() == nullptr;
  });
  return ok;
}

void add_unique(std::vector<Expr>& conds, const Expr& c) {
  for (const Expr& x : conds)
    if (arith::struct_equal(x, c)) return;
  conds.push_back(c);
}

// Whether s stores to a Local buffer: a register tile's accumulators.
bool stores_local(const Stmt& s) {
  struct Find : IRVisitor {
    bool found = false;
    void visit_store(const StoreNode* op) override {
      found |= op->buffer->scope == MemScope::Local;
      IRVisitor::visit_store(op);
    }
  } f;
  f.visit(s);
  return f.found;
}

// The guards of `body` that sit inside a loop nested in it and that the body
// cannot change; empty when there are none, too many, or none of them guards
// a register tile's accumulator (a guard around a store to memory costs a
// branch, and a second version only compile time: Winograd's output
// transform on 14x14 planes grew by half).

std::vector<Expr> loop_guards(const Stmt& body) {
  struct Find : IRVisitor {
    std::set<const VarNode*> inner;
    std::vector<Expr> guards;
    int loop_depth = 0;
    bool too_many = false;
    void visit_for(const ForNode* op) override {
      ++loop_depth;
      IRVisitor::visit_for(op);
      --loop_depth;
    }
    bool guards_accumulator = false;
    void visit_if(const IfThenElseNode* op) override {
      if (loop_depth > 0 && op->cond.dtype().is_bool() && op->cond.dtype().is_scalar() &&
          invariant(op->cond, inner)) {
        add_unique(guards, op->cond);
        too_many |= guards.size() > static_cast<size_t>(kMaxVersionedGuards);
        guards_accumulator |=
            stores_local(op->then_case) || (op->else_case && stores_local(op->else_case));
      }
      IRVisitor::visit_if(op);
    }
  } f;
  f.inner = vars_bound_in(body);
  f.visit(body);
  if (f.too_many || !f.guards_accumulator) return {};
  return f.guards;
}

// s with every `if` on one of `conds` replaced by its then-case.
class DropGuards : public IRMutator {
 public:
  explicit DropGuards(const std::vector<Expr>& conds) : conds_(conds) {}

 protected:
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* op) override {
    for (const Expr& c : conds_)
      if (arith::struct_equal(c, op->cond)) return mutate(op->then_case);
    return IRMutator::mutate_if(s, op);
  }

 private:
  const std::vector<Expr>& conds_;
};

class Versioner : public IRMutator {
 public:
  Versioner(int64_t size, int64_t budget, int vector_bits)
      : size_(size), budget_(budget), vector_bits_(vector_bits) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    std::vector<Expr> guards = loop_guards(op->body);
    if (guards.empty()) return IRMutator::mutate_for(s, op);
    // The copy must fit the compile budget that fit_budget() enforced.
    int64_t copy = estimate_code_size(op->body, vector_bits_);
    if (budget_ > 0 && size_ + copy > budget_) return IRMutator::mutate_for(s, op);
    size_ += copy;
    Expr all = guards[0];
    for (size_t i = 1; i < guards.size(); ++i) all = logical_and(all, guards[i]);
    // The full version may hold further loops with guards of their own.
    Stmt full = mutate(DropGuards(guards).mutate(op->body));
    Stmt body = make_if(all, full, op->body);
    return make_for(op->var, op->min, op->extent, op->for_kind, body);
  }

 private:
  int64_t size_, budget_;
  int vector_bits_;
};

}  // namespace

Stmt version_guarded_loops(const Stmt& s, int64_t code_budget, int vector_bits) {
  int64_t size = code_budget > 0 ? estimate_code_size(s, vector_bits) : 0;
  return Versioner(size, code_budget, vector_bits).mutate(s);
}

}  // namespace kiln::schedule
