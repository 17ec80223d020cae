// Internal to the simplifier: structural comparison of expressions and the
// canonical affine form of signed integer scalars,
//   c1*atom1 + c2*atom2 + ... + constant,
// where atoms are anything that is not a sum, a difference, a product with a
// constant, or a constant (variables, floordiv(x, 8), loads, x*y, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ir/expr.h"

namespace kiln::ir::arith {

// Deep equality: same tree, variables/buffers/tensors by identity.
bool struct_equal(const Expr& a, const Expr& b);
// A total order consistent with struct_equal (deterministic up to the
// identity of distinct same-named variables), to sort commutative operands.
int struct_compare(const Expr& a, const Expr& b);

struct Linear {
  DataType dtype = DataType::i64();
  // Atoms in order of first appearance; coefficients may be zero transiently.
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;

  // Each returns false on int64 overflow (the form is then unusable).
  bool add_term(const Expr& atom, int64_t coef);
  bool add(const Linear& other, int64_t scale = 1);
  bool scale(int64_t factor);
  bool add_const(int64_t c);

  void drop_zeros();
  bool is_const() const { return terms.empty(); }
};

// The affine form of an (already simplified) signed integer scalar e. Merges
// floordiv(x, c)*c + floormod(x, c) (and the truncating pair) back into x.
std::optional<Linear> to_linear(const Expr& e);
// Replaces floordiv(x, c)*(m*c) + floormod(x, c)*m (or the truncating pair)
// by x*m, the identity x == floordiv(x, c)*c + floormod(x, c).
void merge_div_mod(Linear& l);
// Renders a form: positive terms first, then subtracted negative ones, the
// constant last (`i*8 + j - k*2 - 3`).
Expr from_linear(const Linear& l);
// gcd of |coefficients| (0 when there are none).
int64_t coef_gcd(const Linear& l);

}  // namespace kiln::ir::arith
