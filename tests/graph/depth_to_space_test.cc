// DepthToSpace (DCR, CRD) and SpaceToDepth: the reference against the ONNX
// spec's examples, and the Reshape -> Transpose -> Reshape rewrite against
// the reference (the interpreter runs the graph before and after).
#include "graph/passes/depth_to_space.h"

#include <gtest/gtest.h>

#include <numeric>

#include "graph/op_registry.h"
#include "graph_builder.h"

namespace kiln {
namespace {

using test::GraphBuilder;

std::vector<float> run(const std::string& op, const std::string& mode, const graph::Initializer& x,
                       int64_t blocksize) {
  graph::Node n;
  n.op_type = op;
  n.name = op;
  n.inputs = {"x"};
  n.outputs = {"y"};
  n.attrs["blocksize"] = blocksize;
  if (!mode.empty()) n.attrs["mode"] = mode;
  return graph::get_op(op).evaluate(n, {&x}).at(0).as<float>();
}

TEST(DepthToSpace, SpecExamples) {
  std::vector<float> v(48);
  std::iota(v.begin(), v.end(), 0.f);
  graph::Initializer x = test::tensor_of<float>({1, 8, 2, 3}, v);
  EXPECT_EQ(run("DepthToSpace", "DCR", x, 2),
            (std::vector<float>{0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                                5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                                31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47}));
  EXPECT_EQ(run("DepthToSpace", "CRD", x, 2),
            (std::vector<float>{0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                                5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                                37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47}));
  // SpaceToDepth undoes DCR's DepthToSpace.
  std::vector<float> wide = run("DepthToSpace", "", x, 2);
  EXPECT_EQ(run("SpaceToDepth", "", test::tensor_of<float>({1, 2, 4, 6}, wide), 2), v);
}

TEST(DepthToSpace, RewriteKeepsTheOutputs) {
  int seed = 140;
  for (const char* mode : {"DCR", "CRD"}) {
    GraphBuilder b(++seed);
    std::string x = b.input("x", {2, 18, 3, 4});
    std::string y =
        b.node("DepthToSpace", {x}, {{"blocksize", int64_t{3}}, {"mode", std::string(mode)}});
    b.output(b.node("Relu", {y}));
    b.output(b.node("SpaceToDepth", {y}, {{"blocksize", int64_t{3}}}));
    graph::Graph before = b.graph();
    graph::Graph g = test::check_pass_preserves(before, b.inputs(), [](graph::Graph& h) {
      EXPECT_EQ(graph::passes::depth_to_space_as_transpose(h), 2);
    });
    EXPECT_EQ(test::count_op(g, "Transpose"), 2);
  }
}

}  // namespace
}  // namespace kiln
