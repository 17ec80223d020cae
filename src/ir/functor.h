// Visitor and mutator bases over expressions and statements.
//
// Override the visit_/mutate_ hooks for the node kinds a pass cares about and
// call the base to recurse. Mutators rebuild a node only when a child changed,
// so untouched subtrees stay shared.
#pragma once

#include <functional>
#include <set>

#include "ir/expr.h"
#include "ir/stmt.h"

namespace kiln::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
  virtual void visit_int_imm(const IntImmNode*) {}
  virtual void visit_float_imm(const FloatImmNode*) {}
  virtual void visit_var(const VarNode*) {}
  virtual void visit_binary(const BinaryNode* op);
  virtual void visit_not(const NotNode* op);
  virtual void visit_select(const SelectNode* op);
  virtual void visit_cast(const CastNode* op);
  virtual void visit_call(const CallNode* op);
  virtual void visit_let(const LetNode* op);
  virtual void visit_load(const LoadNode* op);
  virtual void visit_ramp(const RampNode* op);
  virtual void visit_broadcast(const BroadcastNode* op);
  virtual void visit_tensor_read(const TensorReadNode* op);
  virtual void visit_reduce(const ReduceNode* op);

  virtual void visit_for(const ForNode* op);
  virtual void visit_store(const StoreNode* op);
  virtual void visit_allocate(const AllocateNode* op);
  virtual void visit_let_stmt(const LetStmtNode* op);
  virtual void visit_if(const IfThenElseNode* op);
  virtual void visit_seq(const SeqNode* op);
  virtual void visit_evaluate(const EvaluateNode* op);
  virtual void visit_tensor_store(const TensorStoreNode* op);
  virtual void visit_realize(const RealizeNode* op);
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  // Each hook receives the handle (to return unchanged) and its node.
  virtual Expr mutate_int_imm(const Expr& e, const IntImmNode*) { return e; }
  virtual Expr mutate_float_imm(const Expr& e, const FloatImmNode*) { return e; }
  virtual Expr mutate_var(const Expr& e, const VarNode*) { return e; }
  virtual Expr mutate_binary(const Expr& e, const BinaryNode* op);
  virtual Expr mutate_not(const Expr& e, const NotNode* op);
  virtual Expr mutate_select(const Expr& e, const SelectNode* op);
  virtual Expr mutate_cast(const Expr& e, const CastNode* op);
  virtual Expr mutate_call(const Expr& e, const CallNode* op);
  virtual Expr mutate_let(const Expr& e, const LetNode* op);
  virtual Expr mutate_load(const Expr& e, const LoadNode* op);
  virtual Expr mutate_ramp(const Expr& e, const RampNode* op);
  virtual Expr mutate_broadcast(const Expr& e, const BroadcastNode* op);
  virtual Expr mutate_tensor_read(const Expr& e, const TensorReadNode* op);
  virtual Expr mutate_reduce(const Expr& e, const ReduceNode* op);

  virtual Stmt mutate_for(const Stmt& s, const ForNode* op);
  virtual Stmt mutate_store(const Stmt& s, const StoreNode* op);
  virtual Stmt mutate_allocate(const Stmt& s, const AllocateNode* op);
  virtual Stmt mutate_let_stmt(const Stmt& s, const LetStmtNode* op);
  virtual Stmt mutate_if(const Stmt& s, const IfThenElseNode* op);
  virtual Stmt mutate_seq(const Stmt& s, const SeqNode* op);
  virtual Stmt mutate_evaluate(const Stmt& s, const EvaluateNode* op);
  virtual Stmt mutate_tensor_store(const Stmt& s, const TensorStoreNode* op);
  virtual Stmt mutate_realize(const Stmt& s, const RealizeNode* op);
};

// Calls f on every expression node (pre-order) under e or s.
void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& f);
void post_order_visit(const Stmt& s, const std::function<void(const Expr&)>& f);

// Replaces variables by expressions.
Expr substitute(const Expr& e, const std::vector<std::pair<Var, Expr>>& map);
Stmt substitute(const Stmt& s, const std::vector<std::pair<Var, Expr>>& map);

// Replaces every read of `t` under e by rewrite(indices of that read); the
// indices are already rewritten themselves.
Expr replace_tensor_reads(const Expr& e, const Tensor& t,
                          const std::function<Expr(const std::vector<Expr>&)>& rewrite);

// Whether e (or s) mentions v.
bool uses_var(const Expr& e, const Var& v);
bool uses_var(const Stmt& s, const Var& v);

// The variables bound inside s: loop variables and let variables (statement
// and expression lets).
std::set<const VarNode*> vars_bound_in(const Stmt& s);

}  // namespace kiln::ir
