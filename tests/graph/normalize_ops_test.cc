// LRN, LpNormalization and GlobalLpPool: evaluate() against hand-computed
// values, then compute() through the generic schedule and the JIT against
// evaluate() over shapes, attributes and both float types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

Node make_node(const std::string& op) {
  Node n;
  n.op_type = op;
  n.name = op + "_test";
  n.inputs = {"x"};
  n.outputs = {"y"};
  return n;
}

std::vector<float> eval_values(const Node& n, const Initializer& x) {
  Initializer y = graph::get_op(n.op_type).evaluate(n, {&x}).at(0);
  std::vector<float> v(y.data.size() / 4);
  std::memcpy(v.data(), y.data.data(), y.data.size());
  return v;
}

// One spatial position, 4 channels, size 3: channel c sums c-1 .. c+1.
TEST(NormalizeEval, LrnByHand) {
  Initializer x = tensor_of<float>({1, 4, 1, 1}, {1, 2, 3, 4});
  Node n = make_node("LRN");
  n.attrs["size"] = int64_t{3};
  n.attrs["alpha"] = 0.3f;
  n.attrs["beta"] = 0.5f;
  n.attrs["bias"] = 2.0f;
  std::vector<float> y = eval_values(n, x);
  const double sq[] = {1 + 4, 1 + 4 + 9, 4 + 9 + 16, 9 + 16};
  for (int c = 0; c < 4; ++c)
    EXPECT_NEAR(y[c], (c + 1) / std::sqrt(2.0 + 0.3f / 3 * sq[c]), 1e-6) << c;
}

// An even size reaches one channel further up than down: size 2 sums c, c + 1.
TEST(NormalizeEval, LrnEvenSize) {
  Initializer x = tensor_of<float>({1, 3, 1}, {1, 2, 3});
  Node n = make_node("LRN");
  n.attrs["size"] = int64_t{2};
  n.attrs["alpha"] = 1.0f;
  n.attrs["beta"] = 1.0f;
  n.attrs["bias"] = 0.0f;
  std::vector<float> y = eval_values(n, x);
  EXPECT_NEAR(y[0], 1 / (0.5 * (1 + 4)), 1e-6);
  EXPECT_NEAR(y[1], 2 / (0.5 * (4 + 9)), 1e-6);
  EXPECT_NEAR(y[2], 3 / (0.5 * 9), 1e-6);
}

TEST(NormalizeEval, LrnNeedsSize) {
  Initializer x = tensor_of<float>({1, 2, 1, 1}, {1, 2});
  EXPECT_THROW(eval_values(make_node("LRN"), x), graph::OpError);
}

TEST(NormalizeEval, LpNormalization) {
  Initializer x = tensor_of<float>({2, 2}, {3, 4, -1, 1});
  Node n = make_node("LpNormalization");
  std::vector<float> y = eval_values(n, x);
  const double want[] = {0.6, 0.8, -1 / std::sqrt(2.0), 1 / std::sqrt(2.0)};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[k], want[k], 1e-7) << k;
  n.attrs["p"] = int64_t{1};
  n.attrs["axis"] = int64_t{0};
  y = eval_values(n, x);
  const double want1[] = {0.75, 0.8, -0.25, 0.2};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[k], want1[k], 1e-7) << k;
  n.attrs["p"] = int64_t{3};
  EXPECT_THROW(eval_values(n, x), graph::OpError);
}

TEST(NormalizeEval, GlobalLpPool) {
  Initializer x = tensor_of<float>({1, 2, 2, 1}, {3, -4, 1, 2});
  Node n = make_node("GlobalLpPool");
  std::vector<float> y = eval_values(n, x);
  EXPECT_FLOAT_EQ(y[0], 5);
  EXPECT_FLOAT_EQ(y[1], std::sqrt(5.0f));
  n.attrs["p"] = int64_t{1};
  EXPECT_EQ(eval_values(n, x), (std::vector<float>{7, 3}));
  n.attrs["p"] = int64_t{4};
  EXPECT_NEAR(eval_values(n, x)[0], std::pow(81.0 + 256.0, 0.25), 1e-5);
}

// x's values as float64.
Initializer to_f64(const Initializer& x) {
  Initializer d = test::make_tensor("float64", x.type.shape);
  for (int64_t i = 0; i < x.type.num_elements(); ++i)
    reinterpret_cast<double*>(d.data.data())[i] = reinterpret_cast<const float*>(x.data.data())[i];
  return d;
}

// float64 kernels against evaluate within rel_tol of the largest value
// (check_node compares float64 bit for bit; the kernel's sums and powers
// round differently).
void check_f64(const Node& n, const Initializer& x, double rel_tol = 1e-12) {
  Initializer want = graph::get_op(n.op_type).evaluate(n, {&x}).at(0);
  Initializer got = test::run_compiled(n, {&x}).at(0);
  ASSERT_EQ(got.type, want.type);
  auto* a = reinterpret_cast<const double*>(got.data.data());
  auto* b = reinterpret_cast<const double*>(want.data.data());
  double max_ref = 1e-300, max_err = 0;
  for (int64_t i = 0; i < want.type.num_elements(); ++i) {
    max_ref = std::max(max_ref, std::fabs(b[i]));
    max_err = std::max(max_err, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(max_err / max_ref, rel_tol) << n.op_type;
}

TEST(NormalizeCompiled, Float64) {
  std::mt19937_64 rng(4);
  Initializer x = to_f64(random_tensor("float32", {2, 5, 3, 7}, rng, -2, 2));
  Node lrn = make_node("LRN");
  lrn.attrs["size"] = int64_t{3};
  check_f64(lrn, x);
  for (int64_t p : {1, 2}) {
    Node lp = make_node("LpNormalization");
    lp.attrs["p"] = p;
    lp.attrs["axis"] = int64_t{1};
    check_f64(lp, x);
  }
  for (int64_t p : {1, 2, 5}) {
    Node pool = make_node("GlobalLpPool");
    pool.attrs["p"] = p;
    check_f64(pool, x);
  }
}

TEST(NormalizeEval, RejectsIntegers) {
  Initializer x = tensor_of<int32_t>({1, 2, 1, 1}, {1, 2});
  for (const char* op : {"LpNormalization", "GlobalLpPool"})
    EXPECT_THROW(eval_values(make_node(op), x), graph::OpError) << op;
}

TEST(NormalizeCompiled, LrnMatchesEvaluate) {
  std::mt19937_64 rng(1);
  for (const Shape& s : {Shape{1, 5, 3, 7}, Shape{2, 16, 4, 4}, Shape{1, 3, 17}, Shape{2, 7, 1, 1}})
    for (int64_t size : {1, 2, 3, 5})
      for (float beta : {0.75f, 0.5f, 1.3f}) {
        Initializer x = random_tensor("float32", s, rng, -3, 3);
        Node n = make_node("LRN");
        n.attrs["size"] = size;
        n.attrs["beta"] = beta;
        n.attrs["alpha"] = 0.01f;
        SCOPED_TRACE(graph::shape_str(s) + " size " + std::to_string(size));
        check_node(n, {&x}, 2e-6);
      }
}

TEST(NormalizeCompiled, LpNormalizationMatchesEvaluate) {
  std::mt19937_64 rng(2);
  for (const Shape& s : {Shape{17}, Shape{3, 5}, Shape{2, 3, 33}, Shape{4, 1, 19}})
    for (int64_t axis = -static_cast<int64_t>(s.size()); axis < static_cast<int64_t>(s.size());
         ++axis)
      for (int64_t p : {1, 2}) {
        Initializer x = random_tensor("float32", s, rng, -2, 2);
        Node n = make_node("LpNormalization");
        n.attrs["axis"] = axis;
        n.attrs["p"] = p;
        SCOPED_TRACE(graph::shape_str(s) + " axis " + std::to_string(axis));
        check_node(n, {&x}, 2e-6);
      }
}

TEST(NormalizeCompiled, GlobalLpPoolMatchesEvaluate) {
  std::mt19937_64 rng(3);
  for (const Shape& s :
       {Shape{1, 3, 5, 7}, Shape{2, 4, 17}, Shape{1, 2, 3, 4, 5}, Shape{2, 3, 1, 1}})
    for (int64_t p : {1, 2, 3, 4}) {
      Initializer x = random_tensor("float32", s, rng, -2, 2);
      Node n = make_node("GlobalLpPool");
      n.attrs["p"] = p;
      SCOPED_TRACE(graph::shape_str(s) + " p " + std::to_string(p));
      check_node(n, {&x}, 2e-6);
    }
}

}  // namespace
}  // namespace kiln
