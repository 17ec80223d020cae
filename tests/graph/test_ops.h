// Operators that exist only in the graph tests (op types prefixed KilnTest,
// so they never meet a real one): they let the interpreter and the passes be
// tested on their own mechanics, with semantics simple enough to recompute by
// hand in the test.
#pragma once

#include <mutex>
#include <vector>

#include "graph/op_registry.h"
#include "op_harness.h"

namespace kiln::test {

inline void register_test_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    using graph::Initializer;
    using graph::Node;
    using graph::OpDef;
    using graph::OpPattern;
    // y = a * x + b
    OpDef affine{"KilnTestAffine", OpPattern::kElemWise, nullptr, nullptr, {}};
    affine.evaluate = [](const Node& n, const std::vector<const Initializer*>& in) {
      float a = n.attr<float>("a").value_or(1.0f), b = n.attr<float>("b").value_or(0.0f);
      std::vector<float> x = in.at(0)->as<float>();
      for (float& v : x) v = a * v + b;
      return std::vector<Initializer>{tensor_of<float>(in[0]->type.shape, x)};
    };
    graph::register_op(affine);
    // x + y, y of x's shape or of one element
    OpDef add{"KilnTestAdd", OpPattern::kBroadcast, nullptr, nullptr, {}};
    add.evaluate = [](const Node& n, const std::vector<const Initializer*>& in) {
      std::vector<float> x = in.at(0)->as<float>(), y = in.at(1)->as<float>();
      if (y.size() != x.size() && y.size() != 1) throw graph::OpError("KilnTestAdd: shapes differ");
      for (size_t i = 0; i < x.size(); ++i) x[i] += y[y.size() == 1 ? 0 : i];
      return std::vector<Initializer>{tensor_of<float>(in[0]->type.shape, x)};
    };
    graph::register_op(add);
    // The input flattened and repeated `times` times; it "has a kernel", so the
    // constant folder may leave a large one in place.
    OpDef tile{"KilnTestTile", OpPattern::kInjective, nullptr, nullptr, {}};
    tile.evaluate = [](const Node& n, const std::vector<const Initializer*>& in) {
      int64_t times = n.attr<int64_t>("times").value_or(1);
      std::vector<float> x = in.at(0)->as<float>(), y;
      for (int64_t t = 0; t < times; ++t) y.insert(y.end(), x.begin(), x.end());
      return std::vector<Initializer>{tensor_of<float>({static_cast<int64_t>(y.size())}, y)};
    };
    tile.compute = [](const Node& n, const graph::ComputeInputs&,
                      const std::vector<graph::TensorType>&) -> std::vector<ir::Tensor> {
      throw graph::OpError("KilnTestTile has no compute");
    };
    graph::register_op(tile);
    // Two outputs: the first and the second half of a 1-D input.
    OpDef split{"KilnTestSplit2", OpPattern::kInjective, nullptr, nullptr, {}};
    split.evaluate = [](const Node& n, const std::vector<const Initializer*>& in) {
      std::vector<float> x = in.at(0)->as<float>();
      int64_t h = static_cast<int64_t>(x.size() / 2);
      return std::vector<Initializer>{
          tensor_of<float>({h}, std::vector<float>(x.begin(), x.begin() + h)),
          tensor_of<float>({h}, std::vector<float>(x.begin() + h, x.begin() + 2 * h))};
    };
    graph::register_op(split);
    OpDef fail{"KilnTestFail", OpPattern::kOpaque, nullptr, nullptr, {}};
    fail.evaluate = [](const Node&,
                       const std::vector<const Initializer*>&) -> std::vector<Initializer> {
      throw graph::OpError("this operator always fails");
    };
    graph::register_op(fail);
  });
}

}  // namespace kiln::test
