// Det (graph/ops/linalg.cc): the reference against cofactor expansion, the
// compiled kernel (one stage group per elimination step) against the
// reference over sizes and batch shapes, singular and pivoting matrices; and
// MatMul in float64 (what Einsum's float64 lowering emits).
#include <gtest/gtest.h>

#include <random>

#include "op_harness.h"

namespace kiln::test {
namespace {

using graph::Initializer;

// Laplace expansion along the first row (fine for m <= 6).
double cofactor_det(const std::vector<double>& a, int64_t m) {
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t c = 0; c < m; ++c) {
    std::vector<double> minor;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t j = 0; j < m; ++j)
        if (j != c) minor.push_back(a[r * m + j]);
    det += (c % 2 ? -1 : 1) * a[c] * cofactor_det(minor, m - 1);
  }
  return det;
}

template <typename T>
std::vector<double> as_doubles(const Initializer& t) {
  std::vector<double> out;
  for (T v : t.as<T>()) out.push_back(static_cast<double>(v));
  return out;
}

void expect_close_rel(const std::vector<double>& got, const std::vector<double>& want, double rel,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
}

const std::vector<std::vector<int64_t>> kShapes = {{1, 1}, {2, 2},    {3, 3},       {4, 4},
                                                   {5, 5}, {3, 2, 2}, {2, 3, 4, 4}, {7, 3, 3},
                                                   {6, 6}, {9, 9},    {2, 16, 16}};

TEST(Det, ReferenceMatchesCofactorExpansion) {
  std::mt19937_64 rng(11);
  for (const auto& shape : kShapes) {
    const int64_t m = shape.back();
    if (m > 6) continue;
    SCOPED_TRACE(graph::shape_str(shape));
    Initializer x = random_tensor("float32", shape, rng, -2, 2);
    auto y = eval(make_node("Det", 1), {&x});
    std::vector<int64_t> batch(shape.begin(), shape.end() - 2);
    ASSERT_EQ(y.at(0).type, (graph::TensorType{"float32", batch}));
    std::vector<double> xv = as_doubles<float>(x), want;
    for (size_t b = 0; b * m * m < xv.size(); ++b)
      want.push_back(
          cofactor_det(std::vector<double>(xv.begin() + static_cast<long>(b * m * m),
                                           xv.begin() + static_cast<long>((b + 1) * m * m)),
                       m));
    expect_close_rel(as_doubles<float>(y[0]), want, 1e-5, "det");
  }
}

TEST(Det, CompiledMatchesReference) {
  std::mt19937_64 rng(12);
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(graph::shape_str(shape));
    Initializer x = random_tensor("float32", shape, rng, -2, 2);
    check_node(make_node("Det", 1), {&x}, 1e-5);
  }
}

// ONNX's test_det_2d / test_det_nd values, a zero column (det 0, no NaN), a
// matrix that needs row swaps (zero leading pivots), and a singular one.
TEST(Det, PivotingAndSingularMatrices) {
  const std::vector<float> v = {0, 1, 2, 3, 1, 2, 3, 4, 1, 2, 2, 1,
                                1, 3, 3, 1, 0, 5, 0, 7, 2, 4, 1, 2};
  Initializer x = tensor_of<float>({6, 2, 2}, v);
  auto got = run_compiled(make_node("Det", 1), {&x});
  EXPECT_EQ(got.at(0).as<float>(), (std::vector<float>{-2, -2, -3, -8, 0, 0}));
  // Every leading pivot zero: rows must be swapped twice.
  Initializer p = tensor_of<float>({3, 3}, {0, 0, 2, 0, 3, 0, 5, 0, 0});
  EXPECT_EQ(run_compiled(make_node("Det", 1), {&p}).at(0).as<float>(), std::vector<float>{-30});
  EXPECT_EQ(eval(make_node("Det", 1), {&p}).at(0).as<float>(), std::vector<float>{-30});
}

TEST(Det, Float64) {
  std::mt19937_64 rng(13);
  for (const auto& shape : kShapes) {
    SCOPED_TRACE(graph::shape_str(shape));
    Initializer x32 = random_tensor("float32", shape, rng, -2, 2);
    Initializer x = make_tensor("float64", shape);
    std::vector<float> v = x32.as<float>();
    for (size_t i = 0; i < v.size(); ++i) reinterpret_cast<double*>(x.data.data())[i] = v[i];
    graph::Node n = make_node("Det", 1);
    auto want = eval(n, {&x});
    auto got = run_compiled(n, {&x});
    expect_close_rel(as_doubles<double>(got.at(0)), as_doubles<double>(want.at(0)), 1e-12, "det");
  }
}

TEST(Det, BadInputsNameTheNode) {
  std::mt19937_64 rng(14);
  Initializer x = random_tensor("float32", {2, 3}, rng);
  try {
    eval(make_node("Det", 1), {&x});
    ADD_FAILURE() << "no error";
  } catch (const graph::OpError& e) {
    EXPECT_NE(std::string(e.what()).find("'Det_test'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("square"), std::string::npos) << e.what();
  }
}

TEST(MatMul, Float64CompiledMatchesReference) {
  std::mt19937_64 rng(15);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{5}, {5}}, {{3, 7}, {7, 5}}, {{2, 3, 4}, {2, 4, 6}}, {{1, 1, 33}, {33, 17}}, {{4}, {4, 3}}};
  for (const auto& [as, bs] : cases) {
    SCOPED_TRACE(graph::shape_str(as) + " x " + graph::shape_str(bs));
    Initializer a = make_tensor("float64", as), b = make_tensor("float64", bs);
    std::uniform_real_distribution<double> d(-1, 1);
    for (size_t i = 0; i < a.data.size() / 8; ++i)
      reinterpret_cast<double*>(a.data.data())[i] = d(rng);
    for (size_t i = 0; i < b.data.size() / 8; ++i)
      reinterpret_cast<double*>(b.data.data())[i] = d(rng);
    graph::Node n = make_node("MatMul", 2);
    auto want = eval(n, {&a, &b});
    ASSERT_EQ(want.at(0).type.dtype, "float64");
    auto got = run_compiled(n, {&a, &b});
    expect_close_rel(as_doubles<double>(got.at(0)), as_doubles<double>(want.at(0)), 1e-13,
                     "matmul");
  }
}

}  // namespace
}  // namespace kiln::test
