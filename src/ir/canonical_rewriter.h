// Internal to the simplifier: the expression rewriter. It simplifies bottom
// up; each `make_*`/`binary` entry assumes its operands are already
// simplified and returns a simplified result, so rules can build on each
// other without re-walking whole trees.
#pragma once

#include "ir/canonical_form.h"
#include "ir/const_int_bound.h"
#include "ir/functor.h"

namespace kiln::ir::arith {

class Rewriter : public IRMutator {
 public:
  explicit Rewriter(BoundAnalyzer& an) : an_(an) {}
  using IRMutator::mutate;

  // Rewrites until nothing changes (a few rounds at most).
  Expr simplify(const Expr& e);

  Expr binary(ExprKind k, Expr a, Expr b);
  Expr make_not(Expr a);
  Expr make_select(Expr c, Expr t, Expr f);
  Expr make_cast(DataType t, Expr v);
  Expr make_ramp(Expr base, Expr stride, int lanes);

  BoundAnalyzer& bounds() { return an_; }

 protected:
  Expr mutate_binary(const Expr& e, const BinaryNode* op) override;
  Expr mutate_not(const Expr& e, const NotNode* op) override;
  Expr mutate_select(const Expr& e, const SelectNode* op) override;
  Expr mutate_cast(const Expr& e, const CastNode* op) override;
  Expr mutate_let(const Expr& e, const LetNode* op) override;
  Expr mutate_ramp(const Expr& e, const RampNode* op) override;
  Expr mutate_broadcast(const Expr& e, const BroadcastNode* op) override;
  Expr mutate_reduce(const Expr& e, const ReduceNode* op) override;
  Expr mutate_call(const Expr& e, const CallNode* op) override;

 private:
  Expr arith(ExprKind k, const Expr& a, const Expr& b);
  Expr linear_arith(ExprKind k, const Expr& a, const Expr& b);
  Expr vector_arith(ExprKind k, const Expr& a, const Expr& b);
  Expr div_mod(ExprKind k, const Expr& a, const Expr& b);
  Expr floordiv_const(const Expr& a, int64_t c);
  Expr floormod_const(const Expr& a, int64_t c);
  std::optional<Linear> floordiv_rest(Linear rest, int64_t c);
  Expr truncdiv_const(const Expr& a, int64_t c);
  Expr truncmod_const(const Expr& a, int64_t c);
  Expr to_trunc(const Expr& r);
  Expr ramp_div_mod(ExprKind k, const RampNode* r, int64_t c);
  Expr min_max(ExprKind k, const Expr& a, const Expr& b);
  Expr compare(ExprKind k, const Expr& a, const Expr& b);
  Expr normalize_compare(ExprKind k, const Expr& a, const Expr& b);
  Expr logic(ExprKind k, const Expr& a, const Expr& b);

  BoundAnalyzer& an_;
};

}  // namespace kiln::ir::arith
