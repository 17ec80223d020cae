// compute_inline: a stage's body replaces every read of it.
#include <map>

#include "ir/functor.h"
#include "schedule/lower_context.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

// def's body with its axes replaced by the indices of one read.
Expr inline_read(const Tensor& def, const std::vector<Expr>& indices) {
  std::vector<std::pair<Var, Expr>> sub;
  for (size_t d = 0; d < def->axis.size(); ++d) sub.emplace_back(def->axis[d]->var, indices[d]);
  return substitute(def->body, sub);
}

Tensor with_body(const Tensor& t, Expr body) {
  auto c = std::make_shared<TensorNode>(*t);
  c->body = std::move(body);
  return c;
}

// Replaces every read of an inlined stage by its definition at the read's
// indices.
class InlineReads : public IRMutator {
 public:
  void add(const TensorNode* t, const Tensor& def) { defs_[t] = def; }
  bool empty() const { return defs_.empty(); }
  using IRMutator::mutate;

 protected:
  Expr mutate_tensor_read(const Expr& e, const TensorReadNode* op) override {
    Expr r = IRMutator::mutate_tensor_read(e, op);
    auto* rn = r.as<TensorReadNode>();
    auto it = defs_.find(rn->tensor.get());
    return it == defs_.end() ? r : inline_read(it->second, rn->indices);
  }

 private:
  std::map<const TensorNode*, Tensor> defs_;
};

}  // namespace

std::vector<Stage> LowerContext::readers(const Stage& s) const {
  std::vector<Stage> out;
  for (auto& r : sch->stages()) {
    if (r->is_placeholder() || r->attach == AttachKind::Inline) continue;
    for (auto& in : input_tensors(definition(r)))
      if (in == s->origin) {
        out.push_back(r);
        break;
      }
  }
  return out;
}

void inline_stages(LowerContext& ctx) {
  for (auto& s : ctx.sch->stages()) ctx.def[s.get()] = s->op;
  // Producers come first: when a stage is reached, the definitions of the
  // inlined stages it reads are final (their own inlined inputs substituted),
  // so one pass over each stage's body substitutes all its inlined inputs.
  // (Substituting one inlined stage at a time into every stage rescanned
  // every substituted body once per later inlined stage: cubic in a chain of
  // fused elementwise nodes, 90 s for 2,000 Adds.)
  InlineReads inliner;
  for (auto& s : ctx.sch->stages()) {
    if (s->is_placeholder()) continue;
    const Tensor& d = ctx.def[s.get()];
    if (!inliner.empty()) {
      Expr body = inliner.mutate(d->body);
      if (!body.same_as(d->body)) ctx.def[s.get()] = with_body(d, body);
    }
    if (s->attach == AttachKind::Inline) inliner.add(s->origin.get(), ctx.def[s.get()]);
  }
}

}  // namespace kiln::schedule
