// kiln's vector math vs std:: on float32: scalar and 16-lane kernels over
// wide random ranges and edge values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Out[i] = op(In[i]) (or op(In[i], In2[i]) for pow), with `lanes` lanes.
std::vector<float> run_unary(Intrinsic op, const std::vector<float>& in,
                             const std::vector<float>& in2, int lanes,
                             DataType t = DataType::f32()) {
  const int64_t n = static_cast<int64_t>(in.size());
  Buffer A = make_buffer("A", DataType::f32(), {n}), B = make_buffer("B", DataType::f32(), {n});
  Buffer C = make_buffer("C", DataType::f32(), {n});
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : ramp(i * lanes, 1, lanes);
  std::vector<Expr> args{cast(t.with_lanes(lanes), load(A, idx))};
  if (op == Intrinsic::Pow) args.push_back(cast(t.with_lanes(lanes), load(B, idx)));
  Expr value = cast(DataType::f32(lanes), call(op, args));
  auto f = jit({std::string("k_") + intrinsic_name(op),
                {A, B, C},
                serial(i, 0, n / lanes, make_store(C, value, idx))});
  std::vector<float> out(n);
  std::vector<float> b2 = in2.empty() ? std::vector<float>(n, 1.0f) : in2;
  EXPECT_EQ(f({const_cast<float*>(in.data()), b2.data(), out.data()}), 0);
  return out;
}

// Relative error <= tol; NaN matches NaN, infinities match exactly; results
// in the denormal range are compared absolutely.
void expect_close(Intrinsic op, float x, float got, double want, double tol, int lanes) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << intrinsic_name(op) << "(" << x << ") = " << got;
    return;
  }
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << intrinsic_name(op) << "(" << x << ")";
    return;
  }
  double err = std::fabs(got - want);
  double bound = std::max(tol * std::fabs(want), 1e-37);
  EXPECT_LE(err, bound) << intrinsic_name(op) << "(" << x << ") = " << got << ", want " << want
                        << ", rel err " << err / std::fabs(want) << ", lanes " << lanes;
}

void check(Intrinsic op, std::vector<float> xs, const std::function<double(double)>& ref,
           double tol = 2e-6) {
  while (xs.size() % 16) xs.push_back(0.5f);
  double max_rel = 0;
  for (int lanes : {1, 16}) {
    std::vector<float> out = run_unary(op, xs, {}, lanes);
    int failures = 0;
    for (size_t k = 0; k < xs.size() && failures < 10; ++k) {
      // The reference rounded to float: overflow is inf, as in float math.
      double want = static_cast<float>(ref(xs[k]));
      expect_close(op, xs[k], out[k], want, tol, lanes);
      if (::testing::Test::HasFailure()) ++failures;
      if (std::isfinite(want) && std::fabs(want) > 1e-37)
        max_rel = std::max(max_rel, std::fabs(out[k] - want) / std::fabs(want));
    }
    if (failures) return;
  }
  std::printf("  %s: max relative error %.3g over %zu values\n", intrinsic_name(op), max_rel,
              xs.size());
}

std::vector<float> uniform(double lo, double hi, size_t n = 20000, uint32_t seed = 11) {
  return random_vector<float>(n, lo, hi, seed);
}
std::vector<float> log_uniform(double lo, double hi, size_t n = 20000) {
  std::vector<float> v = random_vector<float>(n, std::log(lo), std::log(hi), 13);
  for (float& x : v) x = std::exp(double(x));
  return v;
}
std::vector<float> join(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
const std::vector<float> kSpecial = {0.0f,   -0.0f,  kInf,    -kInf,  kNaN,    1.0f,
                                     -1.0f,  1e-8f,  -1e-8f,  1e-30f, -1e-30f, 20.0f,
                                     -20.0f, 100.0f, -100.0f, 1e30f,  -1e30f};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(Intrinsics, Exp) {
  auto xs = join(uniform(-80, 80), uniform(-1, 1, 4000));
  xs = join(xs, kSpecial);
  xs = join(xs, {88.7f, 88.72f, 88.73f, -87.3f, -87.4f, -103.0f, -104.0f, -110.0f});
  check(Intrinsic::Exp, xs, [](double x) { return std::exp(x); });
}

TEST(Intrinsics, Log) {
  auto xs = join(log_uniform(1e-30, 1e30), uniform(0.5, 2.0, 4000));
  xs = join(xs, kSpecial);
  xs =
      join(xs, {std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                std::numeric_limits<float>::denorm_min(), 1e-40f, 3e-39f, 0.99999994f, 1.0000001f});
  check(Intrinsic::Log, xs, [](double x) { return std::log(x); });
}

TEST(Intrinsics, Tanh) {
  auto xs = join(join(uniform(-10, 10), uniform(-1, 1, 4000)), uniform(-1e-3, 1e-3, 2000));
  xs = join(xs, kSpecial);
  xs = join(xs, {0.625f, -0.625f, 0.6249f, 0.6251f, 9.0f, -9.0f});
  check(Intrinsic::Tanh, xs, [](double x) { return std::tanh(x); });
}

TEST(Intrinsics, Erf) {
  auto xs = join(join(uniform(-10, 10), uniform(-2, 2, 4000)), uniform(-1e-3, 1e-3, 2000));
  xs = join(xs, kSpecial);
  xs = join(xs, {3.9f, 4.0f, 4.1f, -4.0f});
  check(Intrinsic::Erf, xs, [](double x) { return std::erf(x); });
}

// Down to -200: below -87 the sigmoid's exp is clamped (results under
// 1.2e-38, compared absolutely).
TEST(Intrinsics, Sigmoid) {
  auto xs = join(join(uniform(-10, 10), uniform(-1, 1, 4000)), uniform(-80, 80, 4000));
  xs = join(xs, join(uniform(-200, -80, 2000), {-87.0f, -87.5f, -88.7f, -103.0f, 87.0f, 89.0f}));
  xs = join(xs, kSpecial);
  check(Intrinsic::Sigmoid, xs, sigmoid_ref);
}

TEST(Intrinsics, HardwareBackedOnes) {
  auto xs = join(uniform(-100, 100), kSpecial);
  xs = join(xs, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f});
  check(
      Intrinsic::Fabs, xs, [](double x) { return std::fabs(x); }, 0);
  check(
      Intrinsic::Floor, xs, [](double x) { return std::floor(x); }, 0);
  check(
      Intrinsic::Ceil, xs, [](double x) { return std::ceil(x); }, 0);
  check(
      Intrinsic::Round, xs, [](double x) { return std::round(x); }, 0);
  auto pos = join(log_uniform(1e-30, 1e30), {0.0f, kInf, kNaN, -1.0f});
  check(
      Intrinsic::Sqrt, pos, [](double x) { return double(std::sqrt(float(x))); }, 0);
  check(
      Intrinsic::Rsqrt, pos, [](double x) { return 1.0 / std::sqrt(x); }, 2e-7);
}

TEST(Intrinsics, Pow) {
  auto x = uniform(0.01, 10, 4096, 3), y = uniform(-8, 8, 4096, 4);
  for (int lanes : {1, 16}) {
    auto out = run_unary(Intrinsic::Pow, x, y, lanes);
    for (size_t k = 0; k < x.size(); ++k)
      ASSERT_NEAR(out[k], std::pow(x[k], y[k]), 2e-6 * std::fabs(std::pow(x[k], y[k])));
  }
}

// float16 / bfloat16 / float64 arguments: computed in float32 (or libm for
// float64); results rounded to the argument type.
TEST(Intrinsics, OtherFloatTypes) {
  auto xs = uniform(-5, 5, 512);
  for (int lanes : {1, 16}) {
    auto d = run_unary(Intrinsic::Tanh, xs, {}, lanes, DataType::f64());
    auto e = run_unary(Intrinsic::Exp, xs, {}, lanes, DataType::f64());
    auto s = run_unary(Intrinsic::Sigmoid, xs, {}, lanes, DataType::f64());
    auto h = run_unary(Intrinsic::Exp, xs, {}, lanes, DataType::f16());
    auto bf = run_unary(Intrinsic::Erf, xs, {}, lanes, DataType::bf16());
    for (size_t k = 0; k < xs.size(); ++k) {
      ASSERT_NEAR(d[k], std::tanh(double(xs[k])), 1e-7);
      ASSERT_NEAR(e[k], std::exp(double(xs[k])), 1e-6 * std::exp(double(xs[k])));
      ASSERT_NEAR(s[k], sigmoid_ref(xs[k]), 1e-7);
#if KILN_TEST_HAS_FLOAT16
      double eh = std::exp(double(float(_Float16(xs[k]))));
      ASSERT_NEAR(h[k], eh, 1e-3 * eh) << xs[k];
#endif
      ASSERT_NEAR(bf[k], std::erf(xs[k]), 1e-2) << xs[k];
    }
  }
}

}  // namespace
}  // namespace kiln::codegen::test

namespace kiln::codegen::test {
namespace {

// 16-lane transcendental math stays vector code: no libm calls per lane.
TEST(Intrinsics, VectorMathHasNoLibmCalls) {
  Buffer A = make_buffer("A", DataType::f32(), {64}), C = make_buffer("C", DataType::f32(), {64});
  Var i("i");
  Expr idx = ramp(i * 16, 1, 16), x = load(A, idx);
  Expr v = exp(x) + log(x) + tanh(x) + erf(x) + sigmoid(x);
  std::string ir =
      emit_llvm_ir({{"vmath", {A, C}, serial(i, 0, 4, make_store(C, v, idx))}}, host());
  for (const char* fn : {"@expf", "@logf", "@tanhf", "@erff", "@llvm.exp.", "@llvm.log."})
    EXPECT_EQ(ir.find(fn), std::string::npos) << fn;
  EXPECT_NE(ir.find("<16 x float>"), std::string::npos);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The sigmoid takes 2^n from the bits of a 1.5 * 2^23 shifter: no floor and
// no float-to-int conversion, one division, and no NaN select (its accuracy
// and NaN, inf and -0 are Intrinsics.Sigmoid's).
TEST(Intrinsics, SigmoidHasNoRoundingOrConversion) {
  Buffer A = make_buffer("A", DataType::f32(), {64}), C = make_buffer("C", DataType::f32(), {64});
  Var i("i");
  Expr idx = ramp(i * 8, 1, 8);
  std::string ir = emit_llvm_ir(
      {{"sig", {A, C}, serial(i, 0, 1, make_store(C, sigmoid(load(A, idx)), idx))}}, host());
  for (const char* op : {"fptosi", "llvm.floor", "fcmp uno"})
    EXPECT_EQ(ir.find(op), std::string::npos) << op;
  EXPECT_EQ(count_of(ir, " fdiv "), 1u) << ir;
}

}  // namespace
}  // namespace kiln::codegen::test
