// Structural comparison and the canonical affine form (see canonical_form.h).
#include "ir/canonical_form.h"

#include <bit>
#include <functional>
#include <numeric>

#include "ir/tensor.h"

namespace kiln::ir::arith {

namespace {

template <typename T>
int cmp3(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int compare_dtype(DataType a, DataType b) {
  if (int c = cmp3(a.code, b.code)) return c;
  if (int c = cmp3(a.bits, b.bits)) return c;
  return cmp3(a.lanes, b.lanes);
}

// Names first so the order is deterministic; identity breaks ties.
template <typename T>
int compare_named(const T* a, const T* b) {
  if (a == b) return 0;
  if (int c = a->name.compare(b->name)) return c < 0 ? -1 : 1;
  return std::less<const T*>()(a, b) ? -1 : 1;
}

int compare_list(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (int c = cmp3(a.size(), b.size())) return c;
  for (size_t i = 0; i < a.size(); ++i)
    if (int c = struct_compare(a[i], b[i])) return c;
  return 0;
}

// Compares two nodes of the same kind and type.
int compare_same_kind(const Expr& a, const Expr& b) {
  switch (a.kind()) {
    case ExprKind::IntImm: return cmp3(a.as<IntImmNode>()->value, b.as<IntImmNode>()->value);
    case ExprKind::FloatImm:
      return cmp3(std::bit_cast<uint64_t>(a.as<FloatImmNode>()->value),
                  std::bit_cast<uint64_t>(b.as<FloatImmNode>()->value));
    case ExprKind::Var: return compare_named(a.as<VarNode>(), b.as<VarNode>());
    case ExprKind::Not: return struct_compare(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::Select: {
      auto *x = a.as<SelectNode>(), *y = b.as<SelectNode>();
      return compare_list({x->cond, x->true_value, x->false_value},
                          {y->cond, y->true_value, y->false_value});
    }
    case ExprKind::Cast: return struct_compare(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::Call: {
      auto *x = a.as<CallNode>(), *y = b.as<CallNode>();
      if (int c = cmp3(x->op, y->op)) return c;
      return compare_list(x->args, y->args);
    }
    case ExprKind::Let: {
      auto *x = a.as<LetNode>(), *y = b.as<LetNode>();
      if (int c = compare_named(x->var.get(), y->var.get())) return c;
      return compare_list({x->value, x->body}, {y->value, y->body});
    }
    case ExprKind::Load: {
      auto *x = a.as<LoadNode>(), *y = b.as<LoadNode>();
      if (int c = compare_named(x->buffer.get(), y->buffer.get())) return c;
      return compare_list({x->index, x->predicate}, {y->index, y->predicate});
    }
    case ExprKind::Ramp: {
      auto *x = a.as<RampNode>(), *y = b.as<RampNode>();
      return compare_list({x->base, x->stride}, {y->base, y->stride});
    }
    case ExprKind::Broadcast:
      return struct_compare(a.as<BroadcastNode>()->value, b.as<BroadcastNode>()->value);
    case ExprKind::TensorRead: {
      auto *x = a.as<TensorReadNode>(), *y = b.as<TensorReadNode>();
      if (int c = compare_named(x->tensor.get(), y->tensor.get())) return c;
      return compare_list(x->indices, y->indices);
    }
    case ExprKind::Reduce:
      // Reductions are whole compute bodies; identity is good enough.
      return std::less<const ExprNode*>()(a.get(), b.get()) ? -1 : 1;
    default: {
      auto *x = static_cast<const BinaryNode*>(a.get()),
           *y = static_cast<const BinaryNode*>(b.get());
      if (int c = struct_compare(x->a, y->a)) return c;
      return struct_compare(x->b, y->b);
    }
  }
}

// Sign-extends v to the width of t, so folded constants keep t's semantics.
int64_t wrap(int64_t v, DataType t) {
  if (t.bits >= 64) return v;
  int shift = 64 - t.bits;
  return static_cast<int64_t>(static_cast<uint64_t>(v) << shift) >> shift;
}

Expr imm(int64_t v, DataType t) { return make_expr<IntImmNode>(t, wrap(v, t)); }

const int64_t* int_imm(const Expr& e) {
  auto* i = e.as<IntImmNode>();
  return i ? &i->value : nullptr;
}

// Adds scale * e to l, expanding sums, differences and constant products.
bool build(const Expr& e, int64_t scale, Linear& l) {
  if (auto* v = int_imm(e)) {
    int64_t p;
    return !__builtin_mul_overflow(*v, scale, &p) && l.add_const(p);
  }
  auto* bin = static_cast<const BinaryNode*>(e.get());  // used only for binary kinds
  if (e.kind() == ExprKind::Add) return build(bin->a, scale, l) && build(bin->b, scale, l);
  if (e.kind() == ExprKind::Sub) {
    if (scale == INT64_MIN) return false;
    return build(bin->a, scale, l) && build(bin->b, -scale, l);
  }
  if (e.kind() == ExprKind::Mul) {
    const int64_t* c = int_imm(bin->b);
    const Expr* other = &bin->a;
    if (!c) {
      c = int_imm(bin->a);
      other = &bin->b;
    }
    int64_t p;
    if (c) return !__builtin_mul_overflow(*c, scale, &p) && build(*other, p, l);
  }
  return l.add_term(e, scale);
}

// If `mod_atom` is floormod(x, c) (or x % c) with coefficient m and the form
// also holds floordiv(x, c)*(m*c) (or (x / c)*(m*c)), replaces both by x*m:
// the identity x == floordiv(x, c)*c + floormod(x, c) (likewise truncating).
bool merge_one_pair(Linear& l, size_t i) {
  auto [atom, m] = l.terms[i];
  ExprKind div_kind;
  if (atom.kind() == ExprKind::FloorMod)
    div_kind = ExprKind::FloorDiv;
  else if (atom.kind() == ExprKind::Mod)
    div_kind = ExprKind::Div;
  else
    return false;
  auto* mod = static_cast<const BinaryNode*>(atom.get());
  const int64_t* c = int_imm(mod->b);
  int64_t want;
  if (m == 0 || !c || *c <= 0 || __builtin_mul_overflow(m, *c, &want)) return false;
  for (size_t j = 0; j < l.terms.size(); ++j) {
    auto& [d, k] = l.terms[j];
    if (d.kind() != div_kind || k != want) continue;
    auto* div = static_cast<const BinaryNode*>(d.get());
    if (!is_const_int(div->b, *c) || !struct_equal(div->a, mod->a)) continue;
    Linear merged = l;
    merged.terms[i].second = 0;
    merged.terms[j].second = 0;
    if (!build(mod->a, m, merged)) return false;
    l = std::move(merged);
    return true;
  }
  return false;
}

Expr term(const Expr& atom, int64_t coef, DataType t) {
  return coef == 1 ? atom : make_expr<MulNode>(t, atom, imm(coef, t));
}

}  // namespace

int struct_compare(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return 0;
  if (!a || !b) return a ? 1 : -1;
  if (int c = cmp3(a.kind(), b.kind())) return c;
  if (int c = compare_dtype(a.dtype(), b.dtype())) return c;
  return compare_same_kind(a, b);
}

bool struct_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a || !b || a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
  return struct_compare(a, b) == 0;
}

bool Linear::add_term(const Expr& atom, int64_t coef) {
  for (auto& [e, c] : terms) {
    if (struct_equal(e, atom)) return !__builtin_add_overflow(c, coef, &c);
  }
  terms.emplace_back(atom, coef);
  return true;
}

bool Linear::add(const Linear& other, int64_t s) {
  int64_t p;
  for (auto& [e, c] : other.terms)
    if (__builtin_mul_overflow(c, s, &p) || !add_term(e, p)) return false;
  return !__builtin_mul_overflow(other.constant, s, &p) && add_const(p);
}

bool Linear::scale(int64_t factor) {
  for (auto& [e, c] : terms)
    if (__builtin_mul_overflow(c, factor, &c)) return false;
  return !__builtin_mul_overflow(constant, factor, &constant);
}

bool Linear::add_const(int64_t c) { return !__builtin_add_overflow(constant, c, &constant); }

void Linear::drop_zeros() {
  std::erase_if(terms, [](const auto& t) { return t.second == 0; });
}

std::optional<Linear> to_linear(const Expr& e) {
  Linear l;
  l.dtype = e.dtype();
  if (!build(e, 1, l)) return std::nullopt;
  merge_div_mod(l);
  l.drop_zeros();
  return l;
}

void merge_div_mod(Linear& l) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < l.terms.size() && !changed; ++i) changed = merge_one_pair(l, i);
  }
}

int64_t coef_gcd(const Linear& l) {
  int64_t g = 0;
  for (auto& [e, c] : l.terms) g = std::gcd(g, c);  // std::gcd takes |c|
  return g;
}

Expr from_linear(const Linear& l) {
  DataType t = l.dtype;
  Expr acc;
  for (auto& [atom, c] : l.terms)
    if (c > 0) acc = acc ? make_expr<AddNode>(t, acc, term(atom, c, t)) : term(atom, c, t);
  bool const_done = false;
  for (auto& [atom, c] : l.terms) {
    if (c >= 0) continue;
    if (!acc && l.constant > 0) {
      acc = imm(l.constant, t);
      const_done = true;
    }
    if (!acc)
      acc = make_expr<MulNode>(t, atom, imm(c, t));
    else if (c == INT64_MIN)
      acc = make_expr<AddNode>(t, acc, term(atom, c, t));
    else
      acc = make_expr<SubNode>(t, acc, term(atom, -c, t));
  }
  if (!acc) return imm(l.constant, t);
  if (const_done || l.constant == 0) return acc;
  if (l.constant > 0 || l.constant == INT64_MIN)
    return make_expr<AddNode>(t, acc, imm(l.constant, t));
  return make_expr<SubNode>(t, acc, imm(-l.constant, t));
}

}  // namespace kiln::ir::arith
