// Constant integer bounds: interval arithmetic over the expression tree.
//
// Every rule is sound in the mathematical integers: any overflow of the
// bound computation itself widens the result to "unbounded". Expressions are
// assumed not to overflow their own type (as in C, where signed overflow is
// undefined), except unsigned arithmetic, which wraps and so gets only the
// range of its type.
#include "ir/const_int_bound.h"

#include <algorithm>
#include <cstdlib>

#include "ir/simplify.h"

namespace kiln::ir::arith {

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floormod_i(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Bound type_bound(DataType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_int() && t.bits < 64) {
    int64_t m = int64_t(1) << (t.bits - 1);
    return {-m, m - 1};
  }
  if (t.is_uint()) return {0, t.bits < 64 ? (int64_t(1) << t.bits) - 1 : kPosInf};
  return {};
}

namespace {

// A lower bound can never be +inf nor an upper bound -inf: such values only
// arise from saturation and mean "unknown" on that side.
Bound normalize(Bound b) {
  if (b.lo == kPosInf) b.lo = kNegInf;
  if (b.hi == kNegInf) b.hi = kPosInf;
  return b;
}

// Sum of two lower (or two upper) bounds; `inf` is that side's infinity.
int64_t add_side(int64_t a, int64_t b, int64_t inf) {
  if (a == inf || b == inf) return inf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r == kNegInf || r == kPosInf) return inf;
  return r;
}

int64_t neg_ext(int64_t a) {
  if (a == kNegInf) return kPosInf;
  if (a == kPosInf) return kNegInf;
  return -a;
}

Bound add(Bound a, Bound b) {
  return {add_side(a.lo, b.lo, kNegInf), add_side(a.hi, b.hi, kPosInf)};
}
Bound negate(Bound a) { return {neg_ext(a.hi), neg_ext(a.lo)}; }
Bound sub(Bound a, Bound b) { return add(a, negate(b)); }

// Product in the extended integers; overflow saturates by sign, which is
// exact enough for min/max of corners (see normalize).
int64_t mul_ext(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  int64_t r;
  bool inf = a == kNegInf || a == kPosInf || b == kNegInf || b == kPosInf;
  if (inf || __builtin_mul_overflow(a, b, &r) || r == kNegInf || r == kPosInf)
    return neg ? kNegInf : kPosInf;
  return r;
}

template <typename F>
Bound corners(Bound a, Bound b, F f) {
  int64_t v[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
  return normalize({*std::min_element(v, v + 4), *std::max_element(v, v + 4)});
}

Bound mul(Bound a, Bound b) { return corners(a, b, mul_ext); }

// A divisor range usable for division bounds: finite and excluding zero.
bool good_divisor(Bound b) { return b.finite() && (b.lo > 0 || b.hi < 0); }

// Division is monotone in each argument while the divisor keeps its sign,
// so the corners bound it.
Bound div(Bound a, Bound b, bool floor) {
  if (!good_divisor(b)) return {};
  return corners(a, b, [floor](int64_t x, int64_t y) {
    if (x == kNegInf || x == kPosInf) return (x < 0) != (y < 0) ? kNegInf : kPosInf;
    return floor ? floordiv_i(x, y) : x / y;
  });
}

Bound floormod(Bound a, Bound b) {
  if (!good_divisor(b)) return {};
  // Within a single period the result is the numerator shifted.
  if (b.lo == b.hi && a.finite() && floordiv_i(a.lo, b.lo) == floordiv_i(a.hi, b.lo))
    return {floormod_i(a.lo, b.lo), floormod_i(a.hi, b.lo)};
  if (b.lo > 0) {
    if (a.lo >= 0) return {0, std::min(a.hi, b.hi - 1)};
    return {0, b.hi - 1};
  }
  if (a.hi <= 0) return {std::max(a.lo, b.lo + 1), 0};
  return {b.lo + 1, 0};
}

// Truncating modulo takes the numerator's sign and is smaller in magnitude
// than the divisor.
Bound truncmod(Bound a, Bound b) {
  if (!good_divisor(b)) return {};
  int64_t m = std::max(std::abs(b.lo), std::abs(b.hi)) - 1;
  Bound r{std::max(a.lo, -m), std::min(a.hi, m)};
  if (a.lo >= 0) r.lo = 0;
  if (a.hi <= 0) r.hi = 0;
  return r;
}

Bound intersect(Bound a, Bound b) { return {std::max(a.lo, b.lo), std::min(a.hi, b.hi)}; }
Bound unite(Bound a, Bound b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }
bool contains(Bound outer, Bound inner) { return outer.lo <= inner.lo && inner.hi <= outer.hi; }

}  // namespace

Bound BoundAnalyzer::get(const Expr& e) {
  if (auto* i = e.as<IntImmNode>()) {
    if (e.dtype().is_uint() && e.dtype().bits == 64 && i->value < 0) return type_bound(e.dtype());
    return normalize({i->value, i->value});
  }
  if (auto* v = e.as<VarNode>()) {
    auto it = vars_.find(v);
    return it != vars_.end() ? it->second : type_bound(e.dtype().element_of());
  }
  auto it = cache_.find(e.get());
  if (it != cache_.end()) return it->second.second;
  Bound b = normalize(compute(e));
  // Assume no overflow of signed types narrower than int64 (as in C).
  if (e.dtype().is_int()) b = intersect(b, type_bound(e.dtype().element_of()));
  cache_.emplace(e.get(), std::make_pair(e, b));
  return b;
}

std::optional<Bound> BoundAnalyzer::bind(const VarNode* v, Bound b) {
  cache_.clear();
  auto it = vars_.find(v);
  std::optional<Bound> old;
  if (it != vars_.end()) old = it->second;
  vars_[v] = normalize(b);
  return old;
}

void BoundAnalyzer::restore(const VarNode* v, std::optional<Bound> old) {
  cache_.clear();
  if (old)
    vars_[v] = *old;
  else
    vars_.erase(v);
}

Bound BoundAnalyzer::compute(const Expr& e) {
  DataType t = e.dtype().element_of();
  // Unsigned arithmetic wraps: only the type's range is certain.
  if (t.is_uint() && e.kind() != ExprKind::Cast) return type_bound(t);
  if (!t.is_int() && !t.is_bool()) return {};
  switch (e.kind()) {
    case ExprKind::Not: return {0, 1};
    case ExprKind::Select: {
      auto* s = e.as<SelectNode>();
      return unite(get(s->true_value), get(s->false_value));
    }
    case ExprKind::Cast: return cast(e.as<CastNode>());
    case ExprKind::Let: return let(e.as<LetNode>());
    case ExprKind::Ramp: {
      auto* r = e.as<RampNode>();
      return add(get(r->base), mul(get(r->stride), Bound{0, r->lanes - 1}));
    }
    case ExprKind::Broadcast: return get(e.as<BroadcastNode>()->value);
    case ExprKind::Call: {
      auto* c = e.as<CallNode>();
      if (c->op == Intrinsic::CheckIndex) return get(c->args[1]);  // its value, unchanged
      return type_bound(t);
    }
    default:
      if (is_binary(e.kind())) return binary(static_cast<const BinaryNode*>(e.get()));
      return type_bound(t);
  }
}

Bound BoundAnalyzer::binary(const BinaryNode* op) {
  if (is_comparison(op->kind) || op->kind == ExprKind::And || op->kind == ExprKind::Or)
    return {0, 1};
  Bound a = get(op->a), b = get(op->b);
  switch (op->kind) {
    case ExprKind::Add: return add(a, b);
    case ExprKind::Sub: return sub(a, b);
    case ExprKind::Mul: return mul(a, b);
    case ExprKind::Div: return div(a, b, false);
    case ExprKind::FloorDiv: return div(a, b, true);
    case ExprKind::Mod: return truncmod(a, b);
    case ExprKind::FloorMod: return floormod(a, b);
    case ExprKind::Min: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
    case ExprKind::Max: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    default: return {};
  }
}

Bound BoundAnalyzer::let(const LetNode* op) {
  Bound v = get(op->value);
  auto old = bind(op->var.get(), v);
  Bound r = get(op->body);
  restore(op->var.get(), old);
  return r;
}

Bound BoundAnalyzer::cast(const CastNode* op) {
  DataType to = op->dtype.element_of(), from = op->value.dtype().element_of();
  Bound range = type_bound(to);
  if (to.is_bool() || !(from.is_int() || from.is_bool() || from.is_uint())) return range;
  // uint64 values above INT64_MAX reinterpret as negative int64s.
  if (from.is_uint() && from.bits == 64) return range;
  Bound v = get(op->value);
  if (contains(range, v) || (to.is_int() && to.bits == 64)) return v;
  return range;
}

}  // namespace kiln::ir::arith

namespace kiln::ir {

ConstIntBound const_int_bound(const Expr& e, const VarRanges& ranges) {
  arith::BoundAnalyzer an;
  for (auto& [v, r] : ranges)
    an.bind(v.get(), {r.min_value.value_or(arith::kNegInf), r.max_value.value_or(arith::kPosInf)});
  arith::Bound b = an.get(e);
  ConstIntBound out;
  if (b.lo != arith::kNegInf) out.min_value = b.lo;
  if (b.hi != arith::kPosInf) out.max_value = b.hi;
  return out;
}

}  // namespace kiln::ir
