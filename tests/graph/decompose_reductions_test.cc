// decompose_reductions: ReduceL1, ReduceL2, ReduceSumSquare and ReduceMin
// become ReduceSum / ReduceMax with elementwise ops, with the same outputs
// (the interpreter runs the graph before and after) over axes given as an
// attribute or an input, keepdims and negative axes; the reference values
// are checked by hand.
#include "graph/passes/decompose_reductions.h"

#include <gtest/gtest.h>

#include <cmath>

#include "graph/op_registry.h"
#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;
using Ints = std::vector<int64_t>;

TEST(DecomposeReductions, ReferenceValues) {
  graph::Initializer x = test::tensor_of<float>({2, 3}, {3, -4, 0, -1, 2, -2});
  auto eval = [&](const std::string& op) {
    graph::Node n;
    n.op_type = op;
    n.name = op;
    n.inputs = {"x"};
    n.outputs = {"y"};
    n.attrs["axes"] = Ints{1};
    n.attrs["keepdims"] = int64_t{0};
    return graph::get_op(op).evaluate(n, {&x}).at(0).as<float>();
  };
  EXPECT_EQ(eval("ReduceL1"), (std::vector<float>{7, 5}));
  EXPECT_EQ(eval("ReduceL2"), (std::vector<float>{5, 3}));
  EXPECT_EQ(eval("ReduceSumSquare"), (std::vector<float>{25, 9}));
  EXPECT_EQ(eval("ReduceMin"), (std::vector<float>{-4, -2}));
}

TEST(DecomposeReductions, SameOutputsAsTheReference) {
  int seed = 120;
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceMin"})
    for (int64_t keepdims : {0, 1})
      for (bool axes_input : {false, true}) {
        SCOPED_TRACE(std::string(op) + " keepdims " + std::to_string(keepdims) +
                     (axes_input ? " axes input" : " axes attribute"));
        GraphBuilder b(++seed);
        std::string x = b.input("x", {2, 5, 3, 4});
        std::map<std::string, graph::Attribute> attrs = {{"keepdims", keepdims}};
        std::vector<std::string> in = {x};
        if (axes_input)
          in.push_back(b.constant("axes", test::tensor_of<int64_t>({2}, {1, -1})));
        else
          attrs["axes"] = Ints{1, -1};
        b.output(b.node(op, in, attrs));
        b.output(b.node(op, {x}, {{"keepdims", keepdims}}));  // every axis
        graph::Graph before = b.graph();
        graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
          EXPECT_EQ(graph::passes::decompose_reductions(h), 2);
        });
        EXPECT_EQ(test::count_op(g, op), 0);
      }
}

}  // namespace
}  // namespace kiln
