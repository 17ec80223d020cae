// Internal to the simplifier: constant integer bounds with scoped variable
// ranges and a per-analysis cache. The public entry point is
// `const_int_bound` in ir/simplify.h.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>

#include "ir/expr.h"

namespace kiln::ir::arith {

// Sentinels for "unbounded" on either side. A real INT64_MIN / INT64_MAX value
// is conservatively treated as unbounded too.
constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();

// Inclusive [lo, hi]; the default is fully unbounded.
struct Bound {
  int64_t lo = kNegInf, hi = kPosInf;
  bool finite() const { return lo != kNegInf && hi != kPosInf; }
  bool is_const() const { return finite() && lo == hi; }
};

// Floor division and modulo (round toward negative infinity); b != 0, and
// not (INT64_MIN, -1).
int64_t floordiv_i(int64_t a, int64_t b);
int64_t floormod_i(int64_t a, int64_t b);

// Computes bounds of integer expressions. Variables without a binding get
// the range of their type.
class BoundAnalyzer {
 public:
  Bound get(const Expr& e);

  // Binds v's range and returns the previous binding (to restore with
  // `restore`). Any change of bindings drops cached results.
  std::optional<Bound> bind(const VarNode* v, Bound b);
  void restore(const VarNode* v, std::optional<Bound> old);

 private:
  Bound compute(const Expr& e);
  Bound binary(const BinaryNode* op);
  Bound let(const LetNode* op);
  Bound cast(const CastNode* op);

  std::unordered_map<const VarNode*, Bound> vars_;
  // Keyed by node; the Expr keeps the node alive so its address is not reused.
  std::unordered_map<const ExprNode*, std::pair<Expr, Bound>> cache_;
};

// The value range of a scalar type (unbounded for int64 and non-integers).
Bound type_bound(DataType t);

}  // namespace kiln::ir::arith
