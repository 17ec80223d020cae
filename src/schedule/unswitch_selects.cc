#include "schedule/unswitch_selects.h"

#include <set>

#include "ir/canonical_form.h"
#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

// Whether e is provably a multiple of m: a constant, or a product with one.
bool multiple_of(const Expr& e, int64_t m) {
  if (const int64_t* c = as_const_int(e)) return *c % m == 0;
  if (const auto* mul = e.as<MulNode>()) return multiple_of(mul->a, m) || multiple_of(mul->b, m);
  return false;
}

// The scalar x of a lane index x + ramp(0, 1, L): ramp(x, 1, L) or x(x) + ramp(0, 1, L).
Expr lane_index_base(const Expr& e, int lanes) {
  auto unit = [&](const RampNode* r) {
    const int64_t* step = as_const_int(r->stride);
    return step && *step == 1 && r->lanes == lanes;
  };
  if (const auto* r = e.as<RampNode>()) return unit(r) ? r->base : Expr();
  if (const auto* add = e.as<AddNode>()) {
    const auto* b = add->a.as<BroadcastNode>();
    const auto* r = add->b.as<RampNode>();
    const int64_t* zero = r ? as_const_int(r->base) : nullptr;
    if (b && r && zero && *zero == 0 && unit(r)) return b->value;
  }
  return Expr();
}

// The scalar condition of a select: its own, the value of a broadcast
// (vectorization turns a uniform condition into one), or, for a vector of
// lane indices compared with a bound, x + i >= c over lanes i < L with x and
// c multiples of L: every lane agrees with x >= c (likewise <). That is a
// Concat's test once a layout transform vectorized it over a channel block.
// Null for a condition that differs between lanes.
Expr scalar_condition(const Expr& cond) {
  if (const auto* b = cond.as<BroadcastNode>()) return b->value;
  if (cond.dtype().is_scalar()) return cond;
  const int lanes = cond.dtype().lanes;
  const BinaryNode* cmp = nullptr;
  if (const auto* ge = cond.as<GENode>()) cmp = ge;
  if (const auto* lt = cond.as<LTNode>()) cmp = lt;
  if (!cmp) return Expr();
  const auto* bound = cmp->b.as<BroadcastNode>();
  Expr base = lane_index_base(cmp->a, lanes);
  if (!bound || !base || !as_const_int(bound->value) || !multiple_of(bound->value, lanes) ||
      !multiple_of(base, lanes))
    return Expr();
  return make_binary(cond.kind(), base, bound->value);
}

bool contains_loop(const Stmt& s) {
  struct Find : IRVisitor {
    bool found = false;
    void visit_for(const ForNode*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

// Whether cond reads `v`, and nothing bound inside the body nor any memory.
bool invariant_in_body(const Expr& cond, const Var& v, const std::set<const VarNode*>& inner) {
  bool uses_inner = false, reads_memory = false;
  post_order_visit(cond, [&](const Expr& e) {
    if (const auto* var = e.as<VarNode>()) uses_inner |= inner.count(var) > 0;
    reads_memory |= e.as<LoadNode>() != nullptr || e.as<TensorReadNode>() != nullptr;
  });
  return !uses_inner && !reads_memory && uses_var(cond, v);
}

// The outermost select condition of `body` that can be unswitched. Outermost
// first: a Concat's chain select(c_n, x_n, select(c_n-1, ...)) then splits
// into n + 1 versions, each resolving one more test, where innermost first
// would nest tests that the outer ones already decided.
Expr find_condition(const Stmt& body, const Var& v) {
  struct Find : IRVisitor {
    const Var* v = nullptr;
    std::set<const VarNode*> inner;
    Expr found;
    void visit_select(const SelectNode* op) override {
      if (found) return;
      Expr c = scalar_condition(op->cond);
      if (c && c.dtype().is_bool() && invariant_in_body(c, *v, inner)) {
        found = c;
        return;
      }
      IRVisitor::visit_select(op);
    }
  } f;
  f.v = &v;
  f.inner = vars_bound_in(body);
  f.visit(body);
  return f.found;
}

// body with every select on `cond` replaced by its arm for `value`.
class Resolve : public IRMutator {
 public:
  Resolve(Expr cond, bool value) : cond_(std::move(cond)), value_(value) {}

 protected:
  Expr mutate_select(const Expr& e, const SelectNode* op) override {
    Expr c = scalar_condition(op->cond);
    if (c && arith::struct_equal(c, cond_))
      return mutate(value_ ? op->true_value : op->false_value);
    return IRMutator::mutate_select(e, op);
  }

 private:
  Expr cond_;
  bool value_;
};

Stmt unswitch(const Stmt& body, const Var& v, int& versions) {
  if (versions >= kMaxUnswitchVersions || !contains_loop(body)) return body;
  Expr cond = find_condition(body, v);
  if (!cond) return body;
  ++versions;
  Resolve on_true(cond, true), on_false(cond, false);
  Stmt t = unswitch(on_true.mutate(body), v, versions);
  Stmt f = unswitch(on_false.mutate(body), v, versions);
  return make_if(cond, t, f);
}

class Unswitcher : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    // An unrolled loop's variable becomes a constant in each copy, and its
    // selects fold then: unswitching on it would only multiply the code.
    if (op->for_kind == ForKind::Unrolled)
      return make_for(op->var, op->min, op->extent, op->for_kind, body);
    int versions = 1;
    body = unswitch(body, op->var, versions);
    return make_for(op->var, op->min, op->extent, op->for_kind, body);
  }
};

}  // namespace

Stmt unswitch_selects(const Stmt& s) {
  Unswitcher u;
  return u.mutate(s);
}

}  // namespace kiln::schedule
