// Every cast, scalar and 16 lanes, against C++ conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "codegen/helpers.h"

namespace kiln::codegen::test {
namespace {

// Out[i] = cast(to, In[i]) for both lane counts; returns {scalar, vector} outputs.
template <typename From, typename To>
std::vector<std::vector<To>> run_cast(DataType from, DataType to, const std::vector<From>& in) {
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<std::vector<To>> outs;
  for (int lanes : {1, 16}) {
    Buffer A = make_buffer("A", from, {n}), C = make_buffer("C", to, {n});
    Var i("i");
    Expr idx = lanes == 1 ? Expr(i) : ramp(i * 16, 1, 16);
    // make_expr, not cast(): cast() folds literals, and we want the instruction.
    Expr v = make_expr<CastNode>(to.with_lanes(lanes), load(A, idx));
    auto f = jit({"cast", {A, C}, serial(i, 0, n / lanes, make_store(C, v, idx))});
    std::vector<To> out(n);
    EXPECT_EQ(f({const_cast<From*>(in.data()), out.data()}), 0);
    outs.push_back(out);
  }
  return outs;
}

template <typename From, typename To, typename Ref>
void check_cast(DataType from, DataType to, const std::vector<From>& in, Ref ref) {
  auto outs = run_cast<From, To>(from, to, in);
  for (const auto& out : outs)
    for (size_t k = 0; k < in.size(); ++k) {
      To want = ref(in[k]);
      ASSERT_EQ(std::memcmp(&out[k], &want, sizeof(To)), 0)
          << from.str() << " -> " << to.str() << " of " << double(in[k]) << ": got "
          << double(out[k]) << " want " << double(want);
    }
}

std::vector<float> some_floats() {
  auto v = random_vector<float>(96, -300, 300);
  for (float x : {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, 127.0f, -128.0f, 1e-3f, 3.0e38f, -3.0e38f})
    v.push_back(x);
  while (v.size() % 16) v.push_back(1.0f);
  return v;
}

// float32 -> bfloat16 bits, round to nearest even.
uint16_t to_bf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t b = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
float from_bf16(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

TEST(Cast, IntToInt) {
  auto i32 = random_vector<int32_t>(128, -100000, 100000);
  check_cast<int32_t, int64_t>(DataType::i32(), DataType::i64(), i32,
                               [](int32_t x) { return int64_t(x); });
  check_cast<int32_t, int8_t>(DataType::i32(), DataType::i8(), i32,
                              [](int32_t x) { return int8_t(x); });
  auto i8 = random_vector<int8_t>(64, -128, 127);
  check_cast<int8_t, int32_t>(DataType::i8(), DataType::i32(), i8,
                              [](int8_t x) { return int32_t(x); });
  auto u8 = random_vector<uint8_t>(64, 0, 255);
  check_cast<uint8_t, int32_t>(DataType::u8(), DataType::i32(), u8,
                               [](uint8_t x) { return int32_t(x); });
  check_cast<int8_t, uint8_t>(DataType::i8(), DataType::u8(), i8,
                              [](int8_t x) { return uint8_t(x); });
  auto i64 = random_vector<int64_t>(64, -5000000000LL, 5000000000LL);
  check_cast<int64_t, int32_t>(DataType::i64(), DataType::i32(), i64,
                               [](int64_t x) { return int32_t(x); });
}

TEST(Cast, IntFloat) {
  auto i32 = random_vector<int32_t>(128, -100000, 100000);
  check_cast<int32_t, float>(DataType::i32(), DataType::f32(), i32,
                             [](int32_t x) { return float(x); });
  check_cast<int32_t, double>(DataType::i32(), DataType::f64(), i32,
                              [](int32_t x) { return double(x); });
  auto u8 = random_vector<uint8_t>(64, 0, 255);
  check_cast<uint8_t, float>(DataType::u8(), DataType::f32(), u8,
                             [](uint8_t x) { return float(x); });
  std::vector<float> f = random_vector<float>(128, -1e5, 1e5);
  check_cast<float, int32_t>(DataType::f32(), DataType::i32(), f,
                             [](float x) { return int32_t(x); });
  check_cast<float, int64_t>(DataType::f32(), DataType::i64(), f,
                             [](float x) { return int64_t(x); });
  std::vector<float> small = random_vector<float>(64, -127, 127);
  check_cast<float, int8_t>(DataType::f32(), DataType::i8(), small,
                            [](float x) { return int8_t(x); });
  std::vector<float> pos = random_vector<float>(64, 0, 255);
  check_cast<float, uint8_t>(DataType::f32(), DataType::u8(), pos,
                             [](float x) { return uint8_t(x); });
}

TEST(Cast, FloatToFloat) {
  auto f = some_floats();
  check_cast<float, double>(DataType::f32(), DataType::f64(), f, [](float x) { return double(x); });
  std::vector<double> d = random_vector<double>(64, -1e10, 1e10);
  check_cast<double, float>(DataType::f64(), DataType::f32(), d, [](double x) { return float(x); });
#if KILN_TEST_HAS_FLOAT16
  // float16: through C++'s _Float16, same IEEE rounding.
  auto h = run_cast<float, _Float16>(DataType::f32(), DataType::f16(), f);
  for (const auto& out : h)
    for (size_t k = 0; k < f.size(); ++k) {
      _Float16 want = static_cast<_Float16>(f[k]);
      ASSERT_EQ(std::bit_cast<uint16_t>(out[k]), std::bit_cast<uint16_t>(want)) << f[k];
    }
  std::vector<_Float16> hv;
  for (float x : f) hv.push_back(static_cast<_Float16>(x));
  check_cast<_Float16, float>(DataType::f16(), DataType::f32(), hv,
                              [](_Float16 x) { return float(x); });
  check_cast<_Float16, double>(DataType::f16(), DataType::f64(), hv,
                               [](_Float16 x) { return double(x); });
#endif
}

TEST(Cast, BFloat16) {
  auto f = some_floats();
  f.push_back(std::numeric_limits<float>::quiet_NaN());
  f.push_back(std::numeric_limits<float>::infinity());
  f.push_back(1.00390625f);  // exactly halfway between two bf16 values: to even
  f.push_back(1.01171875f);  // halfway, rounds up to even
  while (f.size() % 16) f.push_back(2.0f);
  check_cast<float, uint16_t>(DataType::f32(), DataType::bf16(), f, to_bf16);
  std::vector<uint16_t> bits;
  for (float x : f) bits.push_back(to_bf16(x));
  auto back = run_cast<uint16_t, float>(DataType::bf16(), DataType::f32(), bits);
  for (const auto& out : back)
    for (size_t k = 0; k < bits.size(); ++k)
      ASSERT_EQ(std::bit_cast<uint32_t>(out[k]), std::bit_cast<uint32_t>(from_bf16(bits[k])));
  auto ints = random_vector<int32_t>(64, -1000, 1000);
  check_cast<int32_t, uint16_t>(DataType::i32(), DataType::bf16(), ints,
                                [](int32_t x) { return to_bf16(float(x)); });
}

TEST(Cast, Bool) {
  auto i32 = random_vector<int32_t>(64, -2, 2);
  check_cast<int32_t, uint8_t>(DataType::i32(), DataType::boolean(), i32,
                               [](int32_t x) { return uint8_t(x != 0); });
  auto f = some_floats();
  for (size_t k = 0; k < f.size(); k += 3) f[k] = 0.0f;
  check_cast<float, uint8_t>(DataType::f32(), DataType::boolean(), f,
                             [](float x) { return uint8_t(x != 0); });
  std::vector<uint8_t> b(64);
  for (size_t k = 0; k < b.size(); ++k) b[k] = (k * 7 % 3) == 0;
  check_cast<uint8_t, int32_t>(DataType::boolean(), DataType::i32(), b,
                               [](uint8_t x) { return int32_t(x); });
  check_cast<uint8_t, float>(DataType::boolean(), DataType::f32(), b,
                             [](uint8_t x) { return float(x); });
  check_cast<uint8_t, int8_t>(DataType::boolean(), DataType::i8(), b,
                              [](uint8_t x) { return int8_t(x); });
}

// Arithmetic directly on half and bfloat16 values (computed in float, rounded).
TEST(Cast, HalfAndBFloatArithmetic) {
#if !KILN_TEST_HAS_FLOAT16
  GTEST_SKIP() << "this compiler has no _Float16 (clang < 15): checked in the gcc build";
#else
  const int64_t n = 32;
  Buffer A = make_buffer("A", DataType::bf16(), {n}), B = make_buffer("B", DataType::f16(), {n});
  Buffer C = make_buffer("C", DataType::bf16(), {n}), D = make_buffer("D", DataType::f16(), {n});
  Var i("i");
  Expr idx = ramp(i * 16, 1, 16);
  Expr two_bf = make_const(DataType::bf16(16), 2.0), two_h = make_const(DataType::f16(16), 2.0);
  Stmt s = serial(
      i, 0, n / 16,
      seq({make_store(C, load(A, idx) * two_bf + load(A, idx), idx),
           make_store(D, max(load(B, idx) * two_h, make_const(DataType::f16(16), 0.0)), idx)}));
  auto f = jit({"lowp", {A, B, C, D}, s});
  auto src = random_vector<float>(n, -8, 8);
  std::vector<uint16_t> a, c(n);
  std::vector<_Float16> b, d(n);
  for (float x : src) a.push_back(to_bf16(x)), b.push_back(static_cast<_Float16>(x));
  ASSERT_EQ(f({a.data(), b.data(), c.data(), d.data()}), 0);
  for (int64_t k = 0; k < n; ++k) {
    float av = from_bf16(a[k]);
    ASSERT_EQ(c[k], to_bf16(from_bf16(to_bf16(av * 2)) + av)) << k;
    ASSERT_EQ(float(d[k]), std::max(float(b[k]) * 2, 0.0f)) << k;
  }
#endif
}

}  // namespace
}  // namespace kiln::codegen::test
