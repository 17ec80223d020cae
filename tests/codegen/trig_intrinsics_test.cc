// The trigonometric and hyperbolic intrinsics (and their inverses) vs double
// std:: functions: float32 scalar and 16-lane kernels over wide random ranges,
// the points where a reduction or a branch switches, and edge values; float64
// per-lane libm calls; the integer shifts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <type_traits>

#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Out[i] = op(In[i]) computed in `t` (float32 or float64) with `lanes` lanes.
std::vector<float> run_unary(Intrinsic op, const std::vector<float>& in, int lanes,
                             DataType t = DataType::f32()) {
  const int64_t n = static_cast<int64_t>(in.size());
  Buffer A = make_buffer("A", DataType::f32(), {n}), C = make_buffer("C", DataType::f32(), {n});
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : ramp(i * lanes, 1, lanes);
  Expr value = cast(DataType::f32(lanes), call(op, {cast(t.with_lanes(lanes), load(A, idx))}));
  auto f = jit({std::string("k_") + intrinsic_name(op),
                {A, C},
                serial(i, 0, n / lanes, make_store(C, value, idx))});
  std::vector<float> out(n);
  EXPECT_EQ(f({const_cast<float*>(in.data()), out.data()}), 0);
  return out;
}

// One float32 ulp relative to |want|: error / (|want| 2^-23).
double ulps(float got, double want) {
  int e = 0;
  std::frexp(want, &e);
  double ulp = std::ldexp(1.0, std::max(e, -125) - 24);
  return std::fabs(got - want) / ulp;
}

// Checks op on xs (scalar and 16 lanes) against ref rounded to float: NaN for
// NaN, infinities exactly, everything else within max_ulps float32 ulps.
void check(Intrinsic op, std::vector<float> xs, const std::function<double(double)>& ref,
           double max_ulps) {
  while (xs.size() % 16) xs.push_back(0.25f);
  double worst = 0;
  float worst_x = 0;
  for (int lanes : {1, 16}) {
    std::vector<float> out = run_unary(op, xs, lanes);
    int failures = 0;
    for (size_t k = 0; k < xs.size() && failures < 10; ++k) {
      double want = static_cast<float>(ref(xs[k]));
      bool ok = std::isnan(want)   ? std::isnan(out[k])
                : std::isinf(want) ? out[k] == want
                                   : ulps(out[k], want) <= max_ulps;
      if (!ok) {
        ++failures;
        ADD_FAILURE() << intrinsic_name(op) << "(" << xs[k] << ") = " << out[k] << ", want " << want
                      << " (" << ulps(out[k], want) << " ulp), lanes " << lanes;
      }
      if (std::isfinite(want) && ulps(out[k], want) > worst) {
        worst = ulps(out[k], want);
        worst_x = xs[k];
      }
    }
  }
  std::printf("  %s: max error %.2f ulp (at %g) over %zu values\n", intrinsic_name(op), worst,
              worst_x, xs.size());
}

std::vector<float> uniform(double lo, double hi, size_t n = 20000, uint32_t seed = 11) {
  return random_vector<float>(n, lo, hi, seed);
}
// |x| log-uniform in [lo, hi], both signs.
std::vector<float> log_uniform(double lo, double hi, size_t n = 20000, uint32_t seed = 13) {
  std::vector<float> v = random_vector<float>(n, std::log(lo), std::log(hi), seed);
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>((k % 2 ? -1 : 1) * std::exp(double(v[k])));
  return v;
}
std::vector<float> join(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
// The floats nearest to k * step for random k in [-kmax, kmax]: where sin, cos
// or tan has a zero or a pole, the reduction's error shows most.
std::vector<float> near_multiples(double step, double kmax, size_t n = 4000) {
  std::vector<float> k = random_vector<float>(n, -kmax, kmax, 5);
  std::vector<float> v;
  for (float x : k) v.push_back(static_cast<float>(std::round(double(x)) * step));
  return v;
}
const std::vector<float> kSpecial = {
    0.0f,  -0.0f, kInf,   -kInf,  kNaN,    1.0f,  -1.0f,  1e-8f,  -1e-8f,  1e-30f,  -1e-30f, 0.5f,
    -0.5f, 20.0f, -20.0f, 100.0f, -100.0f, 1e30f, -1e30f, 1e-45f, -1e-45f, 3.4e38f, -3.4e38f};

// sin, cos and tan: the vector reduction below 71476.0625, libm's float
// functions for the lanes at or above it (1e5 ... 3.4e38 here, mixed into
// vectors with small lanes, so that both paths meet in one vector).
std::vector<float> trig_inputs() {
  auto xs = join(uniform(-10, 10), uniform(-1000, 1000, 8000, 3));
  xs = join(xs, uniform(-71476, 71476, 8000, 4));
  xs = join(xs, join(near_multiples(M_PI / 2, 45000), near_multiples(M_PI, 10)));
  xs = join(xs, log_uniform(1e-30, 1e-3, 2000));
  xs = join(xs, log_uniform(7e4, 3e38, 3000, 17));
  return join(xs, join(kSpecial, {71476.0625f, -71476.0625f, 71476.055f, -71476.055f, 71477.0f,
                                  117435.992f, 1.5707964f, 3.1415927f, 4.712389f}));
}

TEST(TrigIntrinsics, Sin) {
  check(
      Intrinsic::Sin, trig_inputs(), [](double x) { return std::sin(x); }, 2);
}

TEST(TrigIntrinsics, Cos) {
  check(
      Intrinsic::Cos, trig_inputs(), [](double x) { return std::cos(x); }, 2);
}

TEST(TrigIntrinsics, Tan) {
  auto xs = join(trig_inputs(), near_multiples(M_PI / 2, 1001));
  check(
      Intrinsic::Tan, xs, [](double x) { return std::tan(x); }, 4);
}

// Only large lanes: every vector takes the libm branch.
TEST(TrigIntrinsics, HugeArgumentsTakeLibm) {
  auto xs = log_uniform(71476.0625, 3e38, 4096, 21);
  check(
      Intrinsic::Sin, xs, [](double x) { return std::sin(x); }, 1);
  check(
      Intrinsic::Cos, xs, [](double x) { return std::cos(x); }, 1);
  check(
      Intrinsic::Tan, xs, [](double x) { return std::tan(x); }, 1);
}

TEST(TrigIntrinsics, AsinAcos) {
  auto xs = join(uniform(-1, 1), log_uniform(1e-30, 1, 4000));
  xs = join(xs, uniform(0.99, 1.0, 2000, 7));
  xs = join(xs, uniform(-1.0, -0.99, 2000, 8));
  xs = join(xs, join(kSpecial, {0.49999997f, 0.50000006f, -0.49999997f, -0.50000006f, 0.99999994f,
                                -0.99999994f, 1.0000001f, -1.0000001f, 1.5f, -1.5f}));
  check(
      Intrinsic::Asin, xs, [](double x) { return std::asin(x); }, 3);
  check(
      Intrinsic::Acos, xs, [](double x) { return std::acos(x); }, 3);
}

TEST(TrigIntrinsics, Atan) {
  auto xs = join(uniform(-10, 10), log_uniform(1e-30, 1e30, 8000));
  xs = join(xs, join(kSpecial, {0.41421354f, 0.41421357f, 2.4142134f, 2.4142137f}));
  check(
      Intrinsic::Atan, xs, [](double x) { return std::atan(x); }, 3);
}

TEST(TrigIntrinsics, SinhCosh) {
  auto xs = join(uniform(-10, 10), uniform(-1, 1, 8000, 3));
  xs = join(xs, uniform(-89.4, 89.4, 8000, 4));
  xs = join(xs, log_uniform(1e-30, 1e-3, 2000));
  xs = join(xs, join(kSpecial, {0.99999994f, 1.0000001f, 89.41f, -89.41f, 89.42f, 89.5f, 200.0f}));
  check(
      Intrinsic::Sinh, xs, [](double x) { return std::sinh(x); }, 4);
  check(
      Intrinsic::Cosh, xs, [](double x) { return std::cosh(x); }, 4);
}

TEST(TrigIntrinsics, Asinh) {
  auto xs = join(uniform(-2, 2), log_uniform(1e-30, 3e38, 8000));
  xs = join(xs, join(kSpecial, {0.49999997f, 0.50000006f, 1500.0f, 1500.0001f, -1500.0001f}));
  check(
      Intrinsic::Asinh, xs, [](double x) { return std::asinh(x); }, 4);
}

TEST(TrigIntrinsics, Acosh) {
  std::vector<float> xs = log_uniform(1e-7, 3e38, 8000);
  for (float& x : xs) x = 1.0f + std::fabs(x);
  xs = join(xs, uniform(1, 3, 4000, 9));
  xs = join(xs, join(kSpecial, {1.0f, 1.0000001f, 1.4999999f, 1.5f, 1.5000001f, 1500.0f, 1500.0001f,
                                0.99999994f, -2.0f}));
  check(
      Intrinsic::Acosh, xs, [](double x) { return std::acosh(x); }, 4);
}

TEST(TrigIntrinsics, Atanh) {
  auto xs = join(uniform(-1, 1), log_uniform(1e-30, 1, 4000));
  xs = join(xs, uniform(0.999, 1.0, 2000, 7));
  xs = join(xs, join(kSpecial, {0.49999997f, 0.50000006f, 0.99999994f, -0.99999994f, 1.0000001f,
                                -1.0000001f, 2.0f, -2.0f}));
  check(
      Intrinsic::Atanh, xs, [](double x) { return std::atanh(x); }, 4);
}

// float64: one libm call per lane, the same value as std:: on the same double.
TEST(TrigIntrinsics, Float64CallsLibmPerLane) {
  auto xs = join(uniform(-0.9, 0.9, 512), {0.0f, kNaN});
  const std::pair<Intrinsic, double (*)(double)> fns[] = {
      {Intrinsic::Sin, std::sin},     {Intrinsic::Cos, std::cos},    {Intrinsic::Tan, std::tan},
      {Intrinsic::Asin, std::asin},   {Intrinsic::Acos, std::acos},  {Intrinsic::Atan, std::atan},
      {Intrinsic::Sinh, std::sinh},   {Intrinsic::Cosh, std::cosh},  {Intrinsic::Asinh, std::asinh},
      {Intrinsic::Atanh, std::atanh}, {Intrinsic::Acosh, std::acosh}};
  for (auto [op, ref] : fns) {
    while (xs.size() % 16) xs.push_back(0.5f);
    for (int lanes : {1, 16}) {
      auto out = run_unary(op, xs, lanes, DataType::f64());
      for (size_t k = 0; k < xs.size(); ++k) {
        float want = static_cast<float>(ref(double(xs[k])));
        if (std::isnan(want))
          EXPECT_TRUE(std::isnan(out[k])) << intrinsic_name(op) << "(" << xs[k] << ")";
        else
          ASSERT_EQ(out[k], want) << intrinsic_name(op) << "(" << xs[k] << ")";
      }
    }
  }
}

// 16-lane float32 code stays vector code: the inverse and hyperbolic functions
// call nothing, and sin / cos / tan call libm only in their rarely taken
// huge-argument block.
TEST(TrigIntrinsics, VectorCodeHasNoLibmCallsOnItsMainPath) {
  Buffer A = make_buffer("A", DataType::f32(), {64}), C = make_buffer("C", DataType::f32(), {64});
  Var i("i");
  Expr idx = ramp(i * 16, 1, 16), x = load(A, idx);
  Expr v = asin(x) + acos(x) + atan(x) + sinh(x) + cosh(x) + asinh(x) + acosh(x) + atanh(x);
  std::string ir =
      emit_llvm_ir({{"vmath", {A, C}, serial(i, 0, 4, make_store(C, v, idx))}}, host());
  for (const char* fn : {"@asinf", "@acosf", "@atanf", "@sinhf", "@coshf", "@asinhf", "@acoshf",
                         "@atanhf", "@expf", "@logf", "call float"})
    EXPECT_EQ(ir.find(fn), std::string::npos) << fn;
  std::string trig = emit_llvm_ir(
      {{"vtrig", {A, C}, serial(i, 0, 4, make_store(C, sin(x) + cos(x) + tan(x), idx))}}, host());
  EXPECT_NE(trig.find("<16 x float>"), std::string::npos);
  EXPECT_NE(trig.find("trig.huge"), std::string::npos);
  EXPECT_EQ(trig.find("@llvm.sin."), std::string::npos);
}

// ---- integer shifts ----------------------------------------------------------------

// out[i] = shl/shr(x[i], y[i]) in dtype T, with `lanes` lanes.
template <typename T>
std::vector<T> run_shift(bool left, const std::vector<T>& x, const std::vector<T>& y, int lanes) {
  const int64_t n = static_cast<int64_t>(x.size());
  DataType t = DataType(std::is_signed_v<T> ? TypeCode::Int : TypeCode::UInt, sizeof(T) * 8);
  Buffer X = make_buffer("X", t, {n}), Y = make_buffer("Y", t, {n}), Z = make_buffer("Z", t, {n});
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : ramp(i * lanes, 1, lanes);
  Expr v = left ? shift_left(load(X, idx), load(Y, idx)) : shift_right(load(X, idx), load(Y, idx));
  auto f = jit({"k_shift", {X, Y, Z}, serial(i, 0, n / lanes, make_store(Z, v, idx))});
  std::vector<T> out(n);
  EXPECT_EQ(f({const_cast<T*>(x.data()), const_cast<T*>(y.data()), out.data()}), 0);
  return out;
}

// The definition in ir::Intrinsic::ShiftLeft: shifting one bit at a time.
template <typename T>
T shift_ref(bool left, T x, T y) {
  using U = std::make_unsigned_t<T>;
  constexpr U kBits = sizeof(T) * 8;
  if (static_cast<U>(y) >= kBits) return left || x >= 0 ? T(0) : T(-1);
  if (left) return static_cast<T>(static_cast<U>(x) << static_cast<U>(y));
  return static_cast<T>(x >> y);  // arithmetic for signed T (C++20)
}

template <typename T>
void check_shifts() {
  constexpr int kBits = sizeof(T) * 8;
  std::mt19937_64 rng(3);
  std::vector<T> x(256), y(256);
  for (size_t k = 0; k < x.size(); ++k) {
    x[k] = static_cast<T>(rng());
    y[k] = static_cast<T>(rng() % (kBits + 4));
  }
  x[0] = std::numeric_limits<T>::max(), y[0] = kBits - 1;
  x[1] = std::numeric_limits<T>::min(), y[1] = kBits;
  x[2] = 1, y[2] = static_cast<T>(-1);  // negative for signed T: out of range
  for (bool left : {true, false})
    for (int lanes : {1, 16}) {
      std::vector<T> out = run_shift(left, x, y, lanes);
      for (size_t k = 0; k < x.size(); ++k)
        ASSERT_EQ(out[k], shift_ref(left, x[k], y[k]))
            << (left ? "shl(" : "shr(") << +x[k] << ", " << +y[k] << "), " << kBits << " bits";
    }
}

TEST(ShiftIntrinsics, UnsignedAndSigned) {
  check_shifts<uint8_t>();
  check_shifts<uint16_t>();
  check_shifts<uint32_t>();
  check_shifts<uint64_t>();
  check_shifts<int32_t>();
  check_shifts<int8_t>();
}

TEST(ShiftIntrinsics, RejectFloatOperands) {
  EXPECT_THROW(shift_left(Expr(1.0f), Expr(2.0f)), std::invalid_argument);
}

}  // namespace
}  // namespace kiln::codegen::test
