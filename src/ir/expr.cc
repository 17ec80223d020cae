#include "ir/expr.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ir/tensor.h"

namespace kiln::ir {

Expr::Expr(int v) : Expr(make_int(v)) {}
Expr::Expr(int64_t v) : Expr(make_int(v)) {}
Expr::Expr(float v) : Expr(make_float(v)) {}
Expr::Expr(double v) : Expr(make_float(v)) {}

Var::Var(std::string name, DataType t)
    : node_(std::make_shared<const VarNode>(std::move(name), t)) {}

bool is_binary(ExprKind k) { return k >= ExprKind::Add && k <= ExprKind::Or; }
bool is_comparison(ExprKind k) { return k >= ExprKind::EQ && k <= ExprKind::GE; }

NotNode::NotNode(Expr x) : ExprNode(kKind, x.dtype()), a(std::move(x)) {}

SelectNode::SelectNode(Expr c, Expr t, Expr f)
    : ExprNode(kKind, t.dtype()),
      cond(std::move(c)),
      true_value(std::move(t)),
      false_value(std::move(f)) {}

const char* intrinsic_name(Intrinsic op) {
  switch (op) {
    case Intrinsic::Exp: return "exp";
    case Intrinsic::Log: return "log";
    case Intrinsic::Sqrt: return "sqrt";
    case Intrinsic::Rsqrt: return "rsqrt";
    case Intrinsic::Tanh: return "tanh";
    case Intrinsic::Erf: return "erf";
    case Intrinsic::Sigmoid: return "sigmoid";
    case Intrinsic::Fabs: return "fabs";
    case Intrinsic::Pow: return "pow";
    case Intrinsic::Floor: return "floor";
    case Intrinsic::Ceil: return "ceil";
    case Intrinsic::Round: return "round";
    case Intrinsic::RoundEven: return "round_even";
    case Intrinsic::Sin: return "sin";
    case Intrinsic::Cos: return "cos";
    case Intrinsic::Tan: return "tan";
    case Intrinsic::Asin: return "asin";
    case Intrinsic::Acos: return "acos";
    case Intrinsic::Atan: return "atan";
    case Intrinsic::Sinh: return "sinh";
    case Intrinsic::Cosh: return "cosh";
    case Intrinsic::Asinh: return "asinh";
    case Intrinsic::Acosh: return "acosh";
    case Intrinsic::Atanh: return "atanh";
    case Intrinsic::ShiftLeft: return "shl";
    case Intrinsic::ShiftRight: return "shr";
    case Intrinsic::DotU8I8: return "dot4_u8i8";
    case Intrinsic::DotU8I8NarrowB: return "dot4_u8i8_narrow_b";
    case Intrinsic::DotBF16: return "dot2_bf16";
    case Intrinsic::DotI16: return "dot2_i16";
    case Intrinsic::AmxGemm: return "amx_gemm";
    case Intrinsic::CheckIndex: return "check_index";
  }
  return "?";
}

bool is_transcendental_trig(Intrinsic op) { return op >= Intrinsic::Sin && op <= Intrinsic::Atanh; }

Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape, MemScope scope) {
  auto b = std::make_shared<BufferNode>();
  b->name = std::move(name);
  b->dtype = dtype.element_of();
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

LoadNode::LoadNode(Buffer buf, Expr idx, Expr pred)
    : ExprNode(kKind, buf->dtype.with_lanes(idx.dtype().lanes)),
      buffer(std::move(buf)),
      index(std::move(idx)),
      predicate(std::move(pred)) {}

RampNode::RampNode(Expr b, Expr s, int l)
    : ExprNode(kKind, b.dtype().with_lanes(l)),
      base(std::move(b)),
      stride(std::move(s)),
      lanes(l) {}

IterVar make_iter_var(Range dom, const std::string& name, IterKind kind) {
  auto iv = std::make_shared<IterVarNode>();
  iv->var = Var(name);
  iv->dom = std::move(dom);
  iv->kind = kind;
  return iv;
}

TensorReadNode::TensorReadNode(Tensor t, std::vector<Expr> idx)
    : ExprNode(kKind, t->dtype), tensor(std::move(t)), indices(std::move(idx)) {}

// ---- constructors -----------------------------------------------------------

Expr make_int(int64_t v, DataType t) { return make_expr<IntImmNode>(t, v); }
Expr make_float(double v, DataType t) { return make_expr<FloatImmNode>(t, v); }
Expr make_bool(bool v) { return make_expr<IntImmNode>(DataType::boolean(), v ? 1 : 0); }

Expr make_const(DataType t, double value) {
  Expr scalar = t.is_float() ? make_float(value, t.element_of())
                             : make_expr<IntImmNode>(t.element_of(), static_cast<int64_t>(value));
  return t.lanes > 1 ? broadcast(scalar, t.lanes) : scalar;
}

static bool is_imm(const Expr& e) {
  return e.kind() == ExprKind::IntImm || e.kind() == ExprKind::FloatImm;
}

Expr cast(DataType t, Expr v) {
  if (v.dtype() == t) return v;
  if (v.dtype().lanes != t.lanes) {
    if (v.dtype().lanes == 1) return broadcast(cast(t.element_of(), v), t.lanes);
    throw std::invalid_argument("cast between different lane counts: " + v.dtype().str() + " -> " +
                                t.str());
  }
  // Casting a literal folds immediately: it keeps printed IR readable.
  if (t.lanes == 1) {
    if (auto* i = v.as<IntImmNode>()) return make_const(t, static_cast<double>(i->value));
    if (auto* f = v.as<FloatImmNode>()) {
      if (t.is_float()) return make_float(f->value, t);
    }
  }
  return make_expr<CastNode>(t, std::move(v));
}

// Aligns operand types of a binary operation (see the header).
static void unify(Expr& a, Expr& b) {
  DataType ta = a.dtype(), tb = b.dtype();
  if (ta.element_of() != tb.element_of()) {
    if (is_imm(a) && !is_imm(b)) {
      a = cast(tb.element_of(), a);
    } else if (is_imm(b) && !is_imm(a)) {
      b = cast(ta.element_of(), b);
    } else if (ta.is_float() != tb.is_float()) {
      if (!(is_imm(a) && is_imm(b)))
        throw std::invalid_argument("binary operands of different types: " + ta.str() + " and " +
                                    tb.str() + " (insert a cast)");
      if (ta.is_float())
        b = cast(ta.element_of(), b);
      else
        a = cast(tb.element_of(), a);
    } else if (ta.code == tb.code || (ta.is_integer() && tb.is_integer())) {
      // Integer widening: int32 + int64 -> int64.
      if (ta.bits < tb.bits)
        a = cast(tb.with_lanes(ta.lanes), a);
      else
        b = cast(ta.with_lanes(tb.lanes), b);
    } else {
      throw std::invalid_argument("binary operands of different types: " + ta.str() + " and " +
                                  tb.str());
    }
  }
  int la = a.dtype().lanes, lb = b.dtype().lanes;
  if (la != lb) {
    if (la == 1)
      a = broadcast(a, lb);
    else if (lb == 1)
      b = broadcast(b, la);
    else
      throw std::invalid_argument("binary operands with different lanes");
  }
}

Expr make_binary(ExprKind k, Expr a, Expr b) {
  if (!a || !b) throw std::invalid_argument("binary operation on a null expression");
  unify(a, b);
  DataType t = a.dtype();
  if (is_comparison(k)) t = DataType::boolean(t.lanes);
  if (k == ExprKind::And || k == ExprKind::Or) {
    if (!a.dtype().is_bool()) throw std::invalid_argument("&& / || need bool operands");
  }
  switch (k) {
#define KILN_CASE(K) \
  case ExprKind::K: return make_expr<BinaryOf<ExprKind::K>>(t, std::move(a), std::move(b));
    KILN_CASE(Add)
    KILN_CASE(Sub)
    KILN_CASE(Mul)
    KILN_CASE(Div)
    KILN_CASE(Mod)
    KILN_CASE(FloorDiv)
    KILN_CASE(FloorMod) KILN_CASE(Min) KILN_CASE(Max) KILN_CASE(EQ) KILN_CASE(NE) KILN_CASE(LT)
        KILN_CASE(LE) KILN_CASE(GT) KILN_CASE(GE) KILN_CASE(And) KILN_CASE(Or)
#undef KILN_CASE
            default : throw std::invalid_argument("make_binary: not a binary kind");
  }
}

Expr select(Expr cond, Expr t, Expr f) {
  unify(t, f);
  if (!cond.dtype().is_bool()) throw std::invalid_argument("select condition must be bool");
  if (cond.dtype().lanes == 1 && t.dtype().lanes > 1) cond = broadcast(cond, t.dtype().lanes);
  if (t.dtype().lanes == 1 && cond.dtype().lanes > 1) {
    t = broadcast(t, cond.dtype().lanes);
    f = broadcast(f, cond.dtype().lanes);
  }
  return make_expr<SelectNode>(std::move(cond), std::move(t), std::move(f));
}

namespace {

// Checks a dot4_u8i8 call and returns its type (int32xN); a scalar acc becomes a
// broadcast to N lanes so that the result's lanes are acc's.
DataType check_dot4(std::vector<Expr>& args) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("dot4_u8i8: " + what); };
  if (args.size() != 3 && args.size() != 9)
    fail("takes 3 (acc, a, b) or 9 (acc, a0..a3, b0..b3) arguments, got " +
         std::to_string(args.size()));
  for (size_t i = 1; i < args.size(); ++i) {
    bool is_a = args.size() == 3 ? i == 1 : i <= 4;
    DataType want = is_a ? DataType::u8() : DataType::i8();
    if (args[i].dtype().element_of() != want)
      fail("argument " + std::to_string(i) + " must be " + want.str() + ", got " +
           args[i].dtype().str());
  }
  if (args[0].dtype().element_of() != DataType::i32())
    fail("the accumulator must be int32, got " + args[0].dtype().str());
  int n = args[0].dtype().lanes;
  if (args.size() == 3) {
    n = std::max(n, args[2].dtype().lanes / 4);
    int la = args[1].dtype().lanes, lb = args[2].dtype().lanes;
    if (lb != 4 * n || (la != 4 && la != 4 * n) ||
        (args[0].dtype().lanes != 1 && args[0].dtype().lanes != n))
      fail("lanes do not fit: acc " + args[0].dtype().str() + ", a " + args[1].dtype().str() +
           ", b " + args[2].dtype().str() + " (want int32xN, uint8x4N or uint8x4, int8x4N)");
  } else {
    for (auto& a : args) n = std::max<int>(n, a.dtype().lanes);
    for (auto& a : args)
      if (a.dtype().lanes != 1 && a.dtype().lanes != n)
        fail("arguments of " + std::to_string(a.dtype().lanes) + " and " + std::to_string(n) +
             " lanes");
  }
  if (n > 1 && args[0].dtype().lanes == 1) args[0] = broadcast(args[0], n);
  return DataType::i32(n);
}

// Checks a pair dot product call (dot2_bf16: float32 += bfloat16 pairs; dot2_i16:
// int32 += int16 pairs) and returns its type (acc_type x N).
DataType check_dot2(std::vector<Expr>& args, const char* name, DataType acc_type,
                    DataType pair_type) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(std::string(name) + ": " + what);
  };
  if (args.size() != 3 && args.size() != 5)
    fail("takes 3 (acc, a, b) or 5 (acc, a0, a1, b0, b1) arguments, got " +
         std::to_string(args.size()));
  if (args[0].dtype().element_of() != acc_type)
    fail("the accumulator must be " + acc_type.str() + ", got " + args[0].dtype().str());
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i].dtype().element_of() != pair_type)
      fail("argument " + std::to_string(i) + " must be " + pair_type.str() + ", got " +
           args[i].dtype().str());
  int n = 1;
  if (args.size() == 3) {
    n = args[1].dtype().lanes / 2;
    if (args[1].dtype().lanes % 2 != 0 || args[2].dtype().lanes != 2 * n ||
        (args[0].dtype().lanes != 1 && args[0].dtype().lanes != n))
      fail("lanes do not fit: acc " + args[0].dtype().str() + ", a " + args[1].dtype().str() +
           ", b " + args[2].dtype().str() + " (want " + acc_type.str() + "xN, " + pair_type.str() +
           "x2N, " + pair_type.str() + "x2N)");
  } else {
    for (auto& a : args) n = std::max<int>(n, a.dtype().lanes);
    for (auto& a : args)
      if (a.dtype().lanes != 1 && a.dtype().lanes != n)
        fail("arguments of " + std::to_string(a.dtype().lanes) + " and " + std::to_string(n) +
             " lanes");
  }
  if (n > 1 && args[0].dtype().lanes == 1) args[0] = broadcast(args[0], n);
  return acc_type.with_lanes(n);
}

// Checks an amx_gemm call (see expr.h); its type is int32.
void check_amx_gemm(const std::vector<Expr>& args) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("amx_gemm: " + what); };
  if (args.size() != 9)
    fail("takes 9 arguments (c, a, b, op, rows, n, k, lda, ldc), got " +
         std::to_string(args.size()));
  int64_t v[6];
  for (int i = 0; i < 6; ++i) {
    const int64_t* p = as_const_int(args[3 + i]);
    if (!p) fail("argument " + std::to_string(3 + i) + " must be an integer immediate");
    v[i] = *p;
  }
  if (v[0] != 0 && v[0] != 1) fail("unknown op " + std::to_string(v[0]));
  bool bf16 = v[0] == 1;
  DataType want[3] = {bf16 ? DataType::f32() : DataType::i32(),
                      bf16 ? DataType::bf16() : DataType::u8(),
                      bf16 ? DataType::bf16() : DataType::i8()};
  const char* names[3] = {"c", "a", "b"};
  for (int i = 0; i < 3; ++i) {
    auto* l = args[i].as<LoadNode>();
    if (!l || !args[i].dtype().is_scalar())
      fail(std::string(names[i]) + " must be a scalar load (its address is taken)");
    if (l->buffer->dtype != want[i])
      fail(std::string(names[i]) + " must be a " + want[i].str() + " buffer, got " +
           l->buffer->dtype.str());
  }
  int64_t rows = v[1], n = v[2], k = v[3], lda = v[4], ldc = v[5];
  int64_t g = bf16 ? 2 : 4;
  if (rows < 1) fail("rows must be positive, got " + std::to_string(rows));
  if (n < 1 || k < 1) fail("n and k must be positive");
  if (k % g != 0) fail("k = " + std::to_string(k) + " is not a multiple of " + std::to_string(g));
  if (lda < k || ldc < n) fail("lda < k or ldc < n");
}

}  // namespace

Expr amx_gemm(AmxOp op, Expr c, Expr a, Expr b, int64_t rows, int64_t n, int64_t k, int64_t lda,
              int64_t ldc) {
  std::vector<Expr> args = {std::move(c), std::move(a), std::move(b)};
  for (int64_t x : {int64_t(op), rows, n, k, lda, ldc}) args.push_back(make_int(x));
  return call(Intrinsic::AmxGemm, std::move(args));
}

float bf16_to_f32_value(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

uint16_t f32_to_bf16_value(float x) {
  if (x != x) return 0x7fc0;
  uint32_t bits = std::bit_cast<uint32_t>(x);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float dot2_bf16_value(float acc, const uint16_t a[2], const uint16_t b[2]) {
  // Products are exact in float32 (8-bit significands), so fmaf == add of the product.
  float r = std::fma(bf16_to_f32_value(a[1]), bf16_to_f32_value(b[1]), acc);
  return std::fma(bf16_to_f32_value(a[0]), bf16_to_f32_value(b[0]), r);
}

Expr dot2_i16(Expr acc, Expr a, Expr b) {
  return call(Intrinsic::DotI16, {std::move(acc), std::move(a), std::move(b)});
}

Expr dot2_i16(Expr acc, Expr a0, Expr a1, Expr b0, Expr b1) {
  return call(Intrinsic::DotI16,
              {std::move(acc), std::move(a0), std::move(a1), std::move(b0), std::move(b1)});
}

int32_t dot2_i16_value(int32_t acc, const int16_t a[2], const int16_t b[2]) {
  uint32_t r = static_cast<uint32_t>(acc);
  for (int j = 0; j < 2; ++j)
    r += static_cast<uint32_t>(int32_t(a[j]) * int32_t(b[j]));  // wraps like the instructions
  return static_cast<int32_t>(r);
}

Expr dot2_bf16(Expr acc, Expr a, Expr b) {
  return call(Intrinsic::DotBF16, {std::move(acc), std::move(a), std::move(b)});
}

Expr dot2_bf16(Expr acc, Expr a0, Expr a1, Expr b0, Expr b1) {
  return call(Intrinsic::DotBF16,
              {std::move(acc), std::move(a0), std::move(a1), std::move(b0), std::move(b1)});
}

int32_t dot4_u8i8_value(int32_t acc, const uint8_t a[4], const int8_t b[4]) {
  uint32_t r = static_cast<uint32_t>(acc);
  for (int j = 0; j < 4; ++j)
    r += static_cast<uint32_t>(int32_t(a[j]) * int32_t(b[j]));  // wraps like the instructions
  return static_cast<int32_t>(r);
}

Expr dot4_u8i8(Expr acc, Expr a, Expr b) {
  return call(Intrinsic::DotU8I8, {std::move(acc), std::move(a), std::move(b)});
}

namespace {
Expr dot4_bytes_call(Intrinsic op, Expr acc, const std::vector<Expr>& a4,
                     const std::vector<Expr>& b4) {
  if (a4.size() != 4 || b4.size() != 4)
    throw std::invalid_argument(std::string(intrinsic_name(op)) +
                                ": four bytes of a and four of b");
  std::vector<Expr> args = {std::move(acc)};
  args.insert(args.end(), a4.begin(), a4.end());
  args.insert(args.end(), b4.begin(), b4.end());
  return call(op, std::move(args));
}
}  // namespace

Expr dot4_u8i8(Expr acc, const std::vector<Expr>& a4, const std::vector<Expr>& b4) {
  return dot4_bytes_call(Intrinsic::DotU8I8, std::move(acc), a4, b4);
}

Expr dot4_u8i8_narrow_b(Expr acc, Expr a, Expr b) {
  return call(Intrinsic::DotU8I8NarrowB, {std::move(acc), std::move(a), std::move(b)});
}

Expr dot4_u8i8_narrow_b(Expr acc, const std::vector<Expr>& a4, const std::vector<Expr>& b4) {
  return dot4_bytes_call(Intrinsic::DotU8I8NarrowB, std::move(acc), a4, b4);
}

bool is_dot4_u8i8(Intrinsic op) {
  return op == Intrinsic::DotU8I8 || op == Intrinsic::DotU8I8NarrowB;
}

Expr call(Intrinsic op, std::vector<Expr> args) {
  if (args.empty()) throw std::invalid_argument("intrinsic call without arguments");
  if (is_dot4_u8i8(op)) {
    DataType t = check_dot4(args);
    return make_expr<CallNode>(t, op, std::move(args));
  }
  if (op == Intrinsic::DotBF16) {
    DataType t = check_dot2(args, "dot2_bf16", DataType::f32(), DataType::bf16());
    return make_expr<CallNode>(t, op, std::move(args));
  }
  if (op == Intrinsic::DotI16) {
    DataType t = check_dot2(args, "dot2_i16", DataType::i32(), DataType::i16());
    return make_expr<CallNode>(t, op, std::move(args));
  }
  if (op == Intrinsic::AmxGemm) {
    check_amx_gemm(args);
    return make_expr<CallNode>(DataType::i32(), op, std::move(args));
  }
  if (op == Intrinsic::ShiftLeft || op == Intrinsic::ShiftRight) {
    if (args.size() != 2) throw std::invalid_argument("shifts take two arguments");
    unify(args[0], args[1]);
    if (!args[0].dtype().is_integer())
      throw std::invalid_argument(std::string(intrinsic_name(op)) +
                                  " needs integer arguments, got " + args[0].dtype().str());
    return make_expr<CallNode>(args[0].dtype(), op, std::move(args));
  }
  if (op == Intrinsic::CheckIndex) {
    if (args.size() != 2) throw std::invalid_argument("check_index takes two arguments");
    if (!args[0].dtype().is_bool())
      throw std::invalid_argument("check_index needs a bool condition, got " +
                                  args[0].dtype().str());
    int lc = args[0].dtype().lanes, lv = args[1].dtype().lanes;
    if (lc == 1 && lv > 1) args[0] = broadcast(args[0], lv);
    if (lv == 1 && lc > 1) args[1] = broadcast(args[1], lc);
    if (args[0].dtype().lanes != args[1].dtype().lanes)
      throw std::invalid_argument("check_index with different lanes");
    return make_expr<CallNode>(args[1].dtype(), op, std::move(args));
  }
  if (op == Intrinsic::Pow) {
    if (args.size() != 2) throw std::invalid_argument("pow takes two arguments");
    unify(args[0], args[1]);
  }
  DataType t = args[0].dtype();
  if (!t.is_float())
    throw std::invalid_argument(std::string(intrinsic_name(op)) + " needs a float argument, got " +
                                t.str());
  return make_expr<CallNode>(t, op, std::move(args));
}

Expr ramp(Expr base, Expr stride, int lanes) {
  stride = cast(base.dtype(), stride);
  return make_expr<RampNode>(std::move(base), std::move(stride), lanes);
}

Expr broadcast(Expr value, int lanes) {
  if (lanes == 1) return value;
  if (value.dtype().lanes != 1) throw std::invalid_argument("broadcast of a vector");
  return make_expr<BroadcastNode>(std::move(value), lanes);
}

Expr load(Buffer buf, Expr index, Expr predicate) {
  return make_expr<LoadNode>(std::move(buf), std::move(index), std::move(predicate));
}

Expr operator+(Expr a, Expr b) { return make_binary(ExprKind::Add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return make_binary(ExprKind::Sub, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return make_binary(ExprKind::Sub, make_const(a.dtype(), 0), a); }
Expr operator*(Expr a, Expr b) { return make_binary(ExprKind::Mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return make_binary(ExprKind::Div, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return make_binary(ExprKind::Mod, std::move(a), std::move(b)); }
Expr operator<(Expr a, Expr b) { return make_binary(ExprKind::LT, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return make_binary(ExprKind::LE, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return make_binary(ExprKind::GT, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return make_binary(ExprKind::GE, std::move(a), std::move(b)); }
Expr logical_and(Expr a, Expr b) { return make_binary(ExprKind::And, std::move(a), std::move(b)); }
Expr logical_or(Expr a, Expr b) { return make_binary(ExprKind::Or, std::move(a), std::move(b)); }
Expr logical_not(Expr a) {
  if (!a.dtype().is_bool()) throw std::invalid_argument("! needs a bool operand");
  return make_expr<NotNode>(std::move(a));
}
Expr eq(Expr a, Expr b) { return make_binary(ExprKind::EQ, std::move(a), std::move(b)); }
Expr ne(Expr a, Expr b) { return make_binary(ExprKind::NE, std::move(a), std::move(b)); }
Expr floordiv(Expr a, Expr b) {
  return make_binary(ExprKind::FloorDiv, std::move(a), std::move(b));
}
Expr floormod(Expr a, Expr b) {
  return make_binary(ExprKind::FloorMod, std::move(a), std::move(b));
}
Expr min(Expr a, Expr b) { return make_binary(ExprKind::Min, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return make_binary(ExprKind::Max, std::move(a), std::move(b)); }

Expr exp(Expr x) { return call(Intrinsic::Exp, {std::move(x)}); }
Expr log(Expr x) { return call(Intrinsic::Log, {std::move(x)}); }
Expr sqrt(Expr x) { return call(Intrinsic::Sqrt, {std::move(x)}); }
Expr rsqrt(Expr x) { return call(Intrinsic::Rsqrt, {std::move(x)}); }
Expr tanh(Expr x) { return call(Intrinsic::Tanh, {std::move(x)}); }
Expr erf(Expr x) { return call(Intrinsic::Erf, {std::move(x)}); }
Expr sigmoid(Expr x) { return call(Intrinsic::Sigmoid, {std::move(x)}); }
Expr fabs(Expr x) { return call(Intrinsic::Fabs, {std::move(x)}); }
Expr pow(Expr x, Expr y) { return call(Intrinsic::Pow, {std::move(x), std::move(y)}); }
Expr floor(Expr x) { return call(Intrinsic::Floor, {std::move(x)}); }
Expr ceil(Expr x) { return call(Intrinsic::Ceil, {std::move(x)}); }
Expr round(Expr x) { return call(Intrinsic::Round, {std::move(x)}); }
Expr round_even(Expr x) { return call(Intrinsic::RoundEven, {std::move(x)}); }
Expr sin(Expr x) { return call(Intrinsic::Sin, {std::move(x)}); }
Expr cos(Expr x) { return call(Intrinsic::Cos, {std::move(x)}); }
Expr tan(Expr x) { return call(Intrinsic::Tan, {std::move(x)}); }
Expr asin(Expr x) { return call(Intrinsic::Asin, {std::move(x)}); }
Expr acos(Expr x) { return call(Intrinsic::Acos, {std::move(x)}); }
Expr atan(Expr x) { return call(Intrinsic::Atan, {std::move(x)}); }
Expr sinh(Expr x) { return call(Intrinsic::Sinh, {std::move(x)}); }
Expr cosh(Expr x) { return call(Intrinsic::Cosh, {std::move(x)}); }
Expr asinh(Expr x) { return call(Intrinsic::Asinh, {std::move(x)}); }
Expr acosh(Expr x) { return call(Intrinsic::Acosh, {std::move(x)}); }
Expr atanh(Expr x) { return call(Intrinsic::Atanh, {std::move(x)}); }
Expr shift_left(Expr x, Expr y) { return call(Intrinsic::ShiftLeft, {std::move(x), std::move(y)}); }
Expr shift_right(Expr x, Expr y) {
  return call(Intrinsic::ShiftRight, {std::move(x), std::move(y)});
}
Expr check_index(Expr in_range, Expr value) {
  return call(Intrinsic::CheckIndex, {std::move(in_range), std::move(value)});
}

const int64_t* as_const_int(const Expr& e) {
  if (!e) return nullptr;
  if (auto* i = e.as<IntImmNode>()) return &i->value;
  if (auto* b = e.as<BroadcastNode>()) return as_const_int(b->value);
  return nullptr;
}
bool is_const_int(const Expr& e, int64_t value) {
  const int64_t* v = as_const_int(e);
  return v && *v == value;
}
bool is_zero(const Expr& e) { return is_const_int(e, 0); }
bool is_one(const Expr& e) { return is_const_int(e, 1); }

Expr max_value(DataType t) {
  DataType s = t.element_of();
  if (s.is_float()) {
    double v = s.bits == 64                                 ? std::numeric_limits<double>::max()
               : s.bits == 32 || s.code == TypeCode::BFloat ? std::numeric_limits<float>::max()
                                                            : 65504.0;
    return make_const(t, v);
  }
  if (s.is_bool()) return make_const(t, 1);
  if (s.is_uint())
    return make_expr<IntImmNode>(s, s.bits >= 64 ? -1 : int64_t((uint64_t(1) << s.bits) - 1));
  return make_expr<IntImmNode>(
      s, s.bits >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (s.bits - 1)) - 1);
}

Expr min_value(DataType t) {
  DataType s = t.element_of();
  if (s.is_float()) {
    auto* f = max_value(s).as<FloatImmNode>();
    return make_const(t, -f->value);
  }
  if (s.is_bool() || s.is_uint()) return make_const(t, 0);
  return make_expr<IntImmNode>(
      s, s.bits >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (s.bits - 1)));
}

Expr reduce_identity(ReduceOp op, DataType t) {
  switch (op) {
    case ReduceOp::Sum: return make_const(t, 0);
    case ReduceOp::Max: return t.is_float() ? make_const(t, -INFINITY) : min_value(t);
    case ReduceOp::Min: return t.is_float() ? make_const(t, INFINITY) : max_value(t);
    case ReduceOp::Prod: return make_const(t, 1);
  }
  return Expr();
}

}  // namespace kiln::ir
