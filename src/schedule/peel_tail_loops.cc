#include "schedule/peel_tail_loops.h"

#include <set>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

// Past this many iterations a tail costs little next to the full ones.
constexpr int64_t kMaxPeeledExtent = 4096;

// The variables an expression reads.
std::set<const VarNode*> vars_of(const Expr& e) {
  std::set<const VarNode*> vars;
  post_order_visit(e, [&](const Expr& x) {
    if (const auto* v = x.as<VarNode>()) vars.insert(v);
  });
  return vars;
}

// Whether body has an If, on the loop variable alone, that holds on every
// iteration of [min, last) but not provably on `last` too: the guard of a
// partial last tile.
bool has_tail_guard(const Stmt& body, const Var& v, int64_t min, int64_t last) {
  class Finder : public IRVisitor {
   public:
    Finder(const Var& v, int64_t min, int64_t last) : v_(v), min_(min), last_(last) {}
    bool found = false;

   protected:
    void visit_if(const IfThenElseNode* op) override {
      auto vars = vars_of(op->cond);
      if (!found && vars.size() == 1 && vars.count(v_.get())) {
        VarRanges head = {{v_, ConstIntBound{min_, last_ - 1}}};
        VarRanges all = {{v_, ConstIntBound{min_, last_}}};
        found = can_prove(op->cond, head) && !can_prove(op->cond, all);
      }
      IRVisitor::visit_if(op);
    }

   private:
    const Var& v_;
    int64_t min_, last_;
  } finder(v, min, last);
  finder.visit(body);
  return finder.found;
}

class TailPeeler : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    const int64_t* min = as_const_int(op->min);
    const int64_t* extent = as_const_int(op->extent);
    bool serial = op->for_kind == ForKind::Serial || op->for_kind == ForKind::Rolled;
    bool peel = serial && min && extent && *extent >= 2 && *extent <= kMaxPeeledExtent &&
                has_tail_guard(body, op->var, *min, *min + *extent - 1);
    if (!peel) {
      if (body.same_as(op->body)) return s;
      return make_for(op->var, op->min, op->extent, op->for_kind, body);
    }
    Stmt head = make_for(op->var, op->min, make_int(*extent - 1), op->for_kind, body);
    Stmt tail = substitute(body, {{op->var, make_int(*min + *extent - 1)}});
    // simplify() drops the guards of both: the head's by its loop range.
    return make_seq({head, tail});
  }
};

}  // namespace

Stmt peel_tail_loops(const Stmt& s) {
  TailPeeler p;
  return simplify(p.mutate(s));
}

}  // namespace kiln::schedule
