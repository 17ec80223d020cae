#include "ir/simplify.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>

#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/tensor.h"

using namespace kiln::ir;

namespace {

std::string S(const Expr& e, const VarRanges& r = {}) { return to_string(simplify(e, r)); }

VarRanges ranges(std::initializer_list<std::tuple<Var, int64_t, int64_t>> l) {
  VarRanges r;
  for (auto& [v, lo, hi] : l) r[v] = ConstIntBound{lo, hi};
  return r;
}

// ---- a reference interpreter for integer/bool expressions (vectors lane-wise) -----

using Value = std::vector<int64_t>;
using Env = std::map<const VarNode*, int64_t>;

int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t fmod(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

int64_t apply(ExprKind k, int64_t a, int64_t b) {
  switch (k) {
    case ExprKind::Add: return a + b;
    case ExprKind::Sub: return a - b;
    case ExprKind::Mul: return a * b;
    case ExprKind::Div: return a / b;
    case ExprKind::Mod: return a % b;
    case ExprKind::FloorDiv: return fdiv(a, b);
    case ExprKind::FloorMod: return fmod(a, b);
    case ExprKind::Min: return std::min(a, b);
    case ExprKind::Max: return std::max(a, b);
    case ExprKind::EQ: return a == b;
    case ExprKind::NE: return a != b;
    case ExprKind::LT: return a < b;
    case ExprKind::LE: return a <= b;
    case ExprKind::GT: return a > b;
    case ExprKind::GE: return a >= b;
    case ExprKind::And: return a && b;
    case ExprKind::Or: return a || b;
    default: throw std::logic_error("apply: not a binary op");
  }
}

Value eval(const Expr& e, Env& env) {
  int lanes = e.dtype().lanes;
  switch (e.kind()) {
    case ExprKind::IntImm: return {e.as<IntImmNode>()->value};
    case ExprKind::Var: return {env.at(e.as<VarNode>())};
    case ExprKind::Not: return {!eval(e.as<NotNode>()->a, env)[0]};
    case ExprKind::Select: {
      auto* s = e.as<SelectNode>();
      Value c = eval(s->cond, env), t = eval(s->true_value, env), f = eval(s->false_value, env);
      for (int i = 0; i < lanes; ++i) t[i] = c[i] ? t[i] : f[i];
      return t;
    }
    case ExprKind::Cast: return eval(e.as<CastNode>()->value, env);
    case ExprKind::Let: {
      auto* l = e.as<LetNode>();
      env[l->var.get()] = eval(l->value, env)[0];
      return eval(l->body, env);
    }
    case ExprKind::Ramp: {
      auto* r = e.as<RampNode>();
      int64_t b = eval(r->base, env)[0], s = eval(r->stride, env)[0];
      Value v(lanes);
      for (int i = 0; i < lanes; ++i) v[i] = b + s * i;
      return v;
    }
    case ExprKind::Broadcast: return Value(lanes, eval(e.as<BroadcastNode>()->value, env)[0]);
    default: {
      if (!is_binary(e.kind())) throw std::logic_error("eval: unexpected " + to_string(e));
      auto* op = static_cast<const BinaryNode*>(e.get());
      Value a = eval(op->a, env), b = eval(op->b, env);
      for (int i = 0; i < lanes; ++i) a[i] = apply(e.kind(), a[i], b[i]);
      return a;
    }
  }
}

// ---- random expression trees -------------------------------------------------------

struct Gen {
  std::mt19937_64 rng;
  std::vector<Var> vars;

  explicit Gen(uint64_t seed) : rng(seed) {}
  int64_t uni(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  bool coin(int percent) { return uni(0, 99) < percent; }

  Expr leaf() {
    if (coin(30)) return make_int(uni(-10, 10));
    return vars[uni(0, vars.size() - 1)];
  }

  int64_t divisor() {
    static const int64_t kDivisors[] = {1, 2, 3, 4, 5, 7, 8, 16, 64, -1, -2, -3, -8};
    return kDivisors[uni(0, std::size(kDivisors) - 1)];
  }

  Expr int_expr(int depth) {
    if (depth == 0 || coin(15)) return leaf();
    Expr a = coin(20) ? linear() : int_expr(depth - 1);
    switch (uni(0, 11)) {
      case 0:
      case 1: return a + int_expr(depth - 1);
      case 2: return a - int_expr(depth - 1);
      case 3: return a * make_int(uni(-4, 8));
      case 4: return coin(50) ? leaf() * leaf() : make_int(uni(-3, 3)) * a;
      case 5: return floordiv(a, make_int(divisor()));
      case 6: return floormod(a, make_int(divisor()));
      case 7: return coin(50) ? a / make_int(divisor()) : a % make_int(divisor());
      case 8: return min(a, int_expr(depth - 1));
      case 9: return max(a, int_expr(depth - 1));
      case 10: return select(bool_expr(depth - 1), a, int_expr(depth - 1));
      default: return coin(50) ? a + make_int(uni(-20, 20)) : linear();
    }
  }

  // c1*v1 + c2*v2 + c0 with small coefficients sharing factors, to reach the
  // gcd and rounding rules of division and comparison.
  Expr linear() {
    static const int64_t kCoef[] = {-6, -4, -3, -2, -1, 1, 2, 3, 4, 6, 8};
    Expr e = make_int(uni(-9, 9));
    for (int t = 0; t < 2; ++t)
      e = e + vars[uni(0, vars.size() - 1)] * make_int(kCoef[uni(0, std::size(kCoef) - 1)]);
    return e;
  }

  Expr bool_expr(int depth) {
    if (depth > 0 && coin(25)) {
      switch (uni(0, 2)) {
        case 0: return logical_and(bool_expr(depth - 1), bool_expr(depth - 1));
        case 1: return logical_or(bool_expr(depth - 1), bool_expr(depth - 1));
        default: return logical_not(bool_expr(depth - 1));
      }
    }
    static const ExprKind kCmp[] = {ExprKind::EQ, ExprKind::NE, ExprKind::LT,
                                    ExprKind::LE, ExprKind::GT, ExprKind::GE};
    if (coin(30)) return make_binary(kCmp[uni(0, 5)], linear(), linear());
    return make_binary(kCmp[uni(0, 5)], int_expr(std::max(depth - 1, 0)),
                       int_expr(std::max(depth - 1, 0)));
  }
};

// The assignment number p of the ranges' domain, in mixed radix.
Env point(const VarRanges& r, int64_t p) {
  Env env;
  for (auto& [v, range] : r) {
    int64_t n = *range.max_value - *range.min_value + 1;
    env[v.get()] = *range.min_value + p % n;
    p /= n;
  }
  return env;
}

// Checks simplify(e) == e at every point of the ranges' domain when it is
// small, else at `points` random ones; and that const_int_bound(e) contains
// every value seen.
void check_equivalent(Gen& g, const Expr& e, const VarRanges& r, int points) {
  Expr s = simplify(e, r);
  ConstIntBound b = const_int_bound(e, r);
  int64_t domain = 1;
  for (auto& [v, range] : r) domain *= *range.max_value - *range.min_value + 1;
  bool exhaustive = domain <= 1000;
  for (int64_t p = 0; p < (exhaustive ? domain : points); ++p) {
    Env env = point(r, exhaustive ? p : g.uni(0, domain - 1));
    Env env2 = env;
    Value want = eval(e, env), got = eval(s, env2);
    std::string where;
    for (auto& [v, val] : env) where += v->name + "=" + std::to_string(val) + " ";
    ASSERT_EQ(want, got) << "original:   " << e << "\nsimplified: " << s << "\nat " << where;
    for (int64_t w : want) {
      if (b.min_value) {
        ASSERT_GE(w, *b.min_value) << e << " at " << where;
      }
      if (b.max_value) {
        ASSERT_LE(w, *b.max_value) << e << " at " << where;
      }
    }
  }
}

}  // namespace

// ---- constant folding ----------------------------------------------------------------

TEST(Simplify, FoldsConstants) {
  EXPECT_EQ(S(Expr(3) + 4), "7");
  EXPECT_EQ(S(Expr(-7) / 2), "-3");
  EXPECT_EQ(S(Expr(-7) % 2), "-1");
  EXPECT_EQ(S(floordiv(-7, 2)), "-4");
  EXPECT_EQ(S(floormod(-7, 2)), "1");
  EXPECT_EQ(S(min(3, 9) + max(3, 9)), "12");
  EXPECT_EQ(S(Expr(3) < 4), "true");
  EXPECT_EQ(S(logical_and(Expr(3) < 4, Expr(5) <= 4)), "false");
  EXPECT_EQ(S(logical_not(eq(Expr(1), 2))), "true");
  EXPECT_EQ(S(select(Expr(1) < 2, Expr(10), Expr(20))), "10");
  EXPECT_EQ(S(Expr(1.5f) * 2.0f), "3f");
  EXPECT_EQ(S(make_expr<CastNode>(DataType::f32(), Expr(3))), "3f");
  EXPECT_EQ(S(make_expr<CastNode>(DataType::i32(), Expr(-2.7f))), "-2");
  // int32 arithmetic wraps like int32.
  Expr big = make_int(2147483647, DataType::i32());
  EXPECT_EQ(S(big + make_int(1, DataType::i32())), "-2147483648");
  EXPECT_EQ(simplify(big + make_int(1, DataType::i32())).dtype(), DataType::i32());
  // Division by zero is left alone.
  EXPECT_EQ(S(Expr(1) / 0), "1 / 0");
}

TEST(Simplify, CanonicalAffineForm) {
  Expr i = Var("i"), j = Var("j"), x = Var("x"), y = Var("y");
  EXPECT_EQ(S((i * 8 + j) - i * 8), "j");
  EXPECT_EQ(S((x + 3) * 2 - 6), "x*2");
  EXPECT_EQ(S(x + y - x), "y");
  EXPECT_EQ(S(x * 3 + 1 + x * 2 - 1), "x*5");
  EXPECT_EQ(S(5 - x), "5 - x");
  EXPECT_EQ(S(i * 64 + j * 8 + (i + 1) * 2), "i*66 + j*8 + 2");
  EXPECT_EQ(S(x * y - y * x), "0");
  EXPECT_EQ(S(x - y - 3), "x - y - 3");
  // floordiv(x, c)*c + floormod(x, c) == x
  EXPECT_EQ(S(floordiv(x, 32) * 32 + floormod(x, 32)), "x");
  EXPECT_EQ(S(floordiv(x + 1, 8) * 16 + floormod(x + 1, 8) * 2), "x*2 + 2");
}

TEST(Simplify, DivModWithBounds) {
  Var i("i"), j("j"), x("x");
  VarRanges r = ranges({{i, 0, 15}, {j, 0, 7}, {x, -100, 100}});
  EXPECT_EQ(S(floordiv(Expr(i) * 8 + j, 8), r), "i");
  EXPECT_EQ(S(floormod(Expr(i) * 8 + j, 8), r), "j");
  EXPECT_EQ(S(floordiv(Expr(i) * 8 + x, 8), r), "i + floordiv(x, 8)");
  EXPECT_EQ(S(floormod(Expr(i) * 8 + x, 8), r), "floormod(x, 8)");
  EXPECT_EQ(S(floordiv(j, 8), r), "0");
  EXPECT_EQ(S(floormod(j, 8), r), "j");
  EXPECT_EQ(S((Expr(i) * 8 + j) / 8, r), "i");
  EXPECT_EQ(S((Expr(i) * 8 + j) % 8, r), "j");
  EXPECT_EQ(S(floordiv(floordiv(x, 4), 8), r), "floordiv(x, 32)");
  EXPECT_EQ(S(floormod(floormod(x, 64), 8), r), "floormod(x, 8)");
  EXPECT_EQ(S(floordiv(Expr(x) * 4, 8), r), "floordiv(x, 2)");
  EXPECT_EQ(S(floormod(Expr(x) * 4 + 2, 8), r), "floormod(x*2 + 1, 4)*2");
  // Not provable: x may be negative, where truncation differs from floor.
  EXPECT_EQ(S((Expr(x) * 8 + 3) / 8, r), "(x*8 + 3) / 8");
  EXPECT_EQ(S((Expr(x) * 8) / 8, r), "x");
}

TEST(Simplify, MinMaxAndComparisons) {
  Var i("i"), n("n"), x("x");
  VarRanges r = ranges({{i, 0, 9}});
  EXPECT_EQ(S(min(i, 10), r), "i");
  EXPECT_EQ(S(max(i, 10), r), "10");
  EXPECT_EQ(S(min(Expr(x), Expr(x))), "x");
  EXPECT_EQ(S(min(min(Expr(x), 5), 3)), "min(x, 3)");
  EXPECT_EQ(S(min(3, Expr(x))), "min(x, 3)");
  EXPECT_EQ(S(Expr(i) < 10, r), "true");
  EXPECT_EQ(S(Expr(i) >= 10, r), "false");
  EXPECT_EQ(S(Expr(i) + 1 < Expr(n)), "i < n - 1");
  EXPECT_EQ(S(Expr(5) < Expr(x)), "x > 5");
  EXPECT_EQ(S(Expr(x) * 2 < 7), "x < 4");
  EXPECT_EQ(S(eq(Expr(x) * 4, 6)), "false");
  EXPECT_EQ(S(logical_and(Expr(i) < 10, Expr(x) < 3), r), "x < 3");
  EXPECT_EQ(S(logical_not(Expr(x) < 3)), "x >= 3");
  EXPECT_EQ(S(select(Expr(i) < 20, Expr(x), Expr(n)), r), "x");
  EXPECT_TRUE(can_prove(Expr(i) * 4 + 3 < 40, r));
  EXPECT_FALSE(can_prove(Expr(i) * 4 + 3 < 39, r));
}

TEST(Simplify, ConstIntBound) {
  Var i("i"), j("j");
  VarRanges r = ranges({{i, 0, 15}, {j, -3, 7}});
  auto b = const_int_bound(Expr(i) * 8 + j, r);
  EXPECT_EQ(b.min_value, -3);
  EXPECT_EQ(b.max_value, 127);
  b = const_int_bound(floormod(j, 4), r);
  EXPECT_EQ(b.min_value, 0);
  EXPECT_EQ(b.max_value, 3);
  b = const_int_bound(floordiv(j, 4), r);
  EXPECT_EQ(b.min_value, -1);
  EXPECT_EQ(b.max_value, 1);
  b = const_int_bound(Expr(j) % 4, r);
  EXPECT_EQ(b.min_value, -3);
  EXPECT_EQ(b.max_value, 3);
  b = const_int_bound(ramp(Expr(i), 2, 4), r);
  EXPECT_EQ(b.max_value, 21);
  b = const_int_bound(Expr(Var("free")), r);
  EXPECT_FALSE(b.min_value.has_value());
  EXPECT_FALSE(b.max_value.has_value());
}

TEST(Simplify, Vectors) {
  Var i("i"), x("x");
  EXPECT_EQ(S(broadcast(Expr(x), 4) + broadcast(Expr(1), 4)), "x4(x + 1)");
  EXPECT_EQ(S(ramp(Expr(x), 1, 4) + broadcast(Expr(3), 4)), "ramp(x + 3, 1, 4)");
  EXPECT_EQ(S(ramp(Expr(x), 1, 4) + ramp(Expr(i), 2, 4)), "ramp(x + i, 3, 4)");
  EXPECT_EQ(S(ramp(Expr(x), 1, 4) * broadcast(Expr(8), 4)), "ramp(x*8, 8, 4)");
  EXPECT_EQ(S(ramp(Expr(x), 0, 4)), "x4(x)");
  VarRanges r = ranges({{i, 0, 7}});
  EXPECT_EQ(S(floordiv(ramp(Expr(i) * 16, 1, 16), broadcast(Expr(16), 16)), r), "x16(i)");
  EXPECT_EQ(S(floormod(ramp(Expr(i) * 16, 1, 16), broadcast(Expr(16), 16)), r), "ramp(0, 1, 16)");
  EXPECT_EQ(S(ramp(Expr(i), 1, 8) < broadcast(Expr(16), 8), r), "x8(true)");
}

TEST(Simplify, Statements) {
  Buffer A = make_buffer("A", DataType::f32(), {64});
  Var i("i"), j("j"), k("k");
  // extent-1 loop disappears; provable guard goes; unprovable stays.
  Stmt s = make_for(
      i, 0, 4, ForKind::Serial,
      make_for(j, 0, 1, ForKind::Serial,
               make_seq({make_if(Expr(i) * 16 + j < 64, make_store(A, 1.0f, Expr(i) * 16 + j)),
                         make_if(Expr(i) < 2, make_store(A, 2.0f, i)),
                         make_for(k, 0, 0, ForKind::Serial, make_store(A, 3.0f, k))})));
  EXPECT_EQ(to_string(simplify(s)),
            "for (i, 0, 4) {\n"
            "  A[i*16] = 1f\n"
            "  if (i < 2) {\n"
            "    A[i] = 2f\n"
            "  }\n"
            "}\n");
  // A false guard drops its body; an else branch survives.
  Stmt t = make_for(i, 0, 8, ForKind::Serial,
                    make_if(Expr(i) >= 8, make_store(A, 1.0f, i), make_store(A, 0.0f, i)));
  EXPECT_EQ(to_string(simplify(t)), "for (i, 0, 8) {\n  A[i] = 0f\n}\n");
  // Facts from a guard hold inside it.
  Stmt u = make_for(i, 0, 64, ForKind::Serial,
                    make_if(Expr(i) < 16, make_store(A, 1.0f, min(i, 20) + floordiv(i, 16))));
  EXPECT_EQ(to_string(simplify(u)), "for (i, 0, 64) {\n  if (i < 16) {\n    A[i] = 1f\n  }\n}\n");
  // Allocation sizes and loop extents fold to constants.
  Var n("n");
  Stmt v = make_stmt<LetStmtNode>(
      n, Expr(16), make_for(i, 0, Expr(n) * 4 - 60, ForKind::Serial, make_store(A, 0.0f, i)));
  EXPECT_EQ(to_string(simplify(v)), "for (i, 0, 4) {\n  A[i] = 0f\n}\n");
}

// ---- randomized equivalence: the proof of correctness --------------------------------

TEST(SimplifyRandom, IntegerExpressionsWithRanges) {
  Gen g(12345);
  for (int tree = 0; tree < 6000; ++tree) {
    g.vars = {Var("x"), Var("y"), Var("z")};
    VarRanges r;
    for (auto& v : g.vars) {
      int64_t lo = g.uni(-40, 20), ext = g.coin(20) ? 1 : g.uni(1, g.coin(70) ? 10 : 40);
      r[v] = ConstIntBound{lo, lo + ext - 1};
    }
    Expr e = g.coin(75) ? g.int_expr(g.uni(1, 5)) : g.bool_expr(g.uni(1, 4));
    check_equivalent(g, e, r, 40);
    if (HasFatalFailure()) return;
  }
}

TEST(SimplifyRandom, IntegerExpressionsWithoutRanges) {
  // No ranges: only unconditional rules may fire; test on a wide domain.
  Gen g(777);
  for (int tree = 0; tree < 4000; ++tree) {
    g.vars = {Var("x"), Var("y")};
    Expr e = g.coin(75) ? g.int_expr(g.uni(1, 5)) : g.bool_expr(g.uni(1, 4));
    Expr s = simplify(e);
    VarRanges wide;
    for (auto& v : g.vars) wide[v] = ConstIntBound{-1000, 1000};
    for (int p = 0; p < 30; ++p) {
      Env env;
      for (auto& v : g.vars) env[v.get()] = g.uni(-1000, 1000);
      Env env2 = env;
      ASSERT_EQ(eval(e, env), eval(s, env2)) << e << "\n  -> " << s;
    }
    check_equivalent(g, e, wide, 10);
    if (HasFatalFailure()) return;
  }
}

TEST(SimplifyRandom, VectorExpressions) {
  Gen g(4242);
  for (int tree = 0; tree < 2000; ++tree) {
    Var x("x"), y("y");
    g.vars = {x, y};
    VarRanges r = ranges({{x, g.uni(-20, 5), g.uni(6, 30)}, {y, 0, g.uni(0, 20)}});
    int lanes = 1 << g.uni(1, 3);
    auto scalar = [&]() { return g.int_expr(2); };
    std::function<Expr(int)> vec = [&](int d) -> Expr {
      if (d == 0 || g.coin(20))
        return g.coin(60) ? ramp(scalar(), make_int(g.uni(-3, 4)), lanes)
                          : broadcast(scalar(), lanes);
      Expr a = vec(d - 1);
      Expr c = broadcast(make_int(g.divisor()), lanes);
      switch (g.uni(0, 6)) {
        case 0: return a + vec(d - 1);
        case 1: return a - vec(d - 1);
        case 2: return a * broadcast(make_int(g.uni(-3, 5)), lanes);
        case 3: return floordiv(a, c);
        case 4: return floormod(a, c);
        case 5: return min(a, vec(d - 1));
        default: return select(a < vec(d - 1), a, vec(d - 1));
      }
    };
    check_equivalent(g, vec(g.uni(1, 4)), r, 20);
    if (HasFatalFailure()) return;
  }
}

TEST(SimplifyRandom, SimplifiedFormIsAFixedPoint) {
  Gen g(99);
  int not_fixed = 0;
  for (int tree = 0; tree < 3000; ++tree) {
    g.vars = {Var("x"), Var("y"), Var("z")};
    VarRanges r;
    for (auto& v : g.vars) r[v] = ConstIntBound{g.uni(-10, 10), g.uni(10, 30)};
    Expr s = simplify(g.int_expr(g.uni(1, 5)), r);
    if (to_string(simplify(s, r)) != to_string(s)) ++not_fixed;
  }
  // The driver iterates to a fixed point within a bounded number of rounds;
  // rare leftovers are allowed, systematic ones are not.
  EXPECT_LE(not_fixed, 30);
}

// Random loop nests: the simplified statement must perform the same stores.
namespace {

using Trace = std::vector<std::pair<int64_t, int64_t>>;

void run(const Stmt& s, Env& env, Trace& out) {
  if (!s) return;
  switch (s.kind()) {
    case StmtKind::For: {
      auto* f = s.as<ForNode>();
      int64_t mn = eval(f->min, env)[0], ext = eval(f->extent, env)[0];
      for (int64_t v = mn; v < mn + ext; ++v) {
        env[f->var.get()] = v;
        run(f->body, env, out);
      }
      return;
    }
    case StmtKind::Seq:
      for (auto& st : s.as<SeqNode>()->seq) run(st, env, out);
      return;
    case StmtKind::IfThenElse: {
      auto* i = s.as<IfThenElseNode>();
      run(eval(i->cond, env)[0] ? i->then_case : i->else_case, env, out);
      return;
    }
    case StmtKind::LetStmt: {
      auto* l = s.as<LetStmtNode>();
      env[l->var.get()] = eval(l->value, env)[0];
      run(l->body, env, out);
      return;
    }
    case StmtKind::Store: {
      auto* st = s.as<StoreNode>();
      out.emplace_back(eval(st->index, env)[0], eval(st->value, env)[0]);
      return;
    }
    default: throw std::logic_error("run: unexpected statement");
  }
}

}  // namespace

TEST(SimplifyRandom, LoopNests) {
  Gen g(2024);
  Buffer B = make_buffer("B", DataType::i64(), {1024});
  for (int trial = 0; trial < 1500; ++trial) {
    std::vector<Var> loop_vars;
    std::function<Stmt(int)> stmt = [&](int depth) -> Stmt {
      int pick = g.uni(0, 9);
      if (depth > 0 && pick < 4) {
        Var v("v" + std::to_string(loop_vars.size()));
        Expr mn = make_int(g.uni(-5, 5));
        Expr ext = g.coin(70) ? make_int(g.uni(0, 5)) : Expr(make_int(g.uni(0, 3))) + 2;
        loop_vars.push_back(v);
        g.vars = loop_vars;
        Stmt body = stmt(depth - 1);
        loop_vars.pop_back();
        g.vars = loop_vars;
        return make_for(v, mn, ext, ForKind::Serial, body);
      }
      if (loop_vars.empty()) g.vars = {Var("unused")};
      if (depth > 0 && pick < 6 && !loop_vars.empty())
        return make_if(g.bool_expr(2), stmt(depth - 1), g.coin(50) ? stmt(depth - 1) : Stmt());
      if (depth > 0 && pick < 7 && !loop_vars.empty()) {
        Var l("l" + std::to_string(g.uni(0, 99)));
        Expr val = g.int_expr(2);
        loop_vars.push_back(l);
        g.vars = loop_vars;
        Stmt body = stmt(depth - 1);
        loop_vars.pop_back();
        g.vars = loop_vars;
        return make_stmt<LetStmtNode>(l, val, body);
      }
      if (depth > 0 && pick < 8) return make_seq({stmt(depth - 1), stmt(depth - 1)});
      if (loop_vars.empty()) return make_store(B, make_int(g.uni(0, 9)), make_int(0));
      return make_store(B, g.int_expr(3), g.int_expr(3));
    };
    Stmt s = stmt(4);
    Stmt t = simplify(s);
    Env e1, e2;
    Trace want, got;
    run(s, e1, want);
    run(t, e2, got);
    ASSERT_EQ(want, got) << "original:\n" << s << "simplified:\n" << t;
  }
}
