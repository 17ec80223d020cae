// ReduceProd, ReduceLogSum and ReduceLogSumExp: evaluate() against the ONNX
// documentation's examples and hand-computed edge cases (overflow-free
// log-sum-exp, infinities, empty axes), then compute() through the generic
// schedule and the JIT against evaluate() over shapes, axes, keepdims and
// dtypes, with axes as an attribute (opset < 18) and as an input (opset 18).
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

Node reduce_node(const std::string& op, std::vector<int64_t> axes, int64_t keepdims,
                 bool axes_input = false) {
  Node n;
  n.op_type = op;
  n.name = op + "_test";
  n.inputs = {"x"};
  if (axes_input) n.inputs.push_back("axes");
  if (!axes_input && !axes.empty()) n.attrs["axes"] = axes;
  n.attrs["keepdims"] = keepdims;
  n.outputs = {"y"};
  return n;
}

Initializer eval1(const Node& n, const std::vector<const Initializer*>& in) {
  return graph::get_op(n.op_type).evaluate(n, in).at(0);
}

template <typename T>
std::vector<T> values(const Initializer& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// The [3, 2, 2] data of the ONNX documentation's ReduceProd examples.
Initializer docs_data() {
  return tensor_of<float>({3, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST(ReduceMoreEval, ReduceProdExamples) {
  Initializer x = docs_data();
  Initializer y = eval1(reduce_node("ReduceProd", {1}, 1), {&x});
  EXPECT_EQ(y.type.shape, (Shape{3, 1, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{3, 8, 35, 48, 99, 120}));
  y = eval1(reduce_node("ReduceProd", {1}, 0), {&x});
  EXPECT_EQ(y.type.shape, (Shape{3, 2}));
  y = eval1(reduce_node("ReduceProd", {-2}, 1), {&x});
  EXPECT_EQ(values<float>(y), (std::vector<float>{3, 8, 35, 48, 99, 120}));
  y = eval1(reduce_node("ReduceProd", {}, 1), {&x});
  EXPECT_EQ(y.type.shape, (Shape{1, 1, 1}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{479001600}));
}

TEST(ReduceMoreEval, ReduceProdOfIntegersWraps) {
  Initializer x = tensor_of<int64_t>({2, 2}, {int64_t{1} << 40, int64_t{1} << 30, -3, 7});
  EXPECT_EQ(values<int64_t>(eval1(reduce_node("ReduceProd", {1}, 0), {&x})),
            (std::vector<int64_t>{0, -21}));  // 2^70 wraps to 0 in int64
}

TEST(ReduceMoreEval, ReduceLogSumExamples) {
  Initializer ones = tensor_of<float>({3, 4, 5}, std::vector<float>(60, 1.0f));
  Initializer y = eval1(reduce_node("ReduceLogSum", {2, 1}, 1), {&ones});
  EXPECT_EQ(y.type.shape, (Shape{3, 1, 1}));
  for (float v : values<float>(y)) EXPECT_FLOAT_EQ(v, std::log(20.0f));
  y = eval1(reduce_node("ReduceLogSum", {}, 1), {&ones});
  EXPECT_FLOAT_EQ(values<float>(y)[0], std::log(60.0f));
}

TEST(ReduceMoreEval, ReduceLogSumExpExample) {
  Initializer x = tensor_of<double>({3, 2, 2}, {5, 1, 20, 2, 30, 1, 40, 2, 55, 1, 60, 2});
  Initializer y = eval1(reduce_node("ReduceLogSumExp", {1}, 1), {&x});
  EXPECT_EQ(y.type.shape, (Shape{3, 1, 2}));
  // The docs print [[[20., 2.31326175]], [[40.00004578, 2.31326175]], [[60.00671387, 2.31326175]]]
  // (float32); to double precision these are m + log1p(exp(-d)).
  double c1 = 1 + std::log1p(std::exp(1.0));
  std::vector<double> want = {20 + std::log1p(std::exp(-15.0)), c1,
                              40 + std::log1p(std::exp(-10.0)), c1,
                              60 + std::log1p(std::exp(-5.0)),  c1};
  std::vector<double> got = values<double>(y);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << k;
  EXPECT_NEAR(got[4], 60.00671535, 1e-8);
}

// exp(1000) overflows float and double; the max-shifted form does not.
TEST(ReduceMoreEval, ReduceLogSumExpIsStable) {
  Initializer x = tensor_of<float>({4, 2}, {1000, 1000, -1000, -1000, -kInf, -kInf, kInf, 1});
  std::vector<float> y = values<float>(eval1(reduce_node("ReduceLogSumExp", {1}, 0), {&x}));
  EXPECT_FLOAT_EQ(y[0], 1000 + std::log(2.0f));
  EXPECT_FLOAT_EQ(y[1], -1000 + std::log(2.0f));
  EXPECT_EQ(y[2], -kInf);
  EXPECT_EQ(y[3], kInf);
}

TEST(ReduceMoreEval, NoopWithEmptyAxesAndAxesInput) {
  Initializer x = docs_data();
  Node n = reduce_node("ReduceProd", {}, 1);
  n.attrs["noop_with_empty_axes"] = int64_t{1};
  EXPECT_EQ(values<float>(eval1(n, {&x})), values<float>(x));
  Initializer axes = tensor_of<int64_t>({1}, {1});
  Node n18 = reduce_node("ReduceLogSumExp", {}, 1, /*axes_input=*/true);
  Node n13 = reduce_node("ReduceLogSumExp", {1}, 1);
  EXPECT_EQ(eval1(n18, {&x, &axes}).data, eval1(n13, {&x}).data);
}

TEST(ReduceMoreEval, LogReductionsRejectIntegers) {
  Initializer x = tensor_of<int64_t>({2}, {1, 2});
  for (const char* op : {"ReduceLogSum", "ReduceLogSumExp"})
    EXPECT_THROW(eval1(reduce_node(op, {0}, 1), {&x}), graph::OpError) << op;
}

// ---- compute against evaluate -------------------------------------------------------

struct Case {
  Shape shape;
  std::vector<int64_t> axes;
};

// Contiguous rows long enough for vector partials ({2, 3, 33} over 2, {4, 40}
// over 1) and shorter ones, reductions over outer and mixed axes, all axes.
const Case kCases[] = {{{2, 3, 33}, {2}}, {{2, 3, 33}, {1}},   {{2, 3, 33}, {0, 2}},
                       {{2, 3, 33}, {}},  {{4, 40}, {1}},      {{4, 40}, {-2}},
                       {{17}, {0}},       {{5, 7, 3}, {1, 2}}, {{1, 1, 19}, {2}}};

void check_reductions(const std::string& op, const std::string& dtype, double lo, double hi,
                      double tol) {
  std::mt19937_64 rng(17);
  for (const Case& c : kCases)
    for (int64_t keepdims : {0, 1})
      for (bool axes_input : {false, true}) {
        if (axes_input && c.axes.empty()) continue;
        Initializer x = random_tensor(dtype, c.shape, rng, lo, hi);
        Initializer axes = tensor_of<int64_t>({static_cast<int64_t>(c.axes.size())}, c.axes);
        Node n = reduce_node(op, c.axes, keepdims, axes_input);
        SCOPED_TRACE(op + " " + dtype + " " + graph::shape_str(c.shape) + " axes " +
                     graph::shape_str(c.axes) + " keepdims " + std::to_string(keepdims) +
                     (axes_input ? " (axes input)" : ""));
        if (axes_input)
          check_node(n, {&x, &axes}, tol);
        else
          check_node(n, {&x}, tol);
      }
}

TEST(ReduceMoreCompiled, ReduceProdFloat) {
  // Factors near 1 keep products of up to 198 values in range.
  check_reductions("ReduceProd", "float32", 0.9, 1.1, 1e-5);
}

TEST(ReduceMoreCompiled, ReduceProdInt64Wraps) {
  check_reductions("ReduceProd", "int64", -9, 9, 0);
}

TEST(ReduceMoreCompiled, ReduceLogSum) {
  check_reductions("ReduceLogSum", "float32", 0.1, 3, 2e-6);
}

TEST(ReduceMoreCompiled, ReduceLogSumExp) {
  check_reductions("ReduceLogSumExp", "float32", -30, 30, 2e-6);
}

// Values whose exp overflows float32: only the shifted form computes them.
TEST(ReduceMoreCompiled, ReduceLogSumExpOfLargeValues) {
  check_reductions("ReduceLogSumExp", "float32", 200, 400, 2e-6);
  Initializer x = tensor_of<float>({4, 2}, {1000, 1000, -1000, -1000, -kInf, -kInf, kInf, 1});
  Node n = reduce_node("ReduceLogSumExp", {1}, 0);
  auto got = values<float>(test::run_compiled(n, {&x})[0]);
  EXPECT_FLOAT_EQ(got[0], 1000 + std::log(2.0f));
  EXPECT_FLOAT_EQ(got[1], -1000 + std::log(2.0f));
  EXPECT_EQ(got[2], -kInf);
  EXPECT_EQ(got[3], kInf);
}

TEST(ReduceMoreCompiled, NoopWithEmptyAxesIsACopy) {
  std::mt19937_64 rng(2);
  Initializer x = random_tensor("float32", {3, 5}, rng, 0.5, 2);
  for (const char* op : {"ReduceProd", "ReduceLogSum", "ReduceLogSumExp"}) {
    Node n = reduce_node(op, {}, 1);
    n.attrs["noop_with_empty_axes"] = int64_t{1};
    check_node(n, {&x});
  }
}

}  // namespace
}  // namespace kiln
