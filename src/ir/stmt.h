// Statements of kiln's loop IR.
//
// Lowering first produces TensorStore / Realize (multi-dimensional, one per
// tensor); storage flattening turns them into Store / Allocate on flat
// buffers, which is all that code generation sees.
#pragma once

#include <memory>
#include <vector>

#include "ir/expr.h"

namespace kiln::ir {

enum class StmtKind : uint8_t {
  For,
  Store,
  Allocate,
  LetStmt,
  IfThenElse,
  Seq,
  Evaluate,
  TensorStore,
  Realize,
};

struct StmtNode {
  StmtKind kind;
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }

  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

template <typename T, typename... Args>
Stmt make_stmt(Args&&... args) {
  return Stmt(std::make_shared<const T>(std::forward<Args>(args)...));
}

// Serial runs in order; Parallel becomes a task per iteration block on the
// runtime's thread pool; Vectorized becomes one vector operation per statement
// (extent = lanes); Unrolled is replicated extent times.
// Rolled: a serial loop LLVM must not unroll either (a schedule's reduction
// chunk, whose full unrolling would hoist a whole weight panel into spills).
enum class ForKind : uint8_t { Serial, Parallel, Vectorized, Unrolled, Rolled };
const char* for_kind_name(ForKind k);

struct ForNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::For;
  Var var;
  Expr min, extent;
  ForKind for_kind;
  Stmt body;
  ForNode(Var v, Expr mn, Expr ext, ForKind k, Stmt b)
      : StmtNode(kKind),
        var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        for_kind(k),
        body(std::move(b)) {}
};

// buffer[index] = value; a vector index writes lanes.
// buffer[index] = value; with a predicate (as LoadNode's) only the lanes
// where it holds are written.
struct StoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Store;
  Buffer buffer;
  Expr value, index, predicate;
  StoreNode(Buffer buf, Expr v, Expr i, Expr pred = Expr())
      : StmtNode(kKind),
        buffer(std::move(buf)),
        value(std::move(v)),
        index(std::move(i)),
        predicate(std::move(pred)) {}
};

// Memory for `buffer` (size elements) live during body. Local scope is meant
// for small register/stack tiles; global for heap workspaces.
struct AllocateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Allocate;
  Buffer buffer;
  Expr size;
  Stmt body;
  AllocateNode(Buffer buf, Expr sz, Stmt b)
      : StmtNode(kKind), buffer(std::move(buf)), size(std::move(sz)), body(std::move(b)) {}
};

struct LetStmtNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::LetStmt;
  Var var;
  Expr value;
  Stmt body;
  LetStmtNode(Var v, Expr val, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};

struct IfThenElseNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::IfThenElse;
  Expr cond;
  Stmt then_case, else_case;  // else_case may be null
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind), cond(std::move(c)), then_case(std::move(t)), else_case(std::move(e)) {}
};

struct SeqNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Seq;
  std::vector<Stmt> seq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), seq(std::move(s)) {}
};

struct EvaluateNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Evaluate;
  Expr value;
  explicit EvaluateNode(Expr v) : StmtNode(kKind), value(std::move(v)) {}
};

// tensor[indices...] = value, before storage flattening.
struct TensorStoreNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::TensorStore;
  Tensor tensor;
  std::vector<Expr> indices;
  Expr value;
  TensorStoreNode(Tensor t, std::vector<Expr> idx, Expr v)
      : StmtNode(kKind), tensor(std::move(t)), indices(std::move(idx)), value(std::move(v)) {}
};

// The region of `tensor` that body computes and uses; storage flattening
// allocates exactly this region (`bounds[d].min` maps to offset 0).
struct RealizeNode : StmtNode {
  static constexpr StmtKind kKind = StmtKind::Realize;
  Tensor tensor;
  std::vector<Range> bounds;
  MemScope scope;
  Stmt body;
  RealizeNode(Tensor t, std::vector<Range> b, MemScope s, Stmt bd)
      : StmtNode(kKind),
        tensor(std::move(t)),
        bounds(std::move(b)),
        scope(s),
        body(std::move(bd)) {}
};

Stmt make_for(Var v, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt make_store(Buffer buf, Expr value, Expr index, Expr predicate = Expr());
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = Stmt());
// Flattens nested sequences and drops null statements; one statement stays itself.
Stmt make_seq(std::vector<Stmt> stmts);

}  // namespace kiln::ir
