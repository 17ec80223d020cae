// import_onnx on well-formed models built in C++: graph structure, inferred
// shapes, initializer data, bound dynamic axes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"

using kiln::frontend::import_onnx;
using kiln::test::OnnxBuilder;
using kiln::test::ramp;
using ::testing::ElementsAre;

namespace {

using Shape = std::vector<int64_t>;

// The inferred shape of a value; a failure (not a crash) when it is unknown.
Shape shape_of(const kiln::graph::Graph& g, const std::string& value) {
  const kiln::graph::TensorType* t = g.type_of(value);
  if (!t) ADD_FAILURE() << "no inferred type for '" << value << "'";
  return t ? t->shape : Shape{-1};
}

// x[1,3,8,8] -> Conv(3x3, pad 1) -> Relu -> GlobalAveragePool -> Flatten
// -> Gemm(transB) -> y[1,10]. The conv weight is also listed as a graph input
// (as IR < 4 exporters do), which must not make it a runtime input.
OnnxBuilder conv_relu_gemm() {
  OnnxBuilder b;
  b.input("x", {"1", "3", "8", "8"});
  b.input("conv.w", {"4", "3", "3", "3"});
  b.output("y", {"1", "10"});
  b.init_f32("conv.w", {4, 3, 3, 3}, ramp(108));
  b.init_f32("conv.b", {4}, {0.5f, -0.5f, 1.f, 2.f});
  b.init_f32("fc.w", {10, 4}, ramp(40));
  b.init_f32("fc.b", {10}, ramp(10, 1.f));
  auto* conv = b.node("Conv", "conv1", {"x", "conv.w", "conv.b"}, {"c"});
  OnnxBuilder::attr_ints(conv, "kernel_shape", {3, 3});
  OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  b.node("Relu", "relu1", {"c"}, {"r"});
  b.node("GlobalAveragePool", "gap", {"r"}, {"p"});
  OnnxBuilder::attr_int(b.node("Flatten", "flat", {"p"}, {"f"}), "axis", 1);
  auto* gemm = b.node("Gemm", "fc", {"f", "fc.w", "fc.b"}, {"y"});
  OnnxBuilder::attr_int(gemm, "transB", 1);
  OnnxBuilder::attr_float(gemm, "alpha", 1.0f);
  return b;
}

TEST(ImportOnnx, ConvReluGemmStructure) {
  kiln::graph::Graph g = import_onnx(conv_relu_gemm().write("conv_relu_gemm.onnx"));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "x");
  EXPECT_EQ(g.inputs[0].type.dtype, "float32");
  EXPECT_THAT(g.inputs[0].type.shape, ElementsAre(1, 3, 8, 8));
  EXPECT_THAT(g.outputs, ElementsAre("y"));
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op_type + ":" + n.name);
  EXPECT_THAT(ops, ElementsAre("Conv:conv1", "Relu:relu1", "GlobalAveragePool:gap", "Flatten:flat",
                               "Gemm:fc"));
  const auto* conv = g.find_node("conv1");
  ASSERT_NE(conv, nullptr);
  EXPECT_THAT(conv->inputs, ElementsAre("x", "conv.w", "conv.b"));
  EXPECT_THAT(conv->outputs, ElementsAre("c"));
  EXPECT_EQ(conv->attr<std::vector<int64_t>>("pads"), (Shape{1, 1, 1, 1}));
  EXPECT_EQ(g.find_node("fc")->attr<int64_t>("transB"), 1);
  EXPECT_EQ(g.find_node("fc")->attr<float>("alpha"), 1.0f);
  EXPECT_FALSE(g.find_node("fc")->attr<int64_t>("transA").has_value());
  EXPECT_THROW(conv->attr<float>("pads"), std::logic_error);
}

TEST(ImportOnnx, ConvReluGemmInferredShapes) {
  kiln::graph::Graph g = import_onnx(conv_relu_gemm().write("conv_relu_gemm_shapes.onnx"));
  const std::map<std::string, Shape> want = {{"x", {1, 3, 8, 8}}, {"c", {1, 4, 8, 8}},
                                             {"r", {1, 4, 8, 8}}, {"p", {1, 4, 1, 1}},
                                             {"f", {1, 4}},       {"y", {1, 10}}};
  for (const auto& [name, shape] : want) {
    const auto* t = g.type_of(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    EXPECT_EQ(t->dtype, "float32") << name;
  }
}

TEST(ImportOnnx, ConvReluGemmInitializers) {
  kiln::graph::Graph g = import_onnx(conv_relu_gemm().write("conv_relu_gemm_init.onnx"));
  ASSERT_EQ(g.initializers.size(), 4u);
  const auto& w = g.initializers.at("conv.w");
  EXPECT_EQ(w.type.dtype, "float32");
  EXPECT_THAT(w.type.shape, ElementsAre(4, 3, 3, 3));
  EXPECT_EQ(w.as<float>(), ramp(108));
  EXPECT_THAT(g.initializers.at("conv.b").as<float>(), ElementsAre(0.5f, -0.5f, 1.f, 2.f));
  EXPECT_EQ(g.initializers.at("fc.b").as<float>(), ramp(10, 1.f));
  EXPECT_THROW(w.as<int64_t>(), std::logic_error);
  EXPECT_THAT(shape_of(g, "fc.w"), ElementsAre(10, 4));
}

// x[N,16] -> MatMul(W[16,8]) -> Add(b[8]) -> y[N,8], N dynamic.
OnnxBuilder matmul_add() {
  OnnxBuilder b;
  b.input("x", {"N", "16"});
  b.output("y", {"N", "8"});
  b.init_f32("W", {16, 8}, ramp(128));
  b.init_f32("b", {8}, ramp(8));
  b.node("MatMul", "mm", {"x", "W"}, {"h"});
  b.node("Add", "add", {"h", "b"}, {"y"});
  return b;
}

TEST(ImportOnnx, DynamicBatchBoundByInputShapes) {
  kiln::graph::Graph g = import_onnx(matmul_add().write("matmul_add.onnx"), {{"x", {4, 16}}});
  EXPECT_THAT(g.inputs[0].type.shape, ElementsAre(4, 16));
  EXPECT_THAT(shape_of(g, "h"), ElementsAre(4, 8));
  // The declared output [N, 8] now has the bound batch.
  EXPECT_THAT(shape_of(g, "y"), ElementsAre(4, 8));
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(ImportOnnx, StaticAxesMayBeRestated) {
  kiln::graph::Graph g = import_onnx(conv_relu_gemm().write("restate.onnx"), {{"x", {1, 3, 8, 8}}});
  EXPECT_THAT(shape_of(g, "y"), ElementsAre(1, 10));
}

// Constant nodes become initializers (value tensor and value_ints forms);
// nameless nodes get "<op>_<index>"; Reshape's target shape is inferred
// through the constant.
TEST(ImportOnnx, ConstantsAndNamelessNodes) {
  OnnxBuilder b;
  b.input("x", {"2", "6"});
  b.output("y", {"3", "4"});
  auto* c = b.node("Constant", "", {}, {"shape"});
  OnnxBuilder::attr_ints(c, "value_ints", {3, 4});
  b.init_i64("unused_i64", {2}, {7, -9});
  b.node("Reshape", "", {"x", "shape"}, {"y"});
  kiln::graph::Graph g = import_onnx(b.write("constants.onnx"));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "Reshape_1");
  EXPECT_THAT(g.initializers.at("shape").as<int64_t>(), ElementsAre(3, 4));
  EXPECT_THAT(g.initializers.at("unused_i64").as<int64_t>(), ElementsAre(7, -9));
  EXPECT_THAT(shape_of(g, "y"), ElementsAre(3, 4));
  EXPECT_THAT(shape_of(g, "shape"), ElementsAre(2));
}

TEST(ImportOnnx, AcceptsOpsetsElevenToEighteen) {
  for (int64_t opset : {11, 13, 17, 18}) {
    OnnxBuilder b(opset);
    b.input("x", {"2", "3"});
    b.output("y", {"2", "3"});
    b.node("Relu", "relu", {"x"}, {"y"});
    kiln::graph::Graph g = import_onnx(b.write("opset" + std::to_string(opset) + ".onnx"));
    EXPECT_THAT(shape_of(g, "y"), ElementsAre(2, 3)) << "opset " << opset;
  }
}

// torch.chunk(x, 2, dim=1) as PyTorch 1.13 exports it: the split points are
// Shape -> Gather -> Add -> Div -> Mul, and ONNX 1.12's data propagation stops
// at Div, leaving both Slice outputs untyped. The import folds those small
// constant nodes and infers again.
TEST(ImportOnnx, ChunkSplitPointsFromShapeArithmetic) {
  for (int64_t c : {6, 7, 1}) {
    OnnxBuilder b(13);
    b.input("x", {"1", std::to_string(c), "5", "3"});
    b.output("y0", {"a", "b", "c", "d"});
    b.output("y1", {"a", "b", "c", "d"});
    b.init_i64("axis", {1}, {1});
    b.init_i64("zero", {1}, {0});
    b.init_i64("one", {1}, {1});
    b.init_i64("two", {1}, {2});
    b.node("Shape", "shape", {"x"}, {"s"});
    OnnxBuilder::attr_int(b.node("Gather", "gather", {"s", "axis"}, {"dim"}), "axis", 0);
    b.node("Add", "add", {"dim", "one"}, {"dim1"});
    b.node("Div", "div", {"dim1", "two"}, {"half"});
    b.node("Mul", "mul0", {"half", "one"}, {"end0"});
    b.node("Mul", "mul1", {"half", "two"}, {"end1"});
    b.node("Slice", "slice0", {"x", "zero", "end0", "axis"}, {"s0"});
    b.node("Slice", "slice1", {"x", "end0", "end1", "axis"}, {"s1"});
    b.node("Relu", "relu0", {"s0"}, {"y0"});
    b.node("Relu", "relu1", {"s1"}, {"y1"});
    kiln::graph::Graph g = import_onnx(b.write("chunk" + std::to_string(c) + ".onnx"));
    int64_t first = (c + 1) / 2;
    EXPECT_THAT(shape_of(g, "s0"), ElementsAre(1, first, 5, 3)) << "C=" << c;
    EXPECT_THAT(shape_of(g, "y1"), ElementsAre(1, c - first, 5, 3)) << "C=" << c;
    EXPECT_THAT(g.initializers.at("end0").as<int64_t>(), ElementsAre(first));
    // Only the data-dependent nodes are left.
    ASSERT_EQ(g.nodes.size(), 4u) << "C=" << c;
    for (const auto& n : g.nodes) EXPECT_TRUE(n.op_type == "Slice" || n.op_type == "Relu");
  }
}

// A value that only folding types (a Reshape by a Div's result, which ONNX's
// data propagation does not follow) and that a Shape then reads: the Shape
// folds from the new initializer's type in the next round (Swin's window
// masks: Shape of a folded Add).
TEST(ImportOnnx, ShapeOfAValueFoldedInAnEarlierRound) {
  OnnxBuilder b(13);
  b.input("x", {"1", "6"});
  b.output("y", {"a", "b"});
  b.init_f32("data", {6}, {1, 2, 3, 4, 5, 6});
  b.init_i64("dims2", {2}, {4, 6});
  b.init_i64("two", {1}, {2});
  b.node("Div", "div", {"dims2", "two"}, {"dims"});
  b.node("Reshape", "reshape_data", {"data", "dims"}, {"z"});
  b.node("Shape", "shape", {"z"}, {"s"});
  b.node("Reshape", "reshape_x", {"x", "s"}, {"y"});
  kiln::graph::Graph g = import_onnx(b.write("shape_of_folded.onnx"));
  EXPECT_THAT(shape_of(g, "y"), ElementsAre(2, 3));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "reshape_x");
}

}  // namespace
