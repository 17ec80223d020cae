// The expression rewriter of the simplifier (see canonical_rewriter.h).
//
// Correctness notes, since every rule must hold for all values:
// - floordiv/floormod identities hold for any sign of the numerator when the
//   divisor is positive; truncating Div/Mod use them only when the numerator
//   is provably non-negative (where both agree) or the division is exact.
// - All coefficient arithmetic is checked for int64 overflow; on overflow a
//   rule does not fire.
// - Float rules are limited to exact identities (x*1, x - 0, x/1) and folding.
#include "ir/canonical_rewriter.h"

#include <cmath>
#include <numeric>

#include "ir/tensor.h"

namespace kiln::ir::arith {

namespace {

constexpr int kMaxRounds = 4;

bool signed_scalar(DataType t) { return t.is_int() && t.lanes == 1; }

int64_t wrap_to(int64_t v, DataType t) {
  DataType s = t.element_of();
  if (s.is_bool()) return v != 0;
  if (s.bits >= 64) return v;
  uint64_t u = static_cast<uint64_t>(v);
  if (s.is_uint()) return static_cast<int64_t>(u & ((uint64_t(1) << s.bits) - 1));
  int shift = 64 - s.bits;
  return static_cast<int64_t>(u << shift) >> shift;
}

// An integer constant of type t (broadcast when t is a vector).
Expr int_const(int64_t v, DataType t) {
  Expr s = make_expr<IntImmNode>(t.element_of(), wrap_to(v, t));
  return t.lanes > 1 ? broadcast(s, t.lanes) : s;
}

Expr bool_const(bool v, int lanes) { return int_const(v, DataType::boolean(lanes)); }

const IntImmNode* int_imm(const Expr& e) {
  if (auto* b = e.as<BroadcastNode>()) return b->value.as<IntImmNode>();
  return e.as<IntImmNode>();
}

const int64_t* scalar_int(const Expr& e) {
  auto* i = e.as<IntImmNode>();
  return i ? &i->value : nullptr;
}

int64_t ceildiv_i(int64_t a, int64_t b) { return floordiv_i(a, b) + (floormod_i(a, b) != 0); }

// ---- constant folding -----------------------------------------------------------

// min/max, comparisons and logic: the same for signed and unsigned operands
// once they are compared in their own type.
template <typename T>
std::optional<int64_t> fold_order_and_logic(ExprKind k, T a, T b) {
  switch (k) {
    case ExprKind::Min: return static_cast<int64_t>(std::min(a, b));
    case ExprKind::Max: return static_cast<int64_t>(std::max(a, b));
    case ExprKind::EQ: return a == b;
    case ExprKind::NE: return a != b;
    case ExprKind::LT: return a < b;
    case ExprKind::LE: return a <= b;
    case ExprKind::GT: return a > b;
    case ExprKind::GE: return a >= b;
    case ExprKind::And: return a && b;
    case ExprKind::Or: return a || b;
    default: return std::nullopt;
  }
}

std::optional<int64_t> fold_unsigned(ExprKind k, uint64_t a, uint64_t b) {
  switch (k) {
    case ExprKind::Add: return a + b;
    case ExprKind::Sub: return a - b;
    case ExprKind::Mul: return a * b;
    case ExprKind::Div:
    case ExprKind::FloorDiv: return b ? std::optional<int64_t>(a / b) : std::nullopt;
    case ExprKind::Mod:
    case ExprKind::FloorMod: return b ? std::optional<int64_t>(a % b) : std::nullopt;
    default: return fold_order_and_logic(k, a, b);
  }
}

std::optional<int64_t> fold_signed(ExprKind k, int64_t a, int64_t b) {
  bool div = k == ExprKind::Div || k == ExprKind::Mod || k == ExprKind::FloorDiv ||
             k == ExprKind::FloorMod;
  if (div && (b == 0 || (a == INT64_MIN && b == -1))) return std::nullopt;
  switch (k) {
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Mul: return fold_unsigned(k, a, b);  // two's complement wrap
    case ExprKind::Div: return a / b;
    case ExprKind::Mod: return a % b;
    case ExprKind::FloorDiv: return floordiv_i(a, b);
    case ExprKind::FloorMod: return floormod_i(a, b);
    default: return fold_order_and_logic(k, a, b);
  }
}

// Rounds a folded float to the precision of t; nullopt where kiln cannot
// round (half types are left to code generation).
std::optional<double> round_to(double v, DataType t) {
  if (t.code != TypeCode::Float) return std::nullopt;
  if (t.bits == 32) return static_cast<double>(static_cast<float>(v));
  if (t.bits == 64) return v;
  return std::nullopt;
}

Expr fold_float(ExprKind k, double a, double b, DataType t) {
  if (is_comparison(k)) {
    bool r = k == ExprKind::EQ   ? a == b
             : k == ExprKind::NE ? a != b
             : k == ExprKind::LT ? a < b
             : k == ExprKind::LE ? a <= b
             : k == ExprKind::GT ? a > b
                                 : a >= b;
    return make_bool(r);
  }
  std::optional<double> r;
  bool nan = std::isnan(a) || std::isnan(b);
  switch (k) {
    case ExprKind::Add: r = a + b; break;
    case ExprKind::Sub: r = a - b; break;
    case ExprKind::Mul: r = a * b; break;
    case ExprKind::Div: r = a / b; break;
    case ExprKind::Min:
      if (!nan) r = std::min(a, b);
      break;
    case ExprKind::Max:
      if (!nan) r = std::max(a, b);
      break;
    default: break;
  }
  if (r) r = round_to(*r, t);
  return r ? make_float(*r, t) : Expr();
}

// Folds k(a, b) of two scalar immediates; null if it cannot.
Expr fold(ExprKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (auto* x = a.as<IntImmNode>(), *y = b.as<IntImmNode>(); x && y) {
    auto r = t.is_uint() || t.is_bool() ? fold_unsigned(k, x->value, y->value)
                                        : fold_signed(k, x->value, y->value);
    if (!r) return Expr();
    bool boolean = is_comparison(k) || k == ExprKind::And || k == ExprKind::Or;
    return boolean ? make_bool(*r != 0) : int_const(*r, t);
  }
  if (auto* x = a.as<FloatImmNode>(), *y = b.as<FloatImmNode>(); x && y)
    return fold_float(k, x->value, y->value, t);
  return Expr();
}

Expr plain(ExprKind k, const Expr& a, const Expr& b) { return make_binary(k, a, b); }

ExprKind flip(ExprKind k) {
  switch (k) {
    case ExprKind::LT: return ExprKind::GT;
    case ExprKind::LE: return ExprKind::GE;
    case ExprKind::GT: return ExprKind::LT;
    case ExprKind::GE: return ExprKind::LE;
    default: return k;
  }
}

ExprKind negate_cmp(ExprKind k) {
  switch (k) {
    case ExprKind::LT: return ExprKind::GE;
    case ExprKind::LE: return ExprKind::GT;
    case ExprKind::GT: return ExprKind::LE;
    case ExprKind::GE: return ExprKind::LT;
    case ExprKind::EQ: return ExprKind::NE;
    default: return ExprKind::EQ;
  }
}

// Decides `d k 0` from the bounds of d, if they allow.
std::optional<bool> decide(ExprKind k, Bound d) {
  switch (k) {
    case ExprKind::LT:
      if (d.hi < 0) return true;
      if (d.lo >= 0) return false;
      break;
    case ExprKind::LE:
      if (d.hi <= 0) return true;
      if (d.lo > 0) return false;
      break;
    case ExprKind::GT:
      if (d.lo > 0) return true;
      if (d.hi <= 0) return false;
      break;
    case ExprKind::GE:
      if (d.lo >= 0) return true;
      if (d.hi < 0) return false;
      break;
    case ExprKind::EQ:
    case ExprKind::NE: {
      std::optional<bool> eq;
      if (d.lo == 0 && d.hi == 0) eq = true;
      if (d.lo > 0 || d.hi < 0) eq = false;
      if (eq && k == ExprKind::NE) eq = !*eq;
      return eq;
    }
    default: break;
  }
  return std::nullopt;
}

// Divides all coefficients and the constant of l by g (which divides them).
void divide(Linear& l, int64_t g) {
  for (auto& t : l.terms) t.second /= g;
  l.constant /= g;
}

Linear single(const Expr& atom, int64_t coef, DataType t) {
  Linear l;
  l.dtype = t;
  l.terms.emplace_back(atom, coef);
  return l;
}

Linear constant(int64_t c, DataType t) {
  Linear l;
  l.dtype = t;
  l.constant = c;
  return l;
}

}  // namespace

// ---- driver and traversal -----------------------------------------------------------

Expr Rewriter::simplify(const Expr& e) {
  Expr cur = e;
  for (int i = 0; i < kMaxRounds; ++i) {
    Expr next = mutate(cur);
    if (struct_equal(next, cur)) return next;
    cur = next;
  }
  return cur;
}

Expr Rewriter::mutate_binary(const Expr& e, const BinaryNode* op) {
  return binary(op->kind, mutate(op->a), mutate(op->b));
}
Expr Rewriter::mutate_not(const Expr& e, const NotNode* op) { return make_not(mutate(op->a)); }
Expr Rewriter::mutate_select(const Expr& e, const SelectNode* op) {
  return make_select(mutate(op->cond), mutate(op->true_value), mutate(op->false_value));
}
Expr Rewriter::mutate_cast(const Expr& e, const CastNode* op) {
  return make_cast(op->dtype, mutate(op->value));
}
Expr Rewriter::mutate_ramp(const Expr& e, const RampNode* op) {
  return make_ramp(mutate(op->base), mutate(op->stride), op->lanes);
}
Expr Rewriter::mutate_broadcast(const Expr& e, const BroadcastNode* op) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? e : broadcast(v, op->lanes);
}

Expr Rewriter::mutate_let(const Expr& e, const LetNode* op) {
  Expr value = mutate(op->value);
  // Constants and variables cost nothing to repeat: substitute them.
  if (value.as<IntImmNode>() || value.as<FloatImmNode>() || value.as<VarNode>())
    return mutate(substitute(op->body, {{op->var, value}}));
  auto old = an_.bind(op->var.get(), an_.get(value));
  Expr body = mutate(op->body);
  an_.restore(op->var.get(), old);
  if (!uses_var(body, op->var)) return body;
  return make_expr<LetNode>(op->var, value, body);
}

// dot4_u8i8 (and its narrow-b sibling: the same value) of constants (the byte form,
// scalar) folds by its scalar definition; check_index(true, v) is v;
// other calls keep their simplified arguments.
Expr Rewriter::mutate_call(const Expr& e, const CallNode* op) {
  Expr r = IRMutator::mutate_call(e, op);
  auto* c = r.as<CallNode>();
  // An index check that always holds is its value.
  if (c && c->op == Intrinsic::CheckIndex && is_const_int(c->args[0], 1)) return c->args[1];
  if (!c || !is_dot4_u8i8(c->op) || c->args.size() != 9 || !c->dtype.is_scalar()) return r;
  int64_t v[9];
  for (int i = 0; i < 9; ++i) {
    auto* imm = c->args[i].as<IntImmNode>();
    if (!imm) return r;
    v[i] = imm->value;
  }
  uint8_t a[4];
  int8_t b[4];
  for (int j = 0; j < 4; ++j) {
    a[j] = static_cast<uint8_t>(v[1 + j]);
    b[j] = static_cast<int8_t>(v[5 + j]);
  }
  return make_int(dot4_u8i8_value(static_cast<int32_t>(v[0]), a, b), DataType::i32());
}

Expr Rewriter::mutate_reduce(const Expr& e, const ReduceNode* op) {
  std::vector<std::pair<const VarNode*, std::optional<Bound>>> saved;
  for (auto& ax : op->axes) {
    Expr mn = mutate(ax->dom.min), ext = mutate(ax->dom.extent);
    const int64_t *m = scalar_int(mn), *x = scalar_int(ext);
    Bound b;
    if (m && x && *x >= 1 && !__builtin_add_overflow(*m, *x - 1, &b.hi))
      b.lo = *m;
    else
      b = Bound{};
    saved.emplace_back(ax->var.get(), an_.bind(ax->var.get(), b));
  }
  Expr src = mutate(op->source);
  for (auto it = saved.rbegin(); it != saved.rend(); ++it) an_.restore(it->first, it->second);
  if (src.same_as(op->source)) return e;
  return make_expr<ReduceNode>(op->op, src, op->axes, op->identity);
}

// ---- entry for binary operators -------------------------------------------------------

Expr Rewriter::binary(ExprKind k, Expr a, Expr b) {
  auto *ba = a.as<BroadcastNode>(), *bb = b.as<BroadcastNode>();
  if (ba && bb && ba->lanes == bb->lanes)
    return broadcast(binary(k, ba->value, bb->value), ba->lanes);
  if (Expr f = fold(k, a, b)) return f;
  switch (k) {
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Mul: return arith(k, a, b);
    case ExprKind::Div:
    case ExprKind::Mod:
    case ExprKind::FloorDiv:
    case ExprKind::FloorMod: return div_mod(k, a, b);
    case ExprKind::Min:
    case ExprKind::Max: return min_max(k, a, b);
    case ExprKind::And:
    case ExprKind::Or: return logic(k, a, b);
    default: return compare(k, a, b);
  }
}

// ---- + - * ------------------------------------------------------------------------

Expr Rewriter::arith(ExprKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (signed_scalar(t)) return linear_arith(k, a, b);
  if (t.is_int()) return vector_arith(k, a, b);
  if (t.is_float()) {
    // Exact identities only: x + 0 is not x for x = -0.
    if (k == ExprKind::Mul) {
      if (auto* f = b.as<FloatImmNode>(); f && f->value == 1.0) return a;
      if (auto* f = a.as<FloatImmNode>(); f && f->value == 1.0) return b;
    }
    if (k == ExprKind::Sub)
      if (auto* f = b.as<FloatImmNode>(); f && f->value == 0.0) return a;
  }
  return plain(k, a, b);
}

// Signed integer scalars: through the canonical affine form.
Expr Rewriter::linear_arith(ExprKind k, const Expr& a, const Expr& b) {
  if (k == ExprKind::Mul && !scalar_int(a) && !scalar_int(b)) {
    // A product of non-constants is an atom; order its operands so that
    // x*y and y*x merge.
    return struct_compare(a, b) <= 0 ? plain(k, a, b) : plain(k, b, a);
  }
  auto la = to_linear(a), lb = to_linear(b);
  if (!la || !lb) return plain(k, a, b);
  bool ok;
  if (k != ExprKind::Mul)
    ok = la->add(*lb, k == ExprKind::Add ? 1 : -1);
  else if (const int64_t* c = scalar_int(b))
    ok = la->scale(*c);
  else
    ok = lb->scale(*scalar_int(a)) && (la = lb, true);
  if (!ok) return plain(k, a, b);
  // floordiv/floormod pairs from different operands meet only now.
  merge_div_mod(*la);
  la->drop_zeros();
  return from_linear(*la);
}

// Integer vectors: ramps and broadcasts combine lane-wise.
Expr Rewriter::vector_arith(ExprKind k, const Expr& a, const Expr& b) {
  auto *ra = a.as<RampNode>(), *rb = b.as<RampNode>();
  auto *ba = a.as<BroadcastNode>(), *bb = b.as<BroadcastNode>();
  if (k == ExprKind::Add) {
    if (is_zero(b)) return a;
    if (is_zero(a)) return b;
    if (ra && rb)
      return make_ramp(binary(k, ra->base, rb->base), binary(k, ra->stride, rb->stride), ra->lanes);
    if (ra && bb) return make_ramp(binary(k, ra->base, bb->value), ra->stride, ra->lanes);
    if (ba && rb) return make_ramp(binary(k, ba->value, rb->base), rb->stride, rb->lanes);
  } else if (k == ExprKind::Sub) {
    if (is_zero(b)) return a;
    if (struct_equal(a, b)) return int_const(0, a.dtype());
    if (ra && rb)
      return make_ramp(binary(k, ra->base, rb->base), binary(k, ra->stride, rb->stride), ra->lanes);
    if (ra && bb) return make_ramp(binary(k, ra->base, bb->value), ra->stride, ra->lanes);
    if (ba && rb) {
      Expr zero = int_const(0, rb->stride.dtype());
      return make_ramp(binary(k, ba->value, rb->base), binary(k, zero, rb->stride), rb->lanes);
    }
  } else if (k == ExprKind::Mul) {
    if (is_one(b) || is_zero(a)) return a;
    if (is_one(a) || is_zero(b)) return b;
    if (ra && bb)
      return make_ramp(binary(k, ra->base, bb->value), binary(k, ra->stride, bb->value), ra->lanes);
    if (ba && rb)
      return make_ramp(binary(k, ba->value, rb->base), binary(k, ba->value, rb->stride), rb->lanes);
  }
  return plain(k, a, b);
}

Expr Rewriter::make_ramp(Expr base, Expr stride, int lanes) {
  if (is_zero(stride)) return broadcast(base, lanes);
  return ramp(std::move(base), std::move(stride), lanes);
}

// ---- division and modulo -------------------------------------------------------------

Expr Rewriter::div_mod(ExprKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  if (signed_scalar(t)) {
    if (const int64_t* c = scalar_int(b)) {
      switch (k) {
        case ExprKind::FloorDiv: return floordiv_const(a, *c);
        case ExprKind::FloorMod: return floormod_const(a, *c);
        case ExprKind::Div: return truncdiv_const(a, *c);
        default: return truncmod_const(a, *c);
      }
    }
  } else if (t.is_int()) {
    auto* c = int_imm(b);
    if (auto* r = a.as<RampNode>(); r && c && c->value > 0)
      if (Expr e = ramp_div_mod(k, r, c->value)) return e;
  } else if (t.is_float() && k == ExprKind::Div) {
    if (auto* f = b.as<FloatImmNode>(); f && f->value == 1.0) return a;
  }
  return plain(k, a, b);
}

// floordiv(q*c + rest, c) == q + floordiv(rest, c) for any integers when c > 0.
Expr Rewriter::floordiv_const(const Expr& a, int64_t c) {
  if (c == 1) return a;
  auto l = to_linear(a);
  if (c <= 0 || !l) return plain(ExprKind::FloorDiv, a, int_const(c, a.dtype()));
  Linear q = constant(floordiv_i(l->constant, c), l->dtype);
  Linear rest = constant(floormod_i(l->constant, c), l->dtype);
  for (auto& [atom, coef] : l->terms) {
    if (coef % c == 0)
      q.terms.emplace_back(atom, coef / c);
    else
      rest.terms.emplace_back(atom, coef);
  }
  auto inner = floordiv_rest(std::move(rest), c);
  if (!inner || !q.add(*inner)) return plain(ExprKind::FloorDiv, a, int_const(c, a.dtype()));
  q.drop_zeros();
  return from_linear(q);
}

// floordiv(rest, c) as a form, where rest's constant is in [0, c).
std::optional<Linear> Rewriter::floordiv_rest(Linear rest, int64_t c) {
  DataType t = rest.dtype;
  if (rest.is_const()) return constant(0, t);
  // floordiv(g*x, g*c) == floordiv(x, c) for g > 0.
  int64_t g = std::gcd(std::gcd(coef_gcd(rest), c), rest.constant);
  divide(rest, g);
  c /= g;
  if (c == 1) return rest;
  Expr e = from_linear(rest);
  Bound b = an_.get(e);
  if (b.finite() && floordiv_i(b.lo, c) == floordiv_i(b.hi, c))
    return constant(floordiv_i(b.lo, c), t);
  // floordiv(floordiv(x, k), c) == floordiv(x, k*c) for k, c > 0.
  if (rest.terms.size() == 1 && rest.terms[0].second == 1 && rest.constant == 0) {
    const Expr& atom = rest.terms[0].first;
    int64_t kc;
    if (auto* fd = atom.as<FloorDivNode>(); fd && scalar_int(fd->b) && *scalar_int(fd->b) > 0 &&
                                            !__builtin_mul_overflow(*scalar_int(fd->b), c, &kc))
      return to_linear(floordiv_const(fd->a, kc));
  }
  return single(make_expr<FloorDivNode>(t, e, int_const(c, t)), 1, t);
}

// floormod(q*c + rest, c) == floormod(rest, c) for any integers when c > 0.
Expr Rewriter::floormod_const(const Expr& a, int64_t c) {
  DataType t = a.dtype();
  if (c == 1) return int_const(0, t);
  auto l = to_linear(a);
  if (c <= 0 || !l) return plain(ExprKind::FloorMod, a, int_const(c, t));
  // floormod(x, m) == x (mod c) when c divides m: look through it.
  Linear rest = constant(0, t);
  bool ok = rest.add_const(l->constant);
  for (auto& [atom, coef] : l->terms) {
    auto* fm = atom.as<FloorModNode>();
    const int64_t* m = fm ? scalar_int(fm->b) : nullptr;
    auto inner = m && *m > 0 && *m % c == 0 ? to_linear(fm->a) : std::nullopt;
    ok = ok && (inner ? rest.add(*inner, coef) : rest.add_term(atom, coef));
  }
  if (!ok) return plain(ExprKind::FloorMod, a, int_const(c, t));
  std::erase_if(rest.terms, [c](const auto& tm) { return tm.second % c == 0; });
  rest.constant = floormod_i(rest.constant, c);
  if (rest.is_const()) return int_const(rest.constant, t);
  // floormod(g*x, g*c) == g*floormod(x, c) for g > 0.
  int64_t g = std::gcd(std::gcd(coef_gcd(rest), c), rest.constant);
  divide(rest, g);
  c /= g;
  Expr e = from_linear(rest);
  Bound b = an_.get(e);
  Linear out = rest;
  if (b.finite() && floordiv_i(b.lo, c) == floordiv_i(b.hi, c)) {
    int64_t shift;
    ok = !__builtin_mul_overflow(floordiv_i(b.lo, c), c, &shift) && shift != INT64_MIN &&
         out.add_const(-shift);
  } else {
    out = single(make_expr<FloorModNode>(t, e, int_const(c, t)), 1, t);
  }
  if (!ok || !out.scale(g)) return plain(ExprKind::FloorMod, a, int_const(c * g, t));
  return from_linear(out);
}

// Truncating division agrees with floor division on non-negative numerators;
// exact division is exact in both.
Expr Rewriter::truncdiv_const(const Expr& a, int64_t c) {
  DataType t = a.dtype();
  if (c == 1) return a;
  if (c > 0 && an_.get(a).lo >= 0) return to_trunc(floordiv_const(a, c));
  auto l = to_linear(a);
  if (c > 0 && l && l->constant % c == 0 && coef_gcd(*l) % c == 0) {
    divide(*l, c);
    return from_linear(*l);
  }
  return plain(ExprKind::Div, a, int_const(c, t));
}

Expr Rewriter::truncmod_const(const Expr& a, int64_t c) {
  DataType t = a.dtype();
  if (c == 1 || c == -1) return int_const(0, t);
  if (c > 0 && an_.get(a).lo >= 0) return to_trunc(floormod_const(a, c));
  auto l = to_linear(a);
  if (c > 0 && l && l->constant % c == 0 && coef_gcd(*l) % c == 0) return int_const(0, t);
  return plain(ExprKind::Mod, a, int_const(c, t));
}

// Turns a top-level floordiv/floormod with a non-negative numerator back into
// the truncating form the source used (cheaper in generated code).
Expr Rewriter::to_trunc(const Expr& r) {
  if (auto* m = r.as<MulNode>(); m && scalar_int(m->b)) {
    Expr inner = to_trunc(m->a);
    return inner.same_as(m->a) ? r : make_expr<MulNode>(r.dtype(), inner, m->b);
  }
  auto* op = dynamic_cast<const BinaryNode*>(r.get());
  if (!op || an_.get(op->a).lo < 0) return r;
  if (r.kind() == ExprKind::FloorDiv) return make_expr<DivNode>(r.dtype(), op->a, op->b);
  if (r.kind() == ExprKind::FloorMod) return make_expr<ModNode>(r.dtype(), op->a, op->b);
  return r;
}

// Lane l of ramp(b, s, n) is b + s*l. With c > 0:
// - s a multiple of c: floordiv is ramp(floordiv(b, c), s/c), floormod is
//   broadcast(floormod(b, c));
// - 0 <= floormod(b, c) + s*(n-1) < c: no lane crosses a multiple of c, so
//   floordiv is broadcast(floordiv(b, c)), floormod ramp(floormod(b, c), s).
Expr Rewriter::ramp_div_mod(ExprKind k, const RampNode* r, int64_t c) {
  const int64_t* s = scalar_int(r->stride);
  if (!s || (k != ExprKind::FloorDiv && k != ExprKind::FloorMod)) return Expr();
  int n = r->lanes;
  if (*s % c == 0) {
    if (k == ExprKind::FloorDiv)
      return make_ramp(floordiv_const(r->base, c), int_const(*s / c, r->base.dtype()), n);
    return broadcast(floormod_const(r->base, c), n);
  }
  if (*s < 0) return Expr();
  Expr m = floormod_const(r->base, c);
  int64_t span, top;
  Bound b = an_.get(m);
  if (b.hi == kPosInf || __builtin_mul_overflow(*s, n - 1, &span) ||
      __builtin_add_overflow(b.hi, span, &top) || top >= c)
    return Expr();
  if (k == ExprKind::FloorDiv) return broadcast(floordiv_const(r->base, c), n);
  return make_ramp(m, r->stride, n);
}

// ---- min / max ---------------------------------------------------------------------

Expr Rewriter::min_max(ExprKind k, const Expr& a, const Expr& b) {
  if (struct_equal(a, b)) return a;
  bool is_min = k == ExprKind::Min;
  DataType t = a.dtype();
  if (!t.is_int()) return plain(k, a, b);
  Bound d = an_.get(binary(ExprKind::Sub, a, b));
  if (d.hi <= 0) return is_min ? a : b;
  if (d.lo >= 0) return is_min ? b : a;
  if (t.lanes > 1) return plain(k, a, b);
  if (scalar_int(a)) return min_max(k, b, a);  // constants on the right
  // min(min(x, c1), c2) == min(x, min(c1, c2)); likewise max.
  auto* inner = static_cast<const BinaryNode*>(a.get());
  if (a.kind() == k && scalar_int(inner->b) && scalar_int(b))
    return min_max(k, inner->a, binary(k, inner->b, b));
  return plain(k, a, b);
}

// ---- comparisons and logic ---------------------------------------------------------

Expr Rewriter::compare(ExprKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  int lanes = t.lanes;
  bool reflexive = k == ExprKind::EQ || k == ExprKind::LE || k == ExprKind::GE;
  if (!t.is_float() && struct_equal(a, b)) return bool_const(reflexive, lanes);
  if (!t.is_int()) return plain(k, a, b);
  if (auto r = decide(k, an_.get(binary(ExprKind::Sub, a, b)))) return bool_const(*r, lanes);
  if (lanes > 1) return plain(k, a, b);
  return normalize_compare(k, a, b);
}

// Canonical scalar comparison: with a - b = P - N + K (P, N sums of
// positive-coefficient terms, K constant) and g the gcd of all coefficients,
// emit `P/g k N/g + R` with R = -K/g rounded as k requires (x*g < r <=> x <
// ceil(r/g) for integer x, and so on). A side without terms gets the
// constant; terms stay on the left.
Expr Rewriter::normalize_compare(ExprKind k, const Expr& a, const Expr& b) {
  DataType t = a.dtype();
  auto l = to_linear(a), lb = to_linear(b);
  if (!l || !lb || !l->add(*lb, -1) || l->constant == INT64_MIN) return plain(k, a, b);
  l->drop_zeros();
  int64_t rhs = -l->constant;
  if (int64_t g = coef_gcd(*l); g > 1) {
    for (auto& tm : l->terms) tm.second /= g;
    switch (k) {
      case ExprKind::LT:
      case ExprKind::GE: rhs = ceildiv_i(rhs, g); break;
      case ExprKind::LE:
      case ExprKind::GT: rhs = floordiv_i(rhs, g); break;
      default:
        if (rhs % g != 0) return make_bool(k == ExprKind::NE);
        rhs /= g;
    }
  }
  Linear pos = constant(0, t), neg = constant(0, t);
  for (auto& [atom, coef] : l->terms) {
    if (coef > 0)
      pos.terms.emplace_back(atom, coef);
    else if (coef == INT64_MIN)
      return plain(k, a, b);
    else
      neg.terms.emplace_back(atom, -coef);
  }
  if (pos.is_const() && neg.is_const()) return bool_const(*decide(k, {-rhs, -rhs}), 1);
  if (!pos.is_const() && !neg.is_const()) {
    neg.constant = rhs;
    return plain(k, from_linear(pos), from_linear(neg));
  }
  if (!pos.is_const()) return plain(k, from_linear(pos), int_const(rhs, t));
  // -N k R  <=>  N flip(k) -R
  return plain(flip(k), from_linear(neg), int_const(-rhs, t));
}

Expr Rewriter::logic(ExprKind k, const Expr& a, const Expr& b) {
  bool is_and = k == ExprKind::And;
  // The absorbing value (false for &&, true for ||) wins; the other drops out.
  if (auto* c = int_imm(a)) return (c->value != 0) == is_and ? b : a;
  if (auto* c = int_imm(b)) return (c->value != 0) == is_and ? a : b;
  if (struct_equal(a, b)) return a;
  return plain(k, a, b);
}

Expr Rewriter::make_not(Expr a) {
  if (auto* c = int_imm(a)) return bool_const(c->value == 0, a.dtype().lanes);
  if (auto* n = a.as<NotNode>()) return n->a;
  if (auto* b = a.as<BroadcastNode>()) return broadcast(make_not(b->value), b->lanes);
  // !(x < y) == x >= y for integers (not for floats: NaN compares false).
  if (is_comparison(a.kind())) {
    auto* op = static_cast<const BinaryNode*>(a.get());
    if (op->a.dtype().is_int()) return binary(negate_cmp(a.kind()), op->a, op->b);
  }
  return logical_not(a);
}

Expr Rewriter::make_select(Expr c, Expr t, Expr f) {
  if (auto* v = int_imm(c)) return v->value ? t : f;
  if (struct_equal(t, f)) return t;
  auto *bc = c.as<BroadcastNode>(), *bt = t.as<BroadcastNode>(), *bf = f.as<BroadcastNode>();
  if (bc && bt && bf) return broadcast(make_select(bc->value, bt->value, bf->value), bc->lanes);
  return select(c, t, f);
}

// ---- casts -----------------------------------------------------------------------

namespace {

Expr fold_cast_int(DataType to, DataType from, int64_t v) {
  if (to.is_bool()) return make_bool(v != 0);
  if (to.is_integer()) return int_const(v, to);
  double d =
      from.is_uint() ? static_cast<double>(static_cast<uint64_t>(v)) : static_cast<double>(v);
  auto r = round_to(d, to);
  return r ? make_float(*r, to) : Expr();
}

Expr fold_cast_float(DataType to, double v) {
  if (to.is_bool()) return make_bool(v != 0);
  if (to.is_float()) {
    auto r = round_to(v, to);
    return r ? make_float(*r, to) : Expr();
  }
  // Only values that fit the target: out-of-range conversion is undefined.
  Bound range = type_bound(to);
  double lo = range.lo == kNegInf ? -9.2e18 : static_cast<double>(range.lo);
  double hi = range.hi == kPosInf ? 9.2e18 : static_cast<double>(range.hi);
  double tr = std::trunc(v);
  if (!(tr >= lo && tr <= hi)) return Expr();
  return int_const(static_cast<int64_t>(tr), to);
}

}  // namespace

Expr Rewriter::make_cast(DataType t, Expr v) {
  if (v.dtype() == t) return v;
  if (auto* b = v.as<BroadcastNode>())
    return broadcast(make_cast(t.element_of(), b->value), b->lanes);
  Expr folded;
  if (auto* i = v.as<IntImmNode>()) folded = fold_cast_int(t, v.dtype(), i->value);
  if (auto* f = v.as<FloatImmNode>()) folded = fold_cast_float(t, f->value);
  return folded ? folded : make_expr<CastNode>(t, v);
}

}  // namespace kiln::ir::arith
