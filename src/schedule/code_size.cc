#include "schedule/code_size.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>

#include "ir/functor.h"

namespace kiln::schedule {

using namespace kiln::ir;

namespace {

// Saturating arithmetic: a product of unroll extents must not wrap around.
constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 4;
int64_t add(int64_t a, int64_t b) { return std::min(kMax, a + b); }
int64_t mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

// Per-statement weights: a loop's header (phi, increment, compare, branch), a
// parallel loop's closure and launch, a branch.
constexpr int64_t kLoopOverhead = 3, kParallelOverhead = 10, kBranchOverhead = 1;
// A loop inside an unrolled one becomes one loop per copy, and LLVM's loop
// passes (vectorizer with its epilogue and runtime checks, full unrolling of
// small constant trip counts) work on each: per copy it costs compile time
// like this many straight-line operations (calibrated: 256 copies of a
// 32-iteration scalar fallback loop in a 30k-operation dense tile took 32 s,
// 512 copies 185 s, where 40k straight-line operations take 5 s).
constexpr int64_t kReplicatedLoopWeight = 2000;

// Every buffer a kernel takes is a noalias parameter of its body, and LLVM
// carries that as scoped-noalias metadata on each load and store: one scope
// per access and, in its noalias list, the scopes of all the other buffers.
// Its alias queries then cost in proportion to accesses x buffers, which no
// per-operation weight sees: a chain of 2,000 fused Adds of distinct
// constants (2,001 buffers, about 2,000 accesses, 6,013 operations) took
// 3.4 s in LLVM (1,000 Adds 0.8 s, 500 0.2 s) where 6,000 operations over
// 3 buffers take under 0.1 s. One operation's worth of compile time per this
// many (access, buffer) pairs puts those chains at the rate of the straight-
// line tiles kDefaultCodeBudget was calibrated on (about 20k operations a
// second; Zen 4, LLVM 16): 68k, 19k and 5k estimated operations. The
// templates' kernels take a handful of buffers, whose short scope lists are
// in the per-operation weights kDefaultCodeBudget was calibrated with: only
// the buffers past kAliasFreeBuffers count.
constexpr int64_t kAliasPairsPerOperation = 64;
constexpr int64_t kAliasFreeBuffers = 16;

class Estimator {
 public:
  explicit Estimator(int vector_bits) : vector_bits_(std::max(8, vector_bits)) {}

  // Registers a value of type t occupies: one for a scalar.
  int64_t width(DataType t) const {
    if (t.lanes <= 1) return 1;
    int64_t bits = static_cast<int64_t>(t.lanes) * std::max<int>(t.bits, 8);
    return std::max<int64_t>(1, (bits + vector_bits_ - 1) / vector_bits_);
  }

  // Whether cond is `i == c` (either way round) for the index i of an
  // enclosing unrolled loop and a constant c.
  bool on_unrolled_index(const Expr& cond) const {
    if (cond.kind() == ExprKind::Broadcast)  // a vectorized select's condition
      return on_unrolled_index(static_cast<const BroadcastNode*>(cond.get())->value);
    if (cond.kind() != ExprKind::EQ) return false;
    auto* n = static_cast<const BinaryNode*>(cond.get());
    auto unrolled_var = [&](const Expr& x) {
      auto* v = x.as<VarNode>();
      return v && unrolled_vars_.count(v);
    };
    return (unrolled_var(n->a) && as_const_int(n->b)) || (unrolled_var(n->b) && as_const_int(n->a));
  }

  int64_t expr(const Expr& e) const {
    if (!e) return 0;
    switch (e.kind()) {
      case ExprKind::IntImm:
      case ExprKind::FloatImm:
      case ExprKind::Var: return 0;
      case ExprKind::Not: {
        auto* n = static_cast<const NotNode*>(e.get());
        return add(width(e.dtype()), expr(n->a));
      }
      case ExprKind::Select: {
        auto* n = static_cast<const SelectNode*>(e.get());
        // A choice on an unrolled loop's index (Winograd's transform rows:
        // select(eps == 2, row 2, ...)) folds in every copy: each copy keeps
        // one branch.
        if (on_unrolled_index(n->cond)) return std::max(expr(n->true_value), expr(n->false_value));
        return add(width(e.dtype()),
                   add(expr(n->cond), add(expr(n->true_value), expr(n->false_value))));
      }
      case ExprKind::Cast: {
        auto* n = static_cast<const CastNode*>(e.get());
        return add(width(e.dtype()), expr(n->value));
      }
      case ExprKind::Call: {
        auto* n = static_cast<const CallNode*>(e.get());
        int64_t s = width(e.dtype());
        for (const Expr& a : n->args) s = add(s, expr(a));
        return s;
      }
      case ExprKind::Let: {
        auto* n = static_cast<const LetNode*>(e.get());
        return add(expr(n->value), expr(n->body));
      }
      case ExprKind::Load: {
        auto* n = static_cast<const LoadNode*>(e.get());
        return add(width(e.dtype()), add(expr(n->index), expr(n->predicate)));
      }
      case ExprKind::Ramp: {
        // The lanes' offsets are constants of the address: the base's cost.
        auto* n = static_cast<const RampNode*>(e.get());
        return add(1, add(expr(n->base), expr(n->stride)));
      }
      case ExprKind::Broadcast: {
        auto* n = static_cast<const BroadcastNode*>(e.get());
        return add(width(e.dtype()), expr(n->value));
      }
      case ExprKind::TensorRead: {
        auto* n = static_cast<const TensorReadNode*>(e.get());
        int64_t s = width(e.dtype());
        for (const Expr& i : n->indices) s = add(s, expr(i));
        return s;
      }
      case ExprKind::Reduce: {
        auto* n = static_cast<const ReduceNode*>(e.get());
        return add(width(e.dtype()), expr(n->source));
      }
      default: {
        // Arithmetic, min/max, comparisons, and/or: one operation each.
        auto* n = static_cast<const BinaryNode*>(e.get());
        return add(std::max(width(e.dtype()), width(n->a.dtype())), add(expr(n->a), expr(n->b)));
      }
    }
  }

  // replicated: s is inside an unrolled loop (its loops become one per copy).
  int64_t stmt(const Stmt& s, bool replicated = false) const {
    if (!s) return 0;
    auto sub = [&](const Stmt& c) { return stmt(c, replicated); };
    switch (s.kind()) {
      case StmtKind::For: {
        auto* n = s.as<ForNode>();
        const int64_t* ext = as_const_int(n->extent);
        const bool unrolled = n->for_kind == ForKind::Unrolled && ext;
        if (unrolled) unrolled_vars_.insert(n->var.get());
        int64_t body = stmt(n->body, replicated || (unrolled && *ext > 1));
        if (unrolled) unrolled_vars_.erase(n->var.get());
        int64_t header = add(expr(n->min), expr(n->extent));
        if (unrolled) return add(header, mul(body, *ext));
        int64_t overhead = n->for_kind == ForKind::Parallel ? kParallelOverhead : kLoopOverhead;
        if (replicated) overhead = add(overhead, kReplicatedLoopWeight);
        return add(header, add(overhead, body));
      }
      case StmtKind::Store: {
        auto* n = s.as<StoreNode>();
        return add(width(n->value.dtype()),
                   add(expr(n->value), add(expr(n->index), expr(n->predicate))));
      }
      case StmtKind::Allocate: {
        auto* n = s.as<AllocateNode>();
        return add(1, add(expr(n->size), sub(n->body)));
      }
      case StmtKind::LetStmt: {
        auto* n = s.as<LetStmtNode>();
        return add(expr(n->value), sub(n->body));
      }
      case StmtKind::IfThenElse: {
        auto* n = s.as<IfThenElseNode>();
        return add(kBranchOverhead, add(expr(n->cond), add(sub(n->then_case), sub(n->else_case))));
      }
      case StmtKind::Seq: {
        int64_t t = 0;
        for (const Stmt& c : s.as<SeqNode>()->seq) t = add(t, sub(c));
        return t;
      }
      case StmtKind::Evaluate: return expr(s.as<EvaluateNode>()->value);
      case StmtKind::TensorStore: {
        auto* n = s.as<TensorStoreNode>();
        int64_t t = add(width(n->value.dtype()), expr(n->value));
        for (const Expr& i : n->indices) t = add(t, expr(i));
        return t;
      }
      case StmtKind::Realize: return sub(s.as<RealizeNode>()->body);
    }
    return 0;
  }

 private:
  int64_t vector_bits_;
  // The indices of the unrolled loops around the statement being estimated.
  mutable std::set<const VarNode*> unrolled_vars_;
};

// The memory accesses of a statement as LLVM receives it (a loop still
// marked Unrolled counts its body's accesses extent times), and the distinct
// buffers they reach that the statement does not allocate itself (the
// kernel's arguments).
class AliasPairs : public IRVisitor {
 public:
  int64_t pairs(const Stmt& s) {
    visit(s);
    std::set<const void*> args;
    std::set_difference(accessed_.begin(), accessed_.end(), allocated_.begin(), allocated_.end(),
                        std::inserter(args, args.begin()));
    return mul(accesses_,
               std::max<int64_t>(0, static_cast<int64_t>(args.size()) - kAliasFreeBuffers));
  }

 protected:
  void access(const void* buffer) {
    accessed_.insert(buffer);
    accesses_ = add(accesses_, copies_);
  }
  void visit_load(const LoadNode* op) override {
    access(op->buffer.get());
    IRVisitor::visit_load(op);
  }
  void visit_store(const StoreNode* op) override {
    access(op->buffer.get());
    IRVisitor::visit_store(op);
  }
  void visit_tensor_read(const TensorReadNode* op) override {
    access(op->tensor.get());
    IRVisitor::visit_tensor_read(op);
  }
  void visit_tensor_store(const TensorStoreNode* op) override {
    access(op->tensor.get());
    IRVisitor::visit_tensor_store(op);
  }
  void visit_allocate(const AllocateNode* op) override {
    allocated_.insert(op->buffer.get());
    IRVisitor::visit_allocate(op);
  }
  void visit_realize(const RealizeNode* op) override {
    allocated_.insert(op->tensor.get());
    IRVisitor::visit_realize(op);
  }
  void visit_for(const ForNode* op) override {
    const int64_t* ext = as_const_int(op->extent);
    if (op->for_kind != ForKind::Unrolled || !ext) return IRVisitor::visit_for(op);
    int64_t outer = copies_;
    copies_ = mul(copies_, std::max<int64_t>(*ext, 0));
    IRVisitor::visit_for(op);
    copies_ = outer;
  }

 private:
  int64_t copies_ = 1, accesses_ = 0;
  std::set<const void*> accessed_, allocated_;
};

// Operations, plus the alias analysis's share of compile time.
int64_t total_size(const Estimator& est, const Stmt& s) {
  return add(est.stmt(s), AliasPairs().pairs(s) / kAliasPairsPerOperation);
}

// The outermost Unrolled loops with a constant extent (inside no other such
// loop), each with its unrolled size.
class OutermostUnrolled : public IRVisitor {
 public:
  explicit OutermostUnrolled(const Estimator& est) : est_(est) {}
  std::vector<std::pair<const ForNode*, int64_t>> loops;

 protected:
  void visit_for(const ForNode* op) override {
    if (op->for_kind == ForKind::Unrolled && as_const_int(op->extent)) {
      loops.emplace_back(op,
                         est_.stmt(make_for(op->var, op->min, op->extent, op->for_kind, op->body)));
      return;  // inner unrolled loops are not outermost
    }
    IRVisitor::visit_for(op);
  }

 public:
  using IRVisitor::visit;
  // Expressions hold no loops.
  void visit(const Expr&) override {}

 private:
  const Estimator& est_;
};

// Makes one loop (by node) serial.
class Demote : public IRMutator {
 public:
  explicit Demote(const ForNode* target) : target_(target) {}

 protected:
  Stmt mutate_for(const Stmt& s, const ForNode* op) override {
    if (op == target_) return make_for(op->var, op->min, op->extent, ForKind::Serial, op->body);
    return IRMutator::mutate_for(s, op);
  }

 public:
  using IRMutator::mutate;
  Expr mutate(const Expr& e) override { return e; }

 private:
  const ForNode* target_;
};

}  // namespace

int64_t estimate_code_size(const Stmt& s, int vector_bits) {
  return total_size(Estimator(vector_bits), s);
}

CodeBudgetResult fit_code_budget(const Stmt& s, int64_t budget, int vector_bits) {
  Estimator est(vector_bits);
  CodeBudgetResult r;
  r.stmt = s;
  r.size_before = r.size_after = total_size(est, s);
  if (budget <= 0) return r;
  while (r.size_after > budget) {
    OutermostUnrolled finder(est);
    finder.visit(r.stmt);
    if (finder.loops.empty()) break;
    auto largest =
        std::max_element(finder.loops.begin(), finder.loops.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    r.demoted.push_back(largest->first->var.name());
    r.stmt = Demote(largest->first).mutate(r.stmt);
    r.size_after = total_size(est, r.stmt);
  }
  return r;
}

CodeBudgetExceeded::CodeBudgetExceeded(const std::string& kernel, int64_t size, int64_t budget)
    : std::runtime_error("kernel '" + kernel + "' is estimated at " + std::to_string(size) +
                         " operations after unrolling, over the compile budget of " +
                         std::to_string(budget) + " (schedule/code_size.h)"),
      size(size),
      budget(budget) {}

}  // namespace kiln::schedule
