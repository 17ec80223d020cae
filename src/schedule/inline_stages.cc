// compute_inline: a stage's body replaces every read of it.
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
  // Producers come first, so an inlined stage's own inlined inputs are
  // already substituted when it is substituted into its readers.
  for (auto& s : ctx.sch->stages()) {
    if (s->attach != AttachKind::Inline) continue;
    const Tensor def = ctx.def[s.get()];
    for (auto& r : ctx.sch->stages()) {
      if (r->is_placeholder() || r == s) continue;
      const Tensor& d = ctx.def[r.get()];
      Expr body = replace_tensor_reads(
          d->body, s->origin, [&](const std::vector<Expr>& idx) { return inline_read(def, idx); });
      if (!body.same_as(d->body)) ctx.def[r.get()] = with_body(d, body);
    }
  }
}

}  // namespace kiln::schedule
