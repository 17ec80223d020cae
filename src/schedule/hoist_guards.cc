#include "schedule/hoist_guards.h"

#include "ir/canonical_form.h"
#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

bool reads_memory(const Expr& e) {
  bool found = false;
  post_order_visit(e, [&](const Expr& x) {
    found |= x.as<LoadNode>() != nullptr || x.as<TensorReadNode>() != nullptr;
  });
  return found;
}

// The guard of a statement that is an `if` without else on a test that reads
// no memory; null otherwise.
const IfThenElseNode* movable_guard(const Stmt& s) {
  const auto* op = s.as<IfThenElseNode>();
  if (!op || op->else_case || reads_memory(op->cond)) return nullptr;
  return op;
}

class GuardHoister : public IRMutator {
 protected:
  Stmt mutate_seq(const Stmt& s, const SeqNode* op) override {
    std::vector<Stmt> merged;
    for (const Stmt& child : op->seq) {
      Stmt c = mutate(child);
      const IfThenElseNode* guard = movable_guard(c);
      const IfThenElseNode* last = merged.empty() ? nullptr : movable_guard(merged.back());
      if (guard && last && arith::struct_equal(guard->cond, last->cond)) {
        merged.back() = make_if(last->cond, make_seq({last->then_case, guard->then_case}));
        continue;
      }
      merged.push_back(c);
    }
    if (merged.size() == 1) return merged[0];
    return make_seq(std::move(merged));
  }

  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    const IfThenElseNode* guard = movable_guard(body);
    if (guard && !uses_var(guard->cond, op->var))
      return make_if(guard->cond,
                     make_for(op->var, op->min, op->extent, op->for_kind, guard->then_case));
    if (body.same_as(op->body)) return s;
    return make_for(op->var, op->min, op->extent, op->for_kind, body);
  }

  Stmt mutate_allocate(const Stmt& s, const AllocateNode* op) override {
    Stmt body = mutate(op->body);
    // The test reads no memory, so not the buffer either.
    if (const IfThenElseNode* guard = movable_guard(body))
      return make_if(guard->cond, rebuild(op, guard->then_case));
    if (body.same_as(op->body)) return s;
    return rebuild(op, body);
  }

  Stmt mutate_let_stmt(const Stmt& s, const LetStmtNode* op) override {
    Stmt body = mutate(op->body);
    const IfThenElseNode* guard = movable_guard(body);
    if (guard && !uses_var(guard->cond, op->var))
      return make_if(guard->cond, make_stmt<LetStmtNode>(op->var, op->value, guard->then_case));
    if (body.same_as(op->body)) return s;
    return make_stmt<LetStmtNode>(op->var, op->value, body);
  }

 private:
  // The allocation of `op` around a new body.
  static Stmt rebuild(const AllocateNode* op, Stmt body) {
    return make_stmt<AllocateNode>(op->buffer, op->size, std::move(body));
  }
};

}  // namespace

Stmt hoist_guards(const Stmt& s) { return GuardHoister().mutate(s); }

}  // namespace kiln::schedule
