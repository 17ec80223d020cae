#include "schedule/lower.h"

#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>

#include "ir/printer.h"
#include "ir/simplify.h"
#include "schedule/code_size.h"
#include "schedule/hoist_guards.h"
#include "schedule/peel_tail_loops.h"
#include "schedule/schedule_ops.h"
#include "schedule/storage_flatten.h"
#include "schedule/unroll_loops.h"
#include "schedule/unswitch_selects.h"
#include "schedule/vectorize_loops.h"
#include "schedule/version_guarded_loops.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

bool debug_lower() {
  const char* v = std::getenv("KILN_DEBUG_LOWER");
  return v && *v && std::string(v) != "0";
}

void trace(const char* pass, const Stmt& s) {
  if (debug_lower()) std::cerr << "// ---- after " << pass << "\n" << to_string(s) << "\n";
}

std::map<const TensorNode*, Buffer> arg_buffers(const Schedule& sch,
                                                const std::vector<Tensor>& args,
                                                std::vector<Buffer>& ordered) {
  std::map<const TensorNode*, Buffer> m;
  for (auto& t : args) {
    sch[t];  // throws if t is not part of the schedule
    Buffer b = make_buffer(t->name, t->dtype, t->shape, MemScope::Global);
    if (!m.emplace(t.get(), b).second)
      throw std::invalid_argument("tensor '" + t->name + "' is passed twice");
    ordered.push_back(b);
  }
  for (auto& out : sch.outputs())
    if (!m.count(out.get()))
      throw std::invalid_argument("output '" + out->name + "' is not among the kernel arguments");
  return m;
}

// The compile-time budget (schedule/code_size.h): demotes unrolled loops of a
// kernel over it, or throws CodeBudgetExceeded.
Stmt fit_budget(const Stmt& s, const std::string& name, const LowerOptions& o) {
  CodeBudgetResult r = o.demote_over_budget ? fit_code_budget(s, o.code_budget, o.vector_bits)
                                            : fit_code_budget(s, 0, o.vector_bits);
  if (!o.demote_over_budget && o.code_budget > 0 && r.size_before > o.code_budget)
    throw CodeBudgetExceeded(name, r.size_before, o.code_budget);
  if (o.report) {
    o.report->code_size = r.size_after;
    o.report->code_size_before = r.size_before;
    o.report->demoted = r.demoted;
  }
  return r.stmt;
}

}  // namespace

LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args, const std::string& name) {
  return lower(sch, args, name, LowerOptions{});
}

LoweredFunc lower(const Schedule& sch, const std::vector<Tensor>& args, const std::string& name,
                  const LowerOptions& options) {
  LoweredFunc f;
  f.name = name;
  auto buffers = arg_buffers(sch, args, f.args);

  Stmt s = schedule_ops(sch);
  trace("schedule_ops", s);
  s = storage_flatten(s, buffers);
  trace("storage_flatten", s);
  s = simplify(s);
  trace("simplify", s);
  s = vectorize_loops(s, options.vector_bits);
  trace("vectorize_loops", s);
  s = unswitch_selects(s);
  trace("unswitch_selects", s);
  s = fit_budget(s, name, options);
  trace("fit_budget", s);
  if (options.unroll) {
    s = unroll_loops(s);
    trace("unroll_loops", s);
    s = simplify(s);
    trace("simplify", s);
    s = peel_tail_loops(s);
    trace("peel_tail_loops", s);
    // After unrolling only: the tuner's features read the loop nest as
    // scheduled (unroll off), one version of it.
    Stmt unversioned = s;
    s = version_guarded_loops(s, options.code_budget, options.vector_bits);
    trace("version_guarded_loops", s);
    // The report's estimate then counts the second versions too.
    if (options.report && !s.same_as(unversioned))
      options.report->code_size = estimate_code_size(s, options.vector_bits);
    s = hoist_guards(s);
    trace("hoist_guards", s);
  }
  f.body = s;
  return f;
}

}  // namespace kiln::schedule
