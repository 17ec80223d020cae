// Vector math in IR. Each function works lane-wise on float or <N x float>,
// uses only arithmetic, compares, selects and bit casts (so it vectorizes
// to whatever width the target has) and handles 0, +-inf and NaN explicitly.
#include "codegen/intrinsics.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <initializer_list>
#include <limits>

namespace kiln::codegen::detail {

namespace {

using llvm::Value;

// Small helpers bound to one builder and one float (vector) type.
struct Math {
  llvm::IRBuilderBase& b;
  llvm::Type* ty;   // float or <N x float>
  llvm::Type* ity;  // i32 or <N x i32>

  Math(llvm::IRBuilderBase& builder, Value* x)
      : b(builder), ty(x->getType()), ity(int_type(x->getType())) {}

  static llvm::Type* int_type(llvm::Type* t) {
    llvm::Type* i32 = llvm::Type::getInt32Ty(t->getContext());
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t))
      return llvm::FixedVectorType::get(i32, vt->getNumElements());
    return i32;
  }

  Value* c(double v) { return llvm::ConstantFP::get(ty, v); }
  Value* ci(int64_t v) { return llvm::ConstantInt::get(ity, v); }
  Value* fma(Value* x, Value* y, Value* z) {
    // fmuladd: fused where the target has FMA, never less accurate.
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {ty}, {x, y, z});
  }
  Value* unary(llvm::Intrinsic::ID id, Value* x) { return b.CreateIntrinsic(id, {ty}, {x}); }
  // Horner evaluation of sum coefs[i] * x^(n-1-i).
  Value* poly(Value* x, std::initializer_list<double> coefs) {
    Value* y = nullptr;
    for (double k : coefs) y = y ? fma(y, x, c(k)) : c(k);
    return y;
  }
  Value* min(Value* x, double hi) { return b.CreateSelect(b.CreateFCmpOGT(x, c(hi)), c(hi), x); }
  Value* max(Value* x, double lo) { return b.CreateSelect(b.CreateFCmpOLT(x, c(lo)), c(lo), x); }
  Value* is_nan(Value* x) { return b.CreateFCmpUNO(x, x); }
  // 2^n for integer n in [-126, 127], built from the exponent bits.
  Value* pow2(Value* n) { return b.CreateBitCast(b.CreateShl(b.CreateAdd(n, ci(127)), 23), ty); }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// exp keeps its own fast-math-free builder state: reassociation would undo
// the exact two-constant range reduction below.
struct NoFastMath {
  llvm::IRBuilderBase::FastMathFlagGuard guard;
  explicit NoFastMath(llvm::IRBuilderBase& b) : guard(b) { b.clearFastMathFlags(); }
};

// exp(r) - 1 for x = fx ln2 + r: the range reduction (two constants, so r
// is exact) and the degree-7 polynomial of Cephes expf, shared by exp and the
// sigmoid's exp (exp_reduced adds the 1).
Value* exp_reduced_minus_one(Math& m, Value* fx, Value* x) {
  Value* r = m.fma(fx, m.c(-0.693359375), x);
  r = m.fma(fx, m.c(2.12194440e-4), r);
  Value* z = m.b.CreateFMul(r, r);
  // Cephes' y = c0 r^5 + ... + c5 in Estrin's form, (c0 r + c1) z^2 + (c2 r +
  // c3) z + (c4 r + c5): three dependent steps instead of Horner's five. A
  // vector's exp is one long dependency chain, and in an unrolled loop of
  // sigmoids the out-of-order window covers only a few vectors' chains:
  // a SiLU over 1.2 M values ran 6 % faster than with Horner (AVX2 code on a
  // Zen 4, one thread).
  Value* p01 = m.fma(m.c(1.9875691500E-4), r, m.c(1.3981999507E-3));
  Value* p23 = m.fma(m.c(8.3334519073E-3), r, m.c(4.1665795894E-2));
  Value* p45 = m.fma(m.c(1.6666665459E-1), r, m.c(5.0000001201E-1));
  Value* y = m.fma(m.fma(p01, z, p23), z, p45);
  return m.fma(y, z, r);
}
Value* exp_reduced(Math& m, Value* fx, Value* x) {
  return m.b.CreateFAdd(exp_reduced_minus_one(m, fx, x), m.c(1.0));
}

}  // namespace

// Cephes expf: x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-7
// polynomial, then scaled by 2^n. 2^n is applied as two factors so that n in
// [-150, 128] (denormal results and the top of the range) stays exact.
Value* emit_exp_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Value* xc = m.min(m.max(x, -104.0), 88.8);  // NaN passes through
  Value* fx = m.unary(llvm::Intrinsic::floor, m.fma(xc, m.c(1.44269504088896341), m.c(0.5)));
  Value* y = exp_reduced(m, fx, xc);
  Value* n = b.CreateFPToSI(fx, m.ity);
  Value* n1 = b.CreateAShr(n, 1);
  Value* n2 = b.CreateSub(n, n1);
  Value* res = b.CreateFMul(b.CreateFMul(y, m.pow2(n1)), m.pow2(n2));
  res = b.CreateSelect(b.CreateFCmpOLE(x, m.c(-104.0)), m.c(0.0), res);
  return b.CreateSelect(m.is_nan(x), x, res);
}

// Cephes logf: x = 2^e * f with f in [sqrt(1/2), sqrt(2)), log(f) by a
// polynomial in f - 1, plus e ln2 split into two constants.
Value* emit_log_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  // Denormals: scale into the normal range so the exponent bits are right.
  Value* den = b.CreateFCmpOLT(x, m.c(1.17549435e-38));
  Value* xs = b.CreateSelect(den, b.CreateFMul(x, m.c(8388608.0)), x);
  Value* bits = b.CreateBitCast(xs, m.ity);
  Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, 23), m.ci(0xff)), m.ci(126));
  e = b.CreateSub(e, b.CreateSelect(den, m.ci(23), m.ci(0)));
  Value* f = b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, m.ci(0x807fffff)), m.ci(0x3f000000)),
                             m.ty);  // in [0.5, 1)
  Value* small = b.CreateFCmpOLT(f, m.c(0.707106781186547524));
  Value* ef = b.CreateFSub(b.CreateSIToFP(e, m.ty), b.CreateSelect(small, m.c(1.0), m.c(0.0)));
  // f - 1, or 2f - 1 when f < sqrt(1/2): both exact.
  f = b.CreateFAdd(b.CreateFSub(f, m.c(1.0)), b.CreateSelect(small, f, m.c(0.0)));
  Value* z = b.CreateFMul(f, f);
  Value* y = m.poly(
      f, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
          -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  y = b.CreateFMul(b.CreateFMul(y, f), z);
  y = m.fma(ef, m.c(-2.12194440e-4), y);
  y = m.fma(z, m.c(-0.5), y);
  Value* res = m.fma(ef, m.c(0.693359375), b.CreateFAdd(f, y));
  res = b.CreateSelect(b.CreateFCmpOEQ(x, m.c(kInf)), m.c(kInf), res);
  res = b.CreateSelect(b.CreateFCmpOEQ(x, m.c(0.0)), m.c(-kInf), res);
  return b.CreateSelect(b.CreateFCmpULT(x, m.c(0.0)), m.c(kNaN), res);  // x < 0 or NaN
}

// Cephes tanhf: an odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1)
// (no cancellation there: tanh >= 0.55), with the sign of x.
Value* emit_tanh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  Value* ax = m.unary(llvm::Intrinsic::fabs, x);
  Value* e = emit_exp_f32(b, b.CreateFAdd(ax, ax));
  NoFastMath nfm(b);
  Value* big = b.CreateFSub(m.c(1.0), b.CreateFDiv(m.c(2.0), b.CreateFAdd(e, m.c(1.0))));
  big = b.CreateIntrinsic(llvm::Intrinsic::copysign, {m.ty}, {big, x});
  Value* z = b.CreateFMul(x, x);
  Value* p = m.poly(z, {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                        -3.33332819422E-1});
  Value* small = m.fma(b.CreateFMul(p, z), x, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, m.c(0.625)), small, big);
}

// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = exp(-|x|):
// exp never overflows, so tiny results for very negative x stay accurate.
// Its exponent is at most 0, and is clamped at -87 (e >= 1.6e-38, a normal
// float): below, sigmoid is under 1.2e-38 and returns e(-87). So 2^n is one
// factor and needs neither exp's overflow and underflow selects nor its
// two-factor scaling (EfficientNet-B0 spent a quarter of its time in its
// SiLUs' sigmoids).
//
// n = round(-|x| log2 e) comes from adding 1.5 * 2^23, whose float spacing is
// 1: the sum's bits are 0x4B400000 + n, and shifted left by 23 with the bias
// only n + 127 stays, the exponent field of 2^n. No round and no
// float-to-int conversion (nor its poison for NaN: the integer ops make some
// finite bits, and NaN reaches the quotient through y). exp(r) 2^n is one
// FMA, (exp(r) - 1) 2^n + 2^n. x's sign bit picks the numerator (-0 takes
// e = 1, as +0 takes 1). Measured on a SiLU over 1.2 M values, AVX2 code on a
// Zen 4, one thread: 0.59 ms before these and Estrin's polynomial, 0.51
// after; a reciprocal estimate in place of the division ran 0.67.
Value* emit_sigmoid_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  constexpr double kShifter = 12582912.0;  // 1.5 * 2^23
  Value* neg = m.max(b.CreateFNeg(m.unary(llvm::Intrinsic::fabs, x)), -87.0);
  Value* shifted = m.fma(neg, m.c(1.44269504088896341), m.c(kShifter));
  Value* fx = b.CreateFSub(shifted, m.c(kShifter));
  Value* scale = m.pow2(b.CreateBitCast(shifted, m.ity));
  Value* e = m.fma(exp_reduced_minus_one(m, fx, neg), scale, scale);  // (q + 1) 2^n
  Value* negative = b.CreateICmpSLT(b.CreateBitCast(x, m.ity), m.ci(0));
  Value* num = b.CreateSelect(negative, e, m.c(1.0));
  return b.CreateFDiv(num, b.CreateFAdd(e, m.c(1.0)));
}

// The rational approximation of erf used by Eigen and XLA for float32:
// x P(x^2) / Q(x^2) on [-4, 4] (erf is +-1 in float beyond).
Value* emit_erf_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Value* xc = m.min(m.max(x, -4.0), 4.0);
  Value* x2 = b.CreateFMul(xc, xc);
  Value* p = m.poly(x2, {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                         -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                         -1.60960333262415e-02});
  Value* q = m.poly(x2, {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                         -7.37332916720468e-03, -1.42647390514189e-02});
  Value* res = b.CreateFDiv(b.CreateFMul(xc, p), q);
  // The approximation overshoots 1 by an ulp near |x| = 4.
  Value* one = m.c(1.0);
  res = b.CreateSelect(b.CreateFCmpOGT(res, one), one, res);
  return b.CreateSelect(b.CreateFCmpOLT(res, m.c(-1.0)), m.c(-1.0), res);
}

}  // namespace kiln::codegen::detail

// ---- trigonometric and hyperbolic functions ---------------------------------------------

namespace kiln::codegen::detail {

namespace {

// pi/2 and pi as a float and the float of the remainder: (kHi - y) + kLo keeps
// the bits of pi/2 or pi that one float constant would drop (results near
// pi/2 and pi in acos, asin and atan).
constexpr double kPio2Hi = 1.57079637050628662109375;  // float(pi/2)
constexpr double kPio2Lo = -4.37113900018624283e-8;    // pi/2 - kPio2Hi
constexpr double kPiHi = 3.1415927410125732421875;     // float(pi)
constexpr double kPiLo = -8.74227800037248566e-8;      // pi - kPiHi

Value* copysign(Math& m, Value* mag, Value* sign) {
  return m.b.CreateIntrinsic(llvm::Intrinsic::copysign, {m.ty}, {mag, sign});
}
Value* fabs(Math& m, Value* x) { return m.unary(llvm::Intrinsic::fabs, x); }
Value* pick(Math& m, Value* cond, Value* t, Value* f) { return m.b.CreateSelect(cond, t, f); }

// x = n pi/2 + r with |r| <= pi/4 (Cody and Waite's reduction as in Eigen's
// psincos_float): n rounds x 2/pi to the nearest integer by adding 1.5 * 2^23,
// whose low bits then hold n (q, as an integer: n mod 4 is q & 3). pi/2 is
// split into three floats; llvm.fma (always fused, unlike fmuladd) subtracts
// each n * part with one rounding, the first exactly. The error grows with
// |n|: below kTrigReduceLimitF32 sin and cos stay within a few ulp.
struct Quadrant {
  Value* r;
  Value* q;
};
Quadrant reduce_pio2(Math& m, Value* x) {
  constexpr double kShifter = 12582912.0;  // 1.5 * 2^23
  auto fused = [&](Value* a, double c, Value* acc) {
    return m.b.CreateIntrinsic(llvm::Intrinsic::fma, {m.ty}, {a, m.c(c), acc});
  };
  Value* shifted = m.b.CreateFAdd(m.b.CreateFMul(x, m.c(0.636619772367581343)), m.c(kShifter));
  Value* n = m.b.CreateFSub(shifted, m.c(kShifter));
  Value* r = fused(n, -1.57079601287841796875, x);
  r = fused(n, -3.1391647326017846353352069854736328125e-07, r);
  r = fused(n, -5.390302529957764765544681040410068817436695098876953125e-15, r);
  return {r, m.b.CreateBitCast(shifted, m.ity)};
}

// sin(r) and cos(r) on [-pi/4, pi/4]: Eigen's minimax polynomials (sin's
// linear coefficient forced to 1, so that sin(r) = r exactly for tiny r).
Value* sin_poly(Math& m, Value* r, Value* r2) {
  Value* p = m.poly(r2, {-1.959234114083702898469196984621021329076029360294342041015625e-4,
                         8.3326873655616851693794799871284340042620897293090820312500e-3,
                         -1.666666203982298255503735617821803316473960876464843750000000e-1});
  return m.fma(m.b.CreateFMul(p, r2), r, r);
}
Value* cos_poly(Math& m, Value* r2) {
  return m.poly(r2, {2.4372266125283204019069671630859375e-05, -0.00138865201734006404876708984375,
                     0.041666619479656219482421875, -0.5, 1.0});
}

// sin(n pi/2 + r) for quadrant q (n mod 4 = q & 3): sin r, cos r, -sin r,
// -cos r. cos(x) is the quadrant after (q + 1). Bit 1 of q becomes the sign.
Value* sin_of_quadrant(Math& m, Value* r, Value* q) {
  Value* r2 = m.b.CreateFMul(r, r);
  Value* odd = m.b.CreateICmpNE(m.b.CreateAnd(q, m.ci(1)), m.ci(0));
  Value* v = pick(m, odd, cos_poly(m, r2), sin_poly(m, r, r2));
  Value* sign = m.b.CreateAnd(m.b.CreateShl(q, 30), m.ci(int64_t{1} << 31));
  return m.b.CreateBitCast(m.b.CreateXor(m.b.CreateBitCast(v, m.ity), sign), m.ty);
}

// asin(v) for |v| <= 0.5 (Cephes asinf's polynomial; odd in v).
Value* asin_small(Math& m, Value* v) {
  Value* z = m.b.CreateFMul(v, v);
  Value* p = m.poly(
      z, {4.2163199048E-2, 2.4181311049E-2, 4.5470025998E-2, 7.4953002686E-2, 1.6666752422E-1});
  return m.fma(m.b.CreateFMul(p, z), v, v);
}

// (hi + lo) - y for a constant split hi + lo (kPio2Hi/Lo, kPiHi/Lo).
Value* const_minus(Math& m, double hi, double lo, Value* y) {
  return m.b.CreateFAdd(m.b.CreateFSub(m.c(hi), y), m.c(lo));
}

Value* log_plus_ln2(llvm::IRBuilderBase& b, Math& m, Value* ax) {
  return b.CreateFAdd(emit_log_f32(b, ax), m.c(0.693147180559945309));
}

}  // namespace

Value* emit_sin_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Quadrant q = reduce_pio2(m, x);
  return sin_of_quadrant(m, q.r, q.q);
}

Value* emit_cos_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Quadrant q = reduce_pio2(m, x);
  return sin_of_quadrant(m, q.r, b.CreateAdd(q.q, m.ci(1)));
}

// tan(n pi/2 + r) = tan r for even n, -1 / tan r = -cos r / sin r for odd n:
// one division of the two polynomials either way, no cancellation near the
// poles (there sin r is tiny and accurate relative to itself).
Value* emit_tan_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Quadrant q = reduce_pio2(m, x);
  Value* r2 = b.CreateFMul(q.r, q.r);
  Value* s = sin_poly(m, q.r, r2);
  Value* c = cos_poly(m, r2);
  Value* odd = b.CreateICmpNE(b.CreateAnd(q.q, m.ci(1)), m.ci(0));
  return b.CreateFDiv(pick(m, odd, b.CreateFNeg(c), s), pick(m, odd, s, c));
}

// Cephes asinf: the polynomial for |x| <= 0.5, else pi/2 - 2 asin(sqrt((1 - |x|) / 2)).
// |x| > 1 takes the square root of a negative number: NaN.
Value* emit_asin_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Value* a = fabs(m, x);
  Value* big = b.CreateFCmpOGT(a, m.c(0.5));
  Value* s = m.unary(llvm::Intrinsic::sqrt, b.CreateFMul(m.c(0.5), b.CreateFSub(m.c(1.0), a)));
  Value* p = asin_small(m, pick(m, big, s, a));
  Value* far = const_minus(m, kPio2Hi, kPio2Lo, b.CreateFAdd(p, p));
  return copysign(m, pick(m, big, far, p), x);
}

// Cephes acosf: 2 asin(sqrt((1 - x) / 2)) above 0.5, pi - 2 asin(sqrt((1 + x) / 2))
// below -0.5, pi/2 - asin(x) between. |x| > 1 gives NaN by the square root.
Value* emit_acos_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Value* hi = b.CreateFCmpOGT(x, m.c(0.5));
  Value* lo = b.CreateFCmpOLT(x, m.c(-0.5));
  Value* one_minus = pick(m, lo, b.CreateFAdd(m.c(1.0), x), b.CreateFSub(m.c(1.0), x));
  Value* s = m.unary(llvm::Intrinsic::sqrt, b.CreateFMul(m.c(0.5), one_minus));
  Value* outer = b.CreateOr(hi, lo);
  Value* p = asin_small(m, pick(m, outer, s, x));
  Value* twice = b.CreateFAdd(p, p);
  Value* res = const_minus(m, kPio2Hi, kPio2Lo, p);
  res = pick(m, hi, twice, res);
  return pick(m, lo, const_minus(m, kPiHi, kPiLo, twice), res);
}

// Cephes atanf: |x| above tan(3 pi/8) maps to pi/2 + atan(-1/|x|), above
// tan(pi/8) to pi/4 + atan((|x| - 1) / (|x| + 1)); an odd polynomial on the rest.
Value* emit_atan_f32(llvm::IRBuilderBase& b, Value* x) {
  NoFastMath nfm(b);
  Math m(b, x);
  Value* a = fabs(m, x);
  Value* big = b.CreateFCmpOGT(a, m.c(2.414213562373095));
  Value* mid = b.CreateFCmpOGT(a, m.c(0.4142135623730950));
  Value* t = pick(m, mid, b.CreateFDiv(b.CreateFSub(a, m.c(1.0)), b.CreateFAdd(a, m.c(1.0))), a);
  t = pick(m, big, b.CreateFDiv(m.c(-1.0), a), t);
  Value* base = pick(m, big, m.c(kPio2Hi), pick(m, mid, m.c(0.785398185253143310546875), m.c(0.0)));
  Value* z = b.CreateFMul(t, t);
  Value* p = m.poly(z, {8.05374449538e-2, -1.38776856032E-1, 1.99777106478E-1, -3.33329491539E-1});
  Value* res = b.CreateFAdd(base, m.fma(b.CreateFMul(p, z), t, t));
  return copysign(m, res, x);
}

// sinh and cosh beyond |x| = 1: h = e^(|x|/2), then (h/2) h -+ (1/(2h)) / h,
// which reaches sinh's largest finite values (|x| up to 89.4, where e^|x|
// itself overflows). Cephes sinhf's odd polynomial below 1 (no cancellation).
Value* half_exp_pair(llvm::IRBuilderBase& b, Math& m, Value* ax, bool plus) {
  Value* h = emit_exp_f32(b, b.CreateFMul(ax, m.c(0.5)));
  Value* big = b.CreateFMul(b.CreateFMul(h, m.c(0.5)), h);
  Value* small = b.CreateFDiv(b.CreateFDiv(m.c(0.5), h), h);
  return plus ? b.CreateFAdd(big, small) : b.CreateFSub(big, small);
}

Value* emit_sinh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  Value* ax = fabs(m, x);
  Value* big = half_exp_pair(b, m, ax, false);
  NoFastMath nfm(b);
  Value* z = b.CreateFMul(x, x);
  Value* p = m.poly(z, {2.03721912945E-4, 8.33028376239E-3, 1.66667160211E-1});
  Value* small = m.fma(b.CreateFMul(p, z), x, x);
  return pick(m, b.CreateFCmpOLT(ax, m.c(1.0)), small, copysign(m, big, x));
}

Value* emit_cosh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  return half_exp_pair(b, m, fabs(m, x), true);
}

// Cephes asinhf: log(|x|) + ln 2 above 1500, log(|x| + sqrt(x^2 + 1)) from
// 0.5, an odd polynomial below (where the log would cancel).
Value* emit_asinh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  Value* a = fabs(m, x);
  Value* huge = b.CreateFCmpOGT(a, m.c(1500.0));
  Value* big = log_plus_ln2(b, m, a);
  NoFastMath nfm(b);
  Value* z = b.CreateFMul(x, x);
  Value* root = m.unary(llvm::Intrinsic::sqrt, b.CreateFAdd(pick(m, huge, m.c(0.0), z), m.c(1.0)));
  Value* mid = emit_log_f32(b, b.CreateFAdd(a, root));
  Value* p = m.poly(z, {2.0122003309E-2, -4.2699340972E-2, 7.4847586088E-2, -1.6666288134E-1});
  Value* small = m.fma(b.CreateFMul(p, z), a, a);
  Value* res = pick(m, b.CreateFCmpOLT(a, m.c(0.5)), small, pick(m, huge, big, mid));
  return copysign(m, res, x);
}

// Cephes acoshf: log(x) + ln 2 above 1500, log(x + sqrt((x - 1)(x + 1))) from
// 1.5, sqrt(x - 1) P(x - 1) below; NaN below 1 (and for NaN).
Value* emit_acosh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  Value* huge = b.CreateFCmpOGT(x, m.c(1500.0));
  Value* big = log_plus_ln2(b, m, x);
  NoFastMath nfm(b);
  Value* z = b.CreateFSub(x, m.c(1.0));    // exact for x in [1, 2]
  Value* zc = pick(m, huge, m.c(0.0), z);  // keeps z (x + 1) finite
  Value* root = m.unary(llvm::Intrinsic::sqrt, b.CreateFMul(zc, b.CreateFAdd(x, m.c(1.0))));
  Value* mid = emit_log_f32(b, b.CreateFAdd(x, root));
  Value* p = m.poly(
      z, {1.7596881071E-3, -7.5272886713E-3, 2.6454905019E-2, -1.1784741703E-1, 1.4142135263E0});
  Value* small = b.CreateFMul(p, m.unary(llvm::Intrinsic::sqrt, z));
  Value* res = pick(m, b.CreateFCmpOLT(z, m.c(0.5)), small, pick(m, huge, big, mid));
  return pick(m, b.CreateFCmpULT(x, m.c(1.0)), m.c(kNaN), res);
}

// Cephes atanhf: an odd polynomial below |x| = 0.5, else log((1 + x) / (1 - x)) / 2,
// which gives +-inf at +-1 and NaN beyond by itself.
Value* emit_atanh_f32(llvm::IRBuilderBase& b, Value* x) {
  Math m(b, x);
  Value* ratio = b.CreateFDiv(b.CreateFAdd(m.c(1.0), x), b.CreateFSub(m.c(1.0), x));
  Value* big = b.CreateFMul(emit_log_f32(b, ratio), m.c(0.5));
  NoFastMath nfm(b);
  Value* z = b.CreateFMul(x, x);
  Value* p = m.poly(z, {1.81740078349E-1, 8.24370301058E-2, 1.46691431730E-1, 1.99782164500E-1,
                        3.33337300303E-1});
  Value* small = m.fma(b.CreateFMul(p, z), x, x);
  return pick(m, b.CreateFCmpOLT(fabs(m, x), m.c(0.5)), small, big);
}

}  // namespace kiln::codegen::detail
