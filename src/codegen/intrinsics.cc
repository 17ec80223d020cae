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
