// The trigonometric and hyperbolic operators (Sin ... Atanh), IsNaN, IsInf,
// Shrink, CastLike and BitShift: evaluate() against the values of the ONNX
// operator documentation, then compute() (through the generic schedule and
// the JIT) against evaluate() over shapes, dtypes and attributes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln {
namespace {

using graph::Initializer;
using graph::Node;
using test::check_node;
using test::random_tensor;
using test::tensor_of;
using Shape = std::vector<int64_t>;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Node make_node(const std::string& op, size_t n_in) {
  Node n;
  n.op_type = op;
  n.name = op + "_test";
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back("x" + std::to_string(i));
  n.outputs = {"y"};
  return n;
}

Initializer eval1(const Node& n, const std::vector<const Initializer*>& in) {
  auto out = graph::get_op(n.op_type).evaluate(n, in);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

template <typename T>
std::vector<T> values(const Initializer& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

std::vector<bool> bools(const Initializer& t) {
  EXPECT_EQ(t.type.dtype, "bool");
  return std::vector<bool>(t.data.begin(), t.data.end());
}

const std::vector<Shape> kShapes = {{}, {1}, {17}, {3, 5}, {2, 3, 33}, {1, 2, 3, 2, 5}};

// ---- evaluate against the ONNX documentation's examples ---------------------------

struct Example {
  const char* op;
  std::vector<float> x, y;
};

TEST(MathOpsEval, TrigExamplesOfTheOnnxDocs) {
  const Example examples[] = {
      {"Sin", {-1, 0, 1}, {-0.84147098f, 0, 0.84147098f}},
      {"Cos", {-1, 0, 1}, {0.54030231f, 1, 0.54030231f}},
      {"Tan", {-1, 0, 1}, {-1.55740772f, 0, 1.55740772f}},
      {"Asin", {-0.5f, 0, 0.5f}, {-0.52359878f, 0, 0.52359878f}},
      {"Acos", {-0.5f, 0, 0.5f}, {2.09439510f, 1.57079633f, 1.04719755f}},
      {"Atan", {-1, 0, 1}, {-0.78539816f, 0, 0.78539816f}},
      {"Sinh", {-1, 0, 1}, {-1.17520119f, 0, 1.17520119f}},
      {"Cosh", {-1, 0, 1}, {1.54308063f, 1, 1.54308063f}},
      {"Asinh", {-1, 0, 1}, {-0.88137359f, 0, 0.88137359f}},
      {"Acosh", {10, 2.71828183f, 1}, {2.99322285f, 1.65745445f, 0}},
      {"Atanh", {-0.5f, 0, 0.5f}, {-0.54930614f, 0, 0.54930614f}},
  };
  for (const Example& e : examples) {
    Initializer x = tensor_of<float>({3}, e.x);
    std::vector<float> got = values<float>(eval1(make_node(e.op, 1), {&x}));
    for (size_t k = 0; k < e.y.size(); ++k) EXPECT_NEAR(got[k], e.y[k], 1e-6) << e.op << " " << k;
  }
}

TEST(MathOpsEval, OutOfDomainIsNaN) {
  Initializer x = tensor_of<float>({2}, {1.5f, -2.0f});
  for (const char* op : {"Asin", "Acos", "Atanh"})
    for (float v : values<float>(eval1(make_node(op, 1), {&x}))) EXPECT_TRUE(std::isnan(v)) << op;
  Initializer y = tensor_of<float>({1}, {0.5f});
  EXPECT_TRUE(std::isnan(values<float>(eval1(make_node("Acosh", 1), {&y}))[0]));
}

TEST(MathOpsEval, TrigRejectsIntegers) {
  Initializer x = tensor_of<int32_t>({2}, {1, 2});
  EXPECT_THROW(eval1(make_node("Sin", 1), {&x}), graph::OpError);
}

TEST(MathOpsEval, IsNaNAndIsInf) {
  Initializer x = tensor_of<float>({4}, {3.0f, kNaN, 4.0f, kNaN});
  EXPECT_EQ(bools(eval1(make_node("IsNaN", 1), {&x})),
            (std::vector<bool>{false, true, false, true}));
  Initializer y = tensor_of<float>({6}, {-1.2f, kNaN, kInf, 2.8f, -kInf, kInf});
  Node n = make_node("IsInf", 1);
  EXPECT_EQ(bools(eval1(n, {&y})), (std::vector<bool>{false, false, true, false, true, true}));
  n.attrs["detect_negative"] = int64_t{0};
  EXPECT_EQ(bools(eval1(n, {&y})), (std::vector<bool>{false, false, true, false, false, true}));
  n.attrs["detect_negative"] = int64_t{1};
  n.attrs["detect_positive"] = int64_t{0};
  EXPECT_EQ(bools(eval1(n, {&y})), (std::vector<bool>{false, false, false, false, true, false}));
}

TEST(MathOpsEval, ShrinkHardAndSoft) {
  Initializer x = tensor_of<float>({5}, {-2, -1, 0, 1, 2});
  Node n = make_node("Shrink", 1);
  n.attrs["lambd"] = 1.5f;
  EXPECT_EQ(values<float>(eval1(n, {&x})), (std::vector<float>{-2, 0, 0, 0, 2}));
  n.attrs["bias"] = 1.5f;
  EXPECT_EQ(values<float>(eval1(n, {&x})), (std::vector<float>{-0.5f, 0, 0, 0, 0.5f}));
  // Integers compute in double and truncate: -5 + 1.5 = -3.5 -> -3.
  Initializer i = tensor_of<int32_t>({3}, {-5, 1, 5});
  EXPECT_EQ(values<int32_t>(eval1(n, {&i})), (std::vector<int32_t>{-3, 0, 3}));
}

TEST(MathOpsEval, ShrinkRejectsNegativeLambd) {
  Initializer x = tensor_of<float>({1}, {1});
  Node n = make_node("Shrink", 1);
  n.attrs["lambd"] = -1.0f;
  try {
    eval1(n, {&x});
    FAIL() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("Shrink_test"), std::string::npos) << e.what();
  }
}

TEST(MathOpsEval, CastLikeTakesTheSecondInputsDtype) {
  Initializer x = tensor_of<float>({3}, {1.5f, -2.7f, 3.0f});
  Initializer like_i = tensor_of<int32_t>({1}, {0});
  Initializer like_d = tensor_of<double>({0}, {});
  Initializer a = eval1(make_node("CastLike", 2), {&x, &like_i});
  EXPECT_EQ(a.type.dtype, "int32");
  EXPECT_EQ(values<int32_t>(a), (std::vector<int32_t>{1, -2, 3}));
  Initializer b = eval1(make_node("CastLike", 2), {&x, &like_d});
  EXPECT_EQ(values<double>(b), (std::vector<double>{1.5f, -2.7f, 3.0f}));
}

TEST(MathOpsEval, BitShiftExamples) {
  Initializer x = tensor_of<uint8_t>({3}, {16, 4, 1});
  Initializer y = tensor_of<uint8_t>({3}, {1, 2, 3});
  Node n = make_node("BitShift", 2);
  n.attrs["direction"] = std::string("RIGHT");
  EXPECT_EQ(values<uint8_t>(eval1(n, {&x, &y})), (std::vector<uint8_t>{8, 1, 0}));
  n.attrs["direction"] = std::string("LEFT");
  EXPECT_EQ(values<uint8_t>(eval1(n, {&x, &y})), (std::vector<uint8_t>{32, 16, 8}));
  // Shifting by the width or more gives 0 (numpy's definition).
  Initializer big = tensor_of<uint8_t>({3}, {8, 9, 255});
  EXPECT_EQ(values<uint8_t>(eval1(n, {&x, &big})), (std::vector<uint8_t>{0, 0, 0}));
}

TEST(MathOpsEval, BitShiftErrorsNameTheNode) {
  Initializer x = tensor_of<uint8_t>({1}, {1});
  Node n = make_node("BitShift", 2);
  n.attrs["direction"] = std::string("UP");
  for (bool bad_dtype : {false, true}) {
    Initializer i = tensor_of<int32_t>({1}, {1});
    try {
      if (bad_dtype) {
        n.attrs["direction"] = std::string("LEFT");
        eval1(n, {&i, &i});
      } else {
        eval1(n, {&x, &x});
      }
      FAIL() << "no error";
    } catch (const graph::OpError& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("BitShift_test"), std::string::npos) << what;
      EXPECT_NE(what.find(bad_dtype ? "int32" : "UP"), std::string::npos) << what;
    }
  }
}

// ---- compute against evaluate -------------------------------------------------------

// Random values in [lo, hi) of float32 or float64.
Initializer random_float(const std::string& dtype, Shape shape, std::mt19937_64& rng, double lo,
                         double hi) {
  Initializer f = random_tensor("float32", shape, rng, lo, hi);
  if (dtype == "float32") return f;
  Initializer d = test::make_tensor("float64", shape);
  const float* s = reinterpret_cast<const float*>(f.data.data());
  for (int64_t i = 0; i < f.type.num_elements(); ++i)
    reinterpret_cast<double*>(d.data.data())[i] = s[i];
  return d;
}

TEST(MathOpsCompiled, TrigMatchesEvaluate) {
  struct Range {
    const char* op;
    double lo, hi;
  };
  const Range ranges[] = {
      {"Sin", -20, 20},   {"Cos", -20, 20},   {"Tan", -3, 3},      {"Asin", -1, 1},
      {"Acos", -1, 1},    {"Atan", -10, 10},  {"Sinh", -5, 5},     {"Cosh", -5, 5},
      {"Asinh", -10, 10}, {"Acosh", 1, 20},   {"Atanh", -1, 1},    {"Sin", -1e6, 1e6},
      {"Cos", -1e6, 1e6}, {"Tan", -1e6, 1e6}, {"Atan", -1e6, 1e6}, {"Asinh", -1e6, 1e6}};
  std::mt19937_64 rng(7);
  for (const Range& r : ranges)
    for (const char* dt : {"float32", "float64"})
      for (const Shape& s : kShapes) {
        Initializer x = random_float(dt, s, rng, r.lo, r.hi);
        SCOPED_TRACE(std::string(r.op) + " " + dt + " " + graph::shape_str(s));
        check_node(make_node(r.op, 1), {&x}, 2e-6);
      }
}

// Element by element: check_node's relative error is relative to the
// tensor's largest value, which would hide a wrong small result.
TEST(MathOpsCompiled, TanNearItsPolesElementwise) {
  std::vector<float> xs;
  for (int k = -200; k <= 200; ++k) xs.push_back(static_cast<float>((k + 0.5) * M_PI));
  Initializer x = tensor_of<float>({static_cast<int64_t>(xs.size())}, xs);
  Node n = make_node("Tan", 1);
  auto got = values<float>(test::run_compiled(n, {&x})[0]);
  auto want = values<float>(eval1(n, {&x}));
  for (size_t k = 0; k < xs.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-6 * std::fabs(want[k])) << xs[k];
}

// NaN and infinities planted in random values.
Initializer with_specials(const std::string& dtype, Shape shape, std::mt19937_64& rng) {
  Initializer x = random_float(dtype, shape, rng, -3, 3);
  const double specials[] = {kNaN, kInf, -kInf, 0.0};
  for (int64_t i = 0; i < x.type.num_elements(); i += 3) {
    double v = specials[(i / 3) % 4];
    if (dtype == "float32")
      reinterpret_cast<float*>(x.data.data())[i] = static_cast<float>(v);
    else
      reinterpret_cast<double*>(x.data.data())[i] = v;
  }
  return x;
}

TEST(MathOpsCompiled, IsNaNIsInfMatchEvaluate) {
  std::mt19937_64 rng(3);
  for (const char* dt : {"float32", "float64"})
    for (const Shape& s : kShapes) {
      Initializer x = with_specials(dt, s, rng);
      check_node(make_node("IsNaN", 1), {&x});
      for (int64_t neg : {0, 1})
        for (int64_t pos : {0, 1}) {
          Node n = make_node("IsInf", 1);
          n.attrs["detect_negative"] = neg;
          n.attrs["detect_positive"] = pos;
          SCOPED_TRACE(std::string(dt) + " " + std::to_string(neg) + std::to_string(pos));
          check_node(n, {&x});
        }
    }
}

// The planted NaN must come out true: a simplifier that folded x != x to
// false would pass a comparison with an evaluate that did the same.
TEST(MathOpsCompiled, IsNaNFindsNaN) {
  Initializer x = tensor_of<float>({19}, std::vector<float>(19, kNaN));
  auto out = test::run_compiled(make_node("IsNaN", 1), {&x});
  EXPECT_EQ(bools(out[0]), std::vector<bool>(19, true));
}

TEST(MathOpsCompiled, ShrinkMatchesEvaluate) {
  std::mt19937_64 rng(5);
  for (const char* dt : {"float32", "int32", "int8", "uint8", "int64"})
    for (const Shape& s : kShapes)
      for (float lambd : {0.0f, 0.5f, 2.0f})
        for (float bias : {0.0f, 1.5f}) {
          bool is_u8 = std::string(dt) == "uint8";
          Initializer x = random_tensor(dt, s, rng, is_u8 ? 0 : -5, 5);
          Node n = make_node("Shrink", 1);
          n.attrs["lambd"] = lambd;
          n.attrs["bias"] = bias;
          SCOPED_TRACE(std::string(dt) + " " + graph::shape_str(s));
          check_node(n, {&x});
        }
}

TEST(MathOpsCompiled, CastLikeMatchesEvaluate) {
  std::mt19937_64 rng(9);
  const std::pair<const char*, const char*> pairs[] = {{"float32", "int32"}, {"float32", "float64"},
                                                       {"int64", "float32"}, {"int32", "int8"},
                                                       {"float32", "bool"},  {"uint8", "int64"}};
  for (auto [from, to] : pairs)
    for (const Shape& s : kShapes) {
      Initializer x = random_tensor(from, s, rng, 0, 100);
      Initializer like = random_tensor(to == std::string("float64") ? "float32" : to, {2}, rng);
      if (to == std::string("float64")) like = test::make_tensor("float64", {2});
      SCOPED_TRACE(std::string(from) + " -> " + to);
      check_node(make_node("CastLike", 2), {&x, &like});
    }
}

// A tensor of `dtype` (uint8 ... uint64) filled with random bits; amounts
// (shift counts) in [0, bits + 2], past the width too.
Initializer random_uint(const std::string& dtype, Shape shape, std::mt19937_64& rng, bool amounts) {
  Initializer t = test::make_tensor(dtype, shape);
  size_t es = graph::dtype_size(dtype);
  for (int64_t i = 0; i < t.type.num_elements(); ++i) {
    uint64_t v = amounts ? rng() % (es * 8 + 3) : rng();
    std::memcpy(t.data.data() + i * es, &v, es);  // little-endian: the low bytes
  }
  return t;
}

TEST(MathOpsCompiled, BitShiftMatchesEvaluateWithBroadcasting) {
  std::mt19937_64 rng(11);
  const std::pair<Shape, Shape> shapes[] = {
      {{17}, {17}}, {{2, 3, 33}, {33}}, {{2, 3, 33}, {}}, {{3, 1}, {1, 19}}, {{}, {5}}};
  for (const char* dt : {"uint8", "uint16", "uint32", "uint64"})
    for (const auto& [sx, sy] : shapes)
      for (const char* dir : {"LEFT", "RIGHT"}) {
        Initializer x = random_uint(dt, sx, rng, false), y = random_uint(dt, sy, rng, true);
        Node n = make_node("BitShift", 2);
        n.attrs["direction"] = std::string(dir);
        SCOPED_TRACE(std::string(dt) + " " + dir + " " + graph::shape_str(sx));
        check_node(n, {&x, &y});
      }
}

TEST(MathOpsCompiled, BitShiftComputeRejectsSignedTypes) {
  Node n = make_node("BitShift", 2);
  n.attrs["direction"] = std::string("LEFT");
  graph::ComputeInputs in;
  ir::Tensor p = ir::placeholder({ir::Expr(int64_t{4})}, ir::DataType::i32(), "x");
  in.tensors = {p, p};
  in.constants = {nullptr, nullptr};
  EXPECT_THROW(graph::get_op("BitShift").compute(n, in, {{"int32", {4}}}), graph::OpError);
}

}  // namespace
}  // namespace kiln
