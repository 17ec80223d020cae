#include "codegen/lane_offsets.h"

#include "ir/const_int_bound.h"

namespace kiln::codegen {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

namespace {

using Result = std::optional<LaneOffsets>;

// The constant value every lane has, when the base is constant and the
// offsets are all equal (a uniform constant).
std::optional<int64_t> uniform_constant(const LaneOffsets& x) {
  const int64_t* c = as_const_int(x.base);
  if (!c) return std::nullopt;
  for (int64_t o : x.offsets)
    if (o != x.offsets[0]) return std::nullopt;
  return *c + x.offsets[0];
}

// Every lane's value, when the base is constant.
std::optional<std::vector<int64_t>> constant_lanes(const LaneOffsets& x) {
  const int64_t* c = as_const_int(x.base);
  if (!c) return std::nullopt;
  std::vector<int64_t> v = x.offsets;
  for (int64_t& o : v) o += *c;
  return v;
}

Expr add(const Expr& a, const Expr& b) {
  if (is_zero(a)) return b;
  if (is_zero(b)) return a;
  return a + b;
}

Result decompose(const Expr& e, int lanes);

Result binary(const BinaryNode* op, int lanes) {
  Result a = decompose(op->a, lanes), b = decompose(op->b, lanes);
  if (!a || !b) return std::nullopt;
  LaneOffsets r;
  r.offsets.resize(lanes);
  switch (op->kind) {
    case ExprKind::Add: {
      // A constant base joins the offsets: lane j of a group then has the
      // same base for every j (one address, codegen's window load).
      const int64_t* ca = as_const_int(a->base);
      const int64_t* cb = as_const_int(b->base);
      int64_t shift = 0;
      if (cb && !ca) {
        r.base = a->base;
        shift = *cb;
      } else if (ca && !cb) {
        r.base = b->base;
        shift = *ca;
      } else {
        r.base = add(a->base, b->base);
      }
      for (int i = 0; i < lanes; ++i) r.offsets[i] = a->offsets[i] + b->offsets[i] + shift;
      return r;
    }
    case ExprKind::Sub:
      r.base = is_zero(b->base) ? a->base : a->base - b->base;
      for (int i = 0; i < lanes; ++i) r.offsets[i] = a->offsets[i] - b->offsets[i];
      return r;
    case ExprKind::Mul: {
      // (base + k) * c = base * c + k * c for a uniform constant c.
      std::optional<int64_t> cb = uniform_constant(*b), ca = uniform_constant(*a);
      const LaneOffsets* x = cb ? &*a : ca ? &*b : nullptr;
      if (!x) return std::nullopt;
      int64_t c = cb ? *cb : *ca;
      r.base = is_zero(x->base) ? x->base : x->base * make_int(c, x->base.dtype());
      for (int i = 0; i < lanes; ++i) r.offsets[i] = x->offsets[i] * c;
      return r;
    }
    case ExprKind::FloorDiv:
    case ExprKind::FloorMod: {
      // Only wholly constant operands: a variable base's quotient is not a
      // base plus constants.
      auto va = constant_lanes(*a), vb = constant_lanes(*b);
      if (!va || !vb) return std::nullopt;
      for (int i = 0; i < lanes; ++i) {
        if ((*vb)[i] == 0) return std::nullopt;
        r.offsets[i] = op->kind == ExprKind::FloorDiv ? arith::floordiv_i((*va)[i], (*vb)[i])
                                                      : arith::floormod_i((*va)[i], (*vb)[i]);
      }
      r.base = make_int(0, op->a.dtype().element_of());
      return r;
    }
    default: return std::nullopt;
  }
}

Result decompose(const Expr& e, int lanes) {
  if (!e.dtype().is_integer() || e.dtype().lanes != lanes) return std::nullopt;
  if (const auto* b = e.as<BroadcastNode>()) {
    if (b->value.dtype().lanes != 1) return std::nullopt;
    return LaneOffsets{b->value, std::vector<int64_t>(lanes, 0)};
  }
  if (const auto* r = e.as<RampNode>()) {
    const int64_t* stride = as_const_int(r->stride);
    if (!stride || r->base.dtype().lanes != 1) return std::nullopt;
    LaneOffsets x{r->base, std::vector<int64_t>(lanes)};
    for (int i = 0; i < lanes; ++i) x.offsets[i] = i * *stride;
    return x;
  }
  if (is_binary(e.kind())) return binary(static_cast<const BinaryNode*>(e.get()), lanes);
  return std::nullopt;
}

}  // namespace

bool is_multiple_of(const Expr& e, int64_t m) {
  if (const int64_t* c = as_const_int(e)) return *c % m == 0;
  switch (e.kind()) {
    case ExprKind::Mul: {
      const auto* op = static_cast<const BinaryNode*>(e.get());
      return is_multiple_of(op->a, m) || is_multiple_of(op->b, m);
    }
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Min:
    case ExprKind::Max: {
      const auto* op = static_cast<const BinaryNode*>(e.get());
      return is_multiple_of(op->a, m) && is_multiple_of(op->b, m);
    }
    default: return false;
  }
}

std::optional<LaneOffsets> lane_offsets(const Expr& index) {
  const int lanes = index.dtype().lanes;
  if (lanes < 2) return std::nullopt;
  return decompose(index, lanes);
}

}  // namespace kiln::codegen
