#include "ir/expr.h"

#include <gtest/gtest.h>

#include "ir/tensor.h"

using namespace kiln::ir;

TEST(Expr, ImmediateTakesTheOtherOperandsType) {
  Var x("x", DataType::f32());
  Expr e = x + 1;
  EXPECT_EQ(e.dtype(), DataType::f32());
  auto* add = e.as<AddNode>();
  ASSERT_NE(add, nullptr);
  EXPECT_NE(add->b.as<FloatImmNode>(), nullptr);
}

TEST(Expr, ComparisonIsBool) {
  Var i("i");
  EXPECT_TRUE((i < 4).dtype().is_bool());
}

TEST(DataType, RoundTripsThroughText) {
  for (auto t : {DataType::f32(), DataType::i64(8), DataType::u8(), DataType::bf16(),
                 DataType::boolean(4), DataType::f16(16), DataType::i8(64)}) {
    EXPECT_EQ(DataType::parse(t.str()), t) << t.str();
  }
  EXPECT_THROW(DataType::parse("float7"), std::invalid_argument);
}

TEST(Tensor, ComputeRecordsAxesAndReduction) {
  Tensor A = placeholder({4, 8}, DataType::f32(), "A");
  IterVar k = reduce_axis(8, "k");
  Tensor B = compute(
      {4}, [&](const std::vector<Var>& i) { return sum(at(A, i[0], k->var), {k}); }, "B");
  EXPECT_EQ(B->axis.size(), 1u);
  EXPECT_EQ(B->reduce_axis.size(), 1u);
  auto order = post_order({B});
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], A);
}
