// graph::Graph helpers and the operator support check on hand-built graphs.
#include "graph/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frontend/op_support.h"
#include "graph/op_registry.h"

using namespace kiln;
using ::testing::ElementsAre;

namespace {

TEST(Graph, DtypeSizesAndShapes) {
  EXPECT_EQ(graph::dtype_size("float32"), 4u);
  EXPECT_EQ(graph::dtype_size("int64"), 8u);
  EXPECT_EQ(graph::dtype_size("bool"), 1u);
  EXPECT_THROW(graph::dtype_size("complex64"), std::invalid_argument);
  EXPECT_EQ(graph::shape_str({1, 3, 224, 224}), "[1, 3, 224, 224]");
  EXPECT_EQ(graph::shape_str({}), "[]");
  EXPECT_EQ((graph::TensorType{"float32", {2, 3, 4}}).num_elements(), 24);
  EXPECT_EQ((graph::TensorType{"float32", {}}).num_elements(), 1);
}

TEST(Graph, LookupByName) {
  graph::Graph g;
  g.nodes.push_back({"Relu", "", "r", {"x"}, {"y"}, {}});
  g.value_info["y"] = {"float32", {4}};
  EXPECT_EQ(g.find_node("r")->op_type, "Relu");
  EXPECT_EQ(g.find_node("nope"), nullptr);
  EXPECT_THAT(g.type_of("y")->shape, ElementsAre(4));
  EXPECT_EQ(g.type_of("x"), nullptr);
}

TEST(OpSupport, ListsEveryUnsupportedNode) {
  graph::Graph g;
  g.nodes.push_back({"Conv", "", "conv", {}, {}, {}});
  g.nodes.push_back({"Frobnicate", "", "roi", {}, {}, {}});
  g.nodes.push_back({"Relu", "ai.onnx", "relu", {}, {}, {}});
  g.nodes.push_back({"Conv", "com.example", "custom", {}, {}, {}});
  EXPECT_THAT(frontend::unsupported_nodes(g),
              ElementsAre("'roi' (Frobnicate)", "'custom' (com.example.Conv)"));
}

TEST(OpSupport, CoversTheIssueList) {
  for (const char* op : {"Conv", "ConvTranspose", "Gemm", "MatMul", "LayerNormalization", "Erf",
                         "Softmax", "LogSoftmax", "Resize", "HardSwish", "ConstantOfShape", "Where",
                         "If", "Loop", "Scan", "SequenceAt", "OptionalGetElement"})
    EXPECT_TRUE(frontend::is_supported_op("", op)) << op;
  EXPECT_FALSE(frontend::is_supported_op("", "NotAnOnnxOperator"));
  const auto& ops = frontend::supported_op_types();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
}

// The list is the operator registry's: a newly registered operator is
// supported at once, kiln's internal operators never are.
TEST(OpSupport, FollowsTheOperatorRegistry) {
  for (const std::string& op : graph::registered_op_types())
    EXPECT_EQ(frontend::is_supported_op("", op), op.rfind("kiln.", 0) != 0) << op;
  EXPECT_TRUE(frontend::is_supported_op("", "Constant"));  // becomes an initializer
  EXPECT_FALSE(frontend::is_supported_op("", "kiln.Template"));
}

}  // namespace
