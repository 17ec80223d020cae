// The operator helpers of src/graph/ops/op_util.h and window.h: attribute
// defaults, required and optional inputs, axis normalization, broadcasting,
// host tensor strides, and the one error format "node 'x' (Op): problem".
#include "graph/ops/op_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph/ops/window.h"
#include "op_harness.h"

namespace kiln::graph::op_util {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Node node_of(const std::string& op_type, const std::string& name,
             std::map<std::string, Attribute> attrs = {}) {
  Node n;
  n.op_type = op_type;
  n.name = name;
  n.attrs = std::move(attrs);
  return n;
}

// The message of the OpError that f throws ("" and a test failure if none).
std::string op_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const OpError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no OpError";
  return "";
}

TEST(OpUtil, ErrorsNameTheNodeItsOpTypeAndTheProblem) {
  Node n = node_of("Relu", "act_3");
  EXPECT_EQ(node_error(n, "something is off"), "node 'act_3' (Relu): something is off");
  EXPECT_EQ(op_error([&] { fail(n, "bad"); }), "node 'act_3' (Relu): bad");
}

// Callers that catch an operator's error and name the node (the interpreter,
// constant folding, lowering) name it once.
TEST(OpUtil, NodeErrorOnceNamesTheNodeOnce) {
  Node n = node_of("Relu", "act_3");
  EXPECT_EQ(node_error_once(n, "bad input"), "node 'act_3' (Relu): bad input");
  EXPECT_EQ(node_error_once(n, node_error(n, "bad input")), "node 'act_3' (Relu): bad input");
  Node other = node_of("Relu", "act_4");
  EXPECT_EQ(node_error_once(n, node_error(other, "x")),
            "node 'act_3' (Relu): node 'act_4' (Relu): x");
}

TEST(OpUtil, AttributesFallBackToTheirDefaults) {
  Node n = node_of("Gemm", "g",
                   {{"alpha", 0.5f},
                    {"transA", int64_t{1}},
                    {"mode", std::string("x")},
                    {"perm", std::vector<int64_t>{1, 0}}});
  EXPECT_EQ(attr_int(n, "transA", 0), 1);
  EXPECT_EQ(attr_int(n, "transB", 7), 7);
  EXPECT_FLOAT_EQ(attr_float(n, "alpha", 1.0f), 0.5f);
  EXPECT_FLOAT_EQ(attr_float(n, "beta", 2.0f), 2.0f);
  EXPECT_EQ(attr_string(n, "mode", "NOTSET"), "x");
  EXPECT_EQ(attr_string(n, "auto_pad", "NOTSET"), "NOTSET");
  EXPECT_THAT(attr_ints(n, "perm", {}), ElementsAre(1, 0));
  EXPECT_THAT(attr_ints(n, "pads", {0, 0, 0, 0}), ElementsAre(0, 0, 0, 0));
  // Without a default, absence is visible.
  ASSERT_TRUE(attr_ints(n, "perm").has_value());
  EXPECT_THAT(*attr_ints(n, "perm"), ElementsAre(1, 0));
  EXPECT_FALSE(attr_ints(n, "axes").has_value());
}

TEST(OpUtil, RequiredInputsNameTheNodeWhenMissing) {
  Node n = node_of("Clip", "clip_1");
  Initializer x = test::make_tensor("float32", {2});
  std::vector<const Initializer*> inputs = {&x, nullptr};
  EXPECT_EQ(&required_input(n, inputs, 0), &x);
  EXPECT_EQ(optional_input(inputs, 0), &x);
  EXPECT_EQ(optional_input(inputs, 1), nullptr);  // omitted
  EXPECT_EQ(optional_input(inputs, 5), nullptr);  // past the end
  EXPECT_EQ(op_error([&] { required_input(n, inputs, 1); }),
            "node 'clip_1' (Clip): input 1 is missing");
  EXPECT_EQ(op_error([&] { required_input(n, inputs, 2); }),
            "node 'clip_1' (Clip): input 2 is missing");

  ComputeInputs in;
  in.tensors = {ir::placeholder({ir::Expr(int64_t{2})}, ir::DataType::f32(), "x"), nullptr};
  in.constants = {nullptr, &x};
  EXPECT_EQ(required_tensor(n, in, 0)->name, "x");
  EXPECT_EQ(op_error([&] { required_tensor(n, in, 1); }),
            "node 'clip_1' (Clip): input 1 is missing");
  EXPECT_EQ(const_input(in, 0), nullptr);
  EXPECT_EQ(const_input(in, 1), &x);
  EXPECT_EQ(const_input(in, 2), nullptr);
}

TEST(OpUtil, RequireF32AndIntegerInputs) {
  Node n = node_of("Conv", "c");
  Initializer i64 = test::tensor_of<int64_t>({2}, {3, -4});
  Initializer i32 = test::tensor_of<int32_t>({1}, {9});
  Initializer f = test::tensor_of<float>({1}, {1.5f});
  EXPECT_NO_THROW(require_f32(n, f, "X"));
  EXPECT_EQ(op_error([&] { require_f32(n, i64, "W"); }),
            "node 'c' (Conv): W has dtype int64; only float32 is supported");
  EXPECT_THAT(to_ints(n, i64), ElementsAre(3, -4));
  EXPECT_THAT(to_ints(n, i32), ElementsAre(9));
  EXPECT_THAT(op_error([&] { to_ints(n, f); }), StartsWith("node 'c' (Conv): expected an int64"));
  EXPECT_THAT(to_doubles(n, i64), ElementsAre(3.0, -4.0));
}

TEST(OpUtil, NormalizeAxisAcceptsMinusRankToRankMinusOne) {
  Node n = node_of("Softmax", "sm");
  EXPECT_EQ(normalize_axis(n, 0, 3), 0);
  EXPECT_EQ(normalize_axis(n, 2, 3), 2);
  EXPECT_EQ(normalize_axis(n, -1, 3), 2);
  EXPECT_EQ(normalize_axis(n, -3, 3), 0);
  EXPECT_EQ(op_error([&] { normalize_axis(n, 3, 3); }),
            "node 'sm' (Softmax): axis 3 is out of range for rank 3");
  EXPECT_EQ(op_error([&] { normalize_axis(n, -4, 3); }),
            "node 'sm' (Softmax): axis -4 is out of range for rank 3");
  EXPECT_THAT(op_error([&] { normalize_axis(n, 0, 0); }), HasSubstr("out of range for rank 0"));
}

TEST(OpUtil, HostTensorStrides) {
  EXPECT_THAT(strides_of({2, 3, 4}), ElementsAre(12, 4, 1));
  EXPECT_THAT(strides_of({5}), ElementsAre(1));
  EXPECT_TRUE(strides_of({}).empty());
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(numel({}), 1);
  Initializer t = make_tensor("int32", {2, 3});
  EXPECT_EQ(t.type.dtype, "int32");
  EXPECT_EQ(t.data.size(), 6 * sizeof(int32_t));
  data_of<int32_t>(t)[5] = 42;
  EXPECT_EQ(t.as<int32_t>()[5], 42);
}

TEST(OpUtil, BroadcastShapesAndStrides) {
  Node n = node_of("Add", "add");
  EXPECT_THAT(broadcast_shapes(n, {{2, 1, 4}, {3, 1}, {}}), ElementsAre(2, 3, 4));
  EXPECT_EQ(op_error([&] {
              broadcast_shapes(n, {{2, 3}, {4, 3}});
            }),
            "node 'add' (Add): shapes [2, 3] and [4, 3] do not broadcast");

  // Unidirectional: 0 along broadcast and missing leading dims.
  EXPECT_THAT(broadcast_strides(n, {3, 1}, {2, 3, 4}, "B"), ElementsAre(0, 1, 0));
  EXPECT_THAT(broadcast_strides(n, {3, 4}, {2, 3, 4}, "B"), ElementsAre(0, 4, 1));
  EXPECT_THAT(broadcast_strides(n, {1}, {5}, "B"), ElementsAre(0));
  EXPECT_EQ(op_error([&] {
              broadcast_strides(n, {3}, {2, 4}, "Scale");
            }),
            "node 'add' (Add): Scale of shape [3] does not broadcast to [2, 4]");
  EXPECT_THAT(op_error([&] {
                broadcast_strides(n, {1, 2, 4}, {2, 4}, "B");
              }),
              HasSubstr("B of shape [1, 2, 4] does not broadcast to [2, 4]"));

  // Offsets of every input element that each output element reads.
  std::vector<std::vector<int64_t>> offs;
  for_each_broadcast({2, 3}, {{2, 1}, {3}},
                     [&](int64_t, const std::vector<int64_t>& o) { offs.push_back(o); });
  EXPECT_EQ(offs,
            (std::vector<std::vector<int64_t>>{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}));
}

TEST(OpUtil, WindowErrorsUseTheSameFormat) {
  Node pool = node_of("MaxPool", "pool_1");
  EXPECT_EQ(op_error([&] {
              pool_window(pool, {4, 4});
            }),
            "node 'pool_1' (MaxPool): kernel_shape is required");
  Node ok = node_of("MaxPool", "pool_2",
                    {{"kernel_shape", std::vector<int64_t>{3, 3}},
                     {"strides", std::vector<int64_t>{2, 2}},
                     {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Window w = pool_window(ok, {7, 8});
  EXPECT_THAT(w.out, ElementsAre(4, 4));
  EXPECT_THAT(w.pad_begin, ElementsAre(1, 1));
}

}  // namespace
}  // namespace kiln::graph::op_util
