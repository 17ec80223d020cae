#include "schedule/unroll_loops.h"

#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

class Unroller : public IRMutator {
 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    const int64_t* ext = as_const_int(op->extent);
    if (op->for_kind != ForKind::Unrolled || !ext) {
      ForKind kind = op->for_kind == ForKind::Unrolled ? ForKind::Serial : op->for_kind;
      return make_for(op->var, op->min, op->extent, kind, body);
    }
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < *ext; ++i)
      copies.push_back(substitute(body, {{op->var, op->min + make_int(i)}}));
    return make_seq(std::move(copies));
  }
};

}  // namespace

Stmt unroll_loops(const Stmt& s) {
  Unroller u;
  return u.mutate(s);
}

}  // namespace kiln::schedule
