#include "schedule/vectorize_loops.h"

#include <optional>

#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

struct CannotVectorize {};

// For a comparison c of an integer linear in the lane (a ramp d = base +
// stride * lane against 0), the scalar condition under which it holds on
// every lane (every) or on some lane: that of its first or last lane. d < 0
// and d <= 0 hold on every lane when the largest lane does, on some lane when
// the smallest does; d > 0 and d >= 0 the other way round.
std::optional<Expr> comparison_on_lanes(const Expr& c, bool every) {
  if (c.dtype().lanes == 1) return c;
  if (auto* b = c.as<BroadcastNode>()) return b->value;
  if (!is_comparison(c.kind()) || c.kind() == ExprKind::EQ || c.kind() == ExprKind::NE)
    return std::nullopt;
  auto* cmp = static_cast<const BinaryNode*>(c.get());
  if (!cmp->a.dtype().is_integer()) return std::nullopt;
  Expr d = simplify(cmp->a - cmp->b);
  auto* r = d.as<RampNode>();
  const int64_t* stride = r ? as_const_int(r->stride) : nullptr;
  if (!stride) return std::nullopt;
  Expr first = r->base, last = simplify(r->base + make_int(*stride * (r->lanes - 1)));
  bool upper = c.kind() == ExprKind::LT || c.kind() == ExprKind::LE;
  bool largest = (*stride >= 0) == upper;  // the extreme lane is the largest d
  Expr extreme = largest == every ? last : first;
  return make_binary(c.kind(), extreme, make_int(0));
}

// The scalar condition under which every lane of the vector condition c is
// true, for conjunctions of comparisons that are linear in the lane.
std::optional<Expr> all_lanes_true(const Expr& c) {
  if (auto* a = c.as<AndNode>(); a && c.dtype().lanes > 1) {
    auto x = all_lanes_true(a->a), y = all_lanes_true(a->b);
    if (!x || !y) return std::nullopt;
    return logical_and(*x, *y);
  }
  return comparison_on_lanes(c, /*every=*/true);
}

// The conjuncts of c, split into those that are the same for every lane
// (scalars, broadcasts) and those that vary by lane.
void split_conjuncts(const Expr& c, std::vector<Expr>* uniform, std::vector<Expr>* varying) {
  if (auto* a = c.as<AndNode>()) {
    split_conjuncts(a->a, uniform, varying);
    split_conjuncts(a->b, uniform, varying);
  } else if (c.dtype().lanes == 1) {
    uniform->push_back(c);
  } else if (auto* b = c.as<BroadcastNode>()) {
    uniform->push_back(b->value);
  } else {
    varying->push_back(c);
  }
}

Expr conjunction(const std::vector<Expr>& terms) {
  Expr all = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) all = logical_and(all, terms[i]);
  return all;
}

// Rewrites one loop body with the loop variable replaced by a ramp.
//
// Unmasked (the default), a lane-dependent guard is hoisted out (see
// mutate_if). Masked, the body is the one for the lanes a guard leaves
// partial (the tail of a split that does not divide): each guard's
// lane-dependent conjuncts become the predicate of the loads and stores of
// Global buffers under it, so only the lanes inside touch memory; its
// uniform conjuncts, and the test that some lane is inside, stay an `if`.
// Local buffers (register tiles, indexed inside their allocation) are read
// and written on every lane, so that they stay in registers: a lane outside
// computes a value nothing reads.
class Vectorizer : public IRMutator {
 public:
  Vectorizer(Var var, Expr ramp, int lanes, bool masked = false)
      : var_(std::move(var)), ramp_(std::move(ramp)), lanes_(lanes), masked_(masked) {}

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
  Expr mutate_load(const Expr& e, const LoadNode* op) override {
    Expr r = IRMutator::mutate_load(e, op);
    if (bool(predicate_) && op->buffer->scope != MemScope::Local && r.dtype().lanes == lanes_) {
      auto* l = r.as<LoadNode>();
      if (bool(l->predicate)) throw CannotVectorize();
      return load(l->buffer, l->index, predicate_);
    }
    return r;
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
    if (bool(predicate_) && op->buffer->scope != MemScope::Local)
      return make_store(op->buffer, value, index, predicate_);
    return make_store(op->buffer, value, index);
  }

  // A lane-dependent guard (a split that does not divide) is hoisted: the
  // vector body runs without it when it holds for every lane, and the caller
  // keeps the serial loop for the iterations where it does not.
  Stmt mutate_if(const Stmt& s, const IfThenElseNode* op) override {
    Expr c = simplify(mutate(op->cond));
    if (c.dtype().lanes == 1) return IRMutator::mutate_if(s, op);
    if (masked_) return masked_if(c, op);
    auto all = all_lanes_true(c);
    if (op->else_case || !all || uses_inner_var(*all)) throw CannotVectorize();
    hoisted_guards.push_back(*all);
    return mutate(op->then_case);
  }
  // The partial vector's guard: `if (uniform && some lane inside) then`, the
  // then-case under the predicate of its varying conjuncts.
  Stmt masked_if(const Expr& c, const IfThenElseNode* op) {
    if (op->else_case) throw CannotVectorize();
    std::vector<Expr> uniform, varying;
    split_conjuncts(c, &uniform, &varying);
    for (const Expr& v : varying) {
      auto some = comparison_on_lanes(v, /*every=*/false);
      if (!some) throw CannotVectorize();
      uniform.push_back(*some);
    }
    Expr outer = predicate_;
    if (!varying.empty()) {  // a vector condition of uniform terms only needs no predicate
      Expr lanes = conjunction(varying);
      predicate_ = bool(outer) ? logical_and(outer, lanes) : lanes;
    }
    Stmt then_case = mutate(op->then_case);
    predicate_ = outer;
    return make_if(simplify(conjunction(uniform)), then_case);
  }

  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    if (uses_var(op->min, var_) || uses_var(op->extent, var_)) throw CannotVectorize();
    inner_vars_.push_back(op->var);
    Stmt r = IRMutator::mutate_for(s, op);
    inner_vars_.pop_back();
    return r;
  }
  Stmt mutate_allocate(const Stmt&, const AllocateNode*) override { throw CannotVectorize(); }
  // A run-time index check (ir::Intrinsic::CheckIndex) counts only the lanes
  // inside: a lane that the predicate leaves out read no index (its masked
  // load gives 0), or one from a local tile that nothing else reads.
  Expr mutate_call(const Expr& e, const CallNode* op) override {
    Expr r = IRMutator::mutate_call(e, op);
    auto* c = r.as<CallNode>();
    if (!c || c->op != Intrinsic::CheckIndex || !bool(predicate_) ||
        predicate_.dtype().lanes != c->dtype.lanes)
      return r;
    return check_index(logical_or(c->args[0], logical_not(predicate_)), c->args[1]);
  }
  Stmt mutate_let_stmt(const Stmt& s, const LetStmtNode* op) override {
    Expr v = mutate(op->value);
    if (v.dtype().lanes == 1) return IRMutator::mutate_let_stmt(s, op);
    Var vec(op->var.name(), v.dtype());
    lets_.emplace_back(op->var, vec);
    Stmt body = mutate(op->body);
    lets_.pop_back();
    return make_stmt<LetStmtNode>(vec, v, body);
  }

 public:
  std::vector<Expr> hoisted_guards;  // scalar conditions the vector body needs

 private:
  // Whether e mentions a variable bound inside the loop (so it cannot be hoisted).
  bool uses_inner_var(const Expr& e) const {
    for (auto& v : inner_vars_)
      if (uses_var(e, v)) return true;
    for (auto& [from, to] : lets_)
      if (uses_var(e, from)) return true;
    return uses_var(e, var_);
  }
  std::vector<Var> inner_vars_;

 private:
  Var var_;
  Expr ramp_;
  int lanes_;
  bool masked_;
  Expr predicate_;  // masked: the lanes the enclosing guards leave inside
  std::vector<std::pair<Var, Expr>> lets_;
};

class LoopVectorizer : public IRMutator {
 public:
  explicit LoopVectorizer(int vector_bits) : vector_bits_(vector_bits) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    Stmt body = mutate(op->body);
    const int64_t* ext = as_const_int(op->extent);
    if (op->for_kind != ForKind::Vectorized || !ext || *ext < 2 || *ext > 64) {
      ForKind kind = op->for_kind == ForKind::Vectorized ? ForKind::Serial : op->for_kind;
      return make_for(op->var, op->min, op->extent, kind, body);
    }
    int lanes = static_cast<int>(*ext);
    if (Stmt chunks = native_chunks(op, body, lanes)) return chunks;
    Stmt serial = make_for(op->var, op->min, op->extent, ForKind::Serial, body);
    try {
      Vectorizer v(op->var, ramp(op->min, make_int(1), lanes), lanes);
      Stmt vec = v.mutate(body);
      if (v.hoisted_guards.empty()) return vec;
      return make_if(simplify(conjunction(v.hoisted_guards)), vec,
                     partial_vector(op, body, serial));
    } catch (const CannotVectorize&) {
      return serial;
    }
  }

  // A loop of a whole number (3 or more) of native float vectors that is not
  // a power of two of lanes (48 floats with AVX-512, 24 with AVX2) becomes an
  // unrolled loop over native-width chunks around a vectorized loop of one
  // vector each. LLVM legalizes a <48 x float> carried through a loop (a
  // register tile's accumulators) as pieces of 128 bits shuffled back
  // together every step: a dense 8 x 48 tile ran at 12 GFLOP/s where 8 x 32
  // ran at 145 (Intel Xeon VM, 1 thread; 1554 shuffles in its code, none in
  // the 8 x 32 one). Null when the loop is not such a loop.
  Stmt native_chunks(const ForNode* op, const Stmt& body, int lanes) {
    const int native = vector_bits_ / 32;
    if (native < 2 || (lanes & (lanes - 1)) == 0 || lanes % native != 0 || lanes <= native)
      return Stmt();
    Var chunk(op->var.name() + ".chunk", op->var.dtype()),
        lane(op->var.name() + ".v", op->var.dtype());
    Expr index = op->min + chunk * make_int(native) + lane;
    Stmt inner = make_for(lane, make_int(0), make_int(native), ForKind::Vectorized,
                          substitute(body, {{op->var, index}}));
    return make_for(chunk, make_int(0), make_int(lanes / native), ForKind::Unrolled, mutate(inner));
  }

  // The statement for the iterations where some guard leaves lanes out: the
  // masked vector body, or the serial loop where it cannot be had.
  static Stmt partial_vector(const ForNode* op, const Stmt& body, const Stmt& serial) {
    try {
      Vectorizer m(op->var, ramp(op->min, make_int(1), static_cast<int>(*as_const_int(op->extent))),
                   static_cast<int>(*as_const_int(op->extent)), /*masked=*/true);
      return m.mutate(body);
    } catch (const CannotVectorize&) {
      return serial;
    }
  }

 private:
  int vector_bits_;
};

}  // namespace

Stmt vectorize_loops(const Stmt& s, int vector_bits) {
  LoopVectorizer v(vector_bits);
  return v.mutate(s);
}

}  // namespace kiln::schedule
