// Every bad input ends in one ImportError whose message names the file and
// the offending node, tensor or input (design invariant 5).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"

using kiln::frontend::import_onnx;
using kiln::frontend::ImportError;
using kiln::frontend::InputShapes;
using kiln::test::OnnxBuilder;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// The message of the ImportError that importing `path` throws ("" if none).
std::string import_error(const std::string& path, const InputShapes& shapes = {}) {
  try {
    import_onnx(path, shapes);
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "importing " << path << " did not throw";
  return "";
}

OnnxBuilder relu_model(int64_t opset = 17) {
  OnnxBuilder b(opset);
  b.input("x", {"1", "4"});
  b.output("y", {"1", "4"});
  b.init_f32("w", {1, 4}, {1, 2, 3, 4});
  b.node("Mul", "scale", {"x", "w"}, {"s"});
  b.node("Relu", "relu", {"s"}, {"y"});
  return b;
}

TEST(ImportErrors, MissingFile) {
  const std::string path = "/nonexistent/kiln/model.onnx";
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("cannot open file"), HasSubstr("No such file")));
}

TEST(ImportErrors, EmptyFile) {
  const std::string path = OnnxBuilder::write_bytes("empty.onnx", "");
  EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("empty")));
}

TEST(ImportErrors, TruncatedFile) {
  const std::string bytes = relu_model().bytes();
  // Cut at several points: each must fail cleanly, never import half a model.
  for (size_t cut : {bytes.size() / 4, bytes.size() / 2, bytes.size() - 3}) {
    const std::string path =
        OnnxBuilder::write_bytes("truncated" + std::to_string(cut) + ".onnx", bytes.substr(0, cut));
    EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("truncated"))) << cut;
  }
}

TEST(ImportErrors, NotOnnx) {
  std::mt19937 rng(42);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  const std::string path = OnnxBuilder::write_bytes("noise.onnx", noise);
  EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("ONNX model")));
  // Text that happens to parse as protobuf fields is still not a model.
  const std::string text = OnnxBuilder::write_bytes("text.onnx", "hello, not a model\n");
  EXPECT_THAT(import_error(text), AllOf(HasSubstr(text), HasSubstr("ONNX model")));
}

TEST(ImportErrors, EveryUnsupportedOperatorInOneMessage) {
  OnnxBuilder b;
  b.input("x", {"1", "4"});
  b.output("y", {"1", "4"});
  b.node("FancyOp", "fancy1", {"x"}, {"a"});
  b.node("Relu", "relu", {"a"}, {"b"});
  b.node("OtherOp", "", {"b"}, {"c"});
  b.node("FusedGelu", "ms", {"c"}, {"y"})->set_domain("com.microsoft");
  const std::string path = b.write("unsupported.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("3 node(s)"), HasSubstr("'fancy1' (FancyOp)"),
                    HasSubstr("'OtherOp_2' (OtherOp)"), HasSubstr("'ms' (com.microsoft.FusedGelu)"),
                    Not(HasSubstr("Relu"))));
}

// One value listed twice as a graph output: one error naming it (the package
// would have two outputs on one tensor, which the runtime calls corrupt).
TEST(ImportErrors, AGraphOutputListedTwice) {
  OnnxBuilder b = relu_model();
  b.output("y", {"1", "4"});
  const std::string path = b.write("twice.onnx");
  std::string e = import_error(path);
  EXPECT_THAT(e, AllOf(HasSubstr(path), HasSubstr("graph output 'y' is listed twice")));
}

// Weights in an external data file: one error saying so and how to inline
// them, not a checker or inference message about something else.
TEST(ImportErrors, ExternalDataIsNamed) {
  OnnxBuilder b(17);
  b.input("x", {"1", "4"});
  b.output("y", {"1", "4"});
  onnx::TensorProto* w = b.init_f32("w", {1, 4}, {1, 2, 3, 4});
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  b.node("Mul", "scale", {"x", "w"}, {"y"});
  const std::string path = b.write("external.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("external data: initializer 'w'"),
                    HasSubstr("'weights.bin'"), HasSubstr("save_as_external_data=False")));
}

// Shapes whose element count overflows int64 (found by the fuzzer: a signed
// overflow in TensorType::num_elements) are one ImportError, never UB.
TEST(ImportErrors, ShapesWhoseSizeOverflowsAreNamed) {
  const int64_t huge = int64_t{1} << 40;
  {
    OnnxBuilder b(17);
    b.input("x", {"1", "4"});
    b.output("y", {"1", "4"});
    onnx::TensorProto* w = b.init_f32("w", {1, 4}, {1, 2, 3, 4});
    w->clear_dims();
    for (int64_t d : {huge, huge, int64_t{4}}) w->add_dims(d);
    b.node("Mul", "scale", {"x", "w"}, {"y"});
    const std::string path = b.write("huge_initializer.onnx");
    // ONNX's checker sees the count wrap to 0 first.
    EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("tensor name: w")));
  }
  {
    OnnxBuilder b(17);
    b.input("x", {std::to_string(huge), std::to_string(huge), "4"});
    b.output("y", {std::to_string(huge), std::to_string(huge), "4"});
    b.node("Relu", "relu", {"x"}, {"y"});
    const std::string path = b.write("huge_input.onnx");
    EXPECT_THAT(import_error(path),
                AllOf(HasSubstr(path), HasSubstr("'x'"), HasSubstr("too large")));
  }
  {
    OnnxBuilder b(17);
    b.input("x", {"1", "4"});
    b.output("y", {"-1", "-1", "4"});
    b.init_i64("shape", {3}, {huge, huge, 4});
    b.node("Expand", "expand", {"x", "shape"}, {"y"});
    const std::string path = b.write("huge_expand.onnx");
    EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("too large")));
  }
  {
    OnnxBuilder b(17);
    b.input("x", {"1", "4"});
    b.output("y", {"1", "4"});
    onnx::TensorProto* w = b.init_f32("w", {1, 4}, {1, 2, 3, 4});
    w->clear_dims();
    for (int64_t d : {int64_t{-1}, int64_t{-4}}) w->add_dims(d);
    b.node("Mul", "scale", {"x", "w"}, {"y"});
    const std::string path = b.write("negative_initializer.onnx");
    EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("scale")));
  }
}

// Window attributes ONNX's shape inference divides by: a zero stride,
// dilation or kernel size, or group, is one ImportError naming the node, not
// SIGFPE inside libonnx (found by fuzz/onnx_import_fuzzer.cc); a negative pad
// too.
TEST(ImportErrors, ZeroStridesDilationsKernelsAndGroupsAreNamed) {
  struct Case {
    std::string op, attr;
    std::vector<int64_t> ints;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"Conv", "strides", {2, 0}, "attribute strides has 0 at position 1"},
      {"Conv", "dilations", {0, 1}, "attribute dilations has 0 at position 0"},
      {"Conv", "pads", {0, -1, 0, 0}, "attribute pads has -1 at position 1"},
      {"MaxPool", "strides", {0, 0}, "attribute strides has 0 at position 0"},
      {"AveragePool", "kernel_shape", {2, 0}, "attribute kernel_shape has 0 at position 1"},
      {"Conv", "group", {0}, "attribute group is 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + c.attr);
    OnnxBuilder b;
    b.input("x", {"1", "4", "8", "8"});
    b.output("y", {"1", "4", "4", "4"});
    onnx::NodeProto* n = nullptr;
    if (c.op == "Conv") {
      b.init_f32("w", {4, 4, 2, 2}, std::vector<float>(64, 0.5f));
      n = b.node("Conv", "bad_window", {"x", "w"}, {"y"});
    } else {
      n = b.node(c.op, "bad_window", {"x"}, {"y"});
    }
    if (c.op != "Conv" && c.attr != "kernel_shape")
      OnnxBuilder::attr_ints(n, "kernel_shape", {2, 2});
    if (c.attr == "group")
      OnnxBuilder::attr_int(n, "group", c.ints[0]);
    else
      OnnxBuilder::attr_ints(n, c.attr, c.ints);
    const std::string path = b.write("window.onnx");
    EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("'bad_window' (" + c.op + ")"),
                                          HasSubstr(c.message)));
  }
}

// Window attributes whose lengths disagree with the spatial axes, or a data
// input of the wrong rank: ONNX's shape inference would read past its arrays
// and crash (found by fuzz/onnx_import_fuzzer.cc); one ImportError instead.
TEST(ImportErrors, WindowAttributeLengthsMustMatchTheSpatialAxes) {
  struct Case {
    std::vector<std::string> x_dims;
    std::string attr;
    std::vector<int64_t> ints;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"1", "4", "8", "8"},
       "strides",
       {2},
       "attribute strides is for 1 spatial axes but input 'x'"},
      {{"1", "4", "8", "8"}, "pads", {1, 1, 1}, "attribute pads has 3 values"},
      {{"1", "4", "8"},
       "strides",
       {1, 1},
       "attribute strides is for 2 spatial axes but input 'x' has 1"},
      {{"1", "4"}, "strides", {1, 1}, "input 'x' has rank 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    OnnxBuilder b;
    b.input("x", c.x_dims);
    b.output("y", {"1", "4", "4", "4"});
    b.init_f32("w", {4, 4, 2, 2}, std::vector<float>(64, 0.5f));
    onnx::NodeProto* n = b.node("Conv", "bad_window", {"x", "w"}, {"y"});
    OnnxBuilder::attr_ints(n, c.attr, c.ints);
    const std::string path = b.write("ranks.onnx");
    EXPECT_THAT(import_error(path),
                AllOf(HasSubstr(path), HasSubstr("'bad_window' (Conv)"), HasSubstr(c.message)));
  }
}

TEST(ImportErrors, OpsetOutOfRange) {
  for (int64_t opset : {19, 30}) {
    const std::string path = relu_model(opset).write("opset_bad" + std::to_string(opset) + ".onnx");
    EXPECT_THAT(import_error(path),
                AllOf(HasSubstr(path), HasSubstr("opset " + std::to_string(opset) + " is not"),
                      HasSubstr("1 to 18")));
  }
}

// An old-opset graph whose output no node writes (found by
// fuzz/onnx_import_fuzzer.cc: ONNX's version converter dereferenced a null
// value on it; ONNX 1.12's checker lets it through): one error naming it.
TEST(ImportErrors, OldOpsetWithAnUndefinedOutput) {
  OnnxBuilder b(7);
  b.input("x", {"1", "4"});
  b.output("nowhere", {"1", "4"});
  b.node("Relu", "relu", {"x"}, {"y"});
  const std::string path = b.write("opset7_undefined_output.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("graph output 'nowhere' is not defined")));
}

// Opsets older than 11 come up through ONNX's version converter: the graph
// is the one an opset-11 export would give.
TEST(ImportErrors, OldOpsetsAreConverted) {
  for (int64_t opset : {7, 9, 10}) {
    const std::string path = relu_model(opset).write("opset_old" + std::to_string(opset) + ".onnx");
    kiln::graph::Graph g = import_onnx(path);
    ASSERT_EQ(g.nodes.size(), 2u) << opset;
    EXPECT_EQ(g.nodes[0].op_type, "Mul");
    EXPECT_EQ(g.nodes[1].op_type, "Relu");
  }
  // Upsample (opset 9) has no opset-11 form: the converter writes Resize.
  OnnxBuilder b(9);
  b.input("x", {"1", "1", "2", "2"});
  b.output("y", {"1", "1", "4", "4"});
  b.init_f32("scales", {4}, {1, 1, 2, 2});
  b.node("Upsample", "up", {"x", "scales"}, {"y"});
  kiln::graph::Graph g = import_onnx(b.write("opset9_upsample.onnx"));
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Resize");
  EXPECT_EQ(g.value_info.at("y").shape, (std::vector<int64_t>{1, 1, 4, 4}));
}

TEST(ImportErrors, CheckerFailureNamesTheNode) {
  OnnxBuilder b;
  b.input("x", {"1", "4"});
  b.output("y", {"1", "4"});
  b.node("Conv", "lonely_conv", {"x"}, {"y"});  // Conv needs a weight input
  const std::string path = b.write("checker.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("checker"), HasSubstr("lonely_conv")));
}

TEST(ImportErrors, ShapeInferenceFailureNamesTheNode) {
  OnnxBuilder b;
  b.input("x", {"2", "3"});
  b.output("y", {"2", "5"});
  b.init_f32("w", {4, 5}, std::vector<float>(20, 1.f));
  b.node("MatMul", "bad_mm", {"x", "w"}, {"y"});  // 3 != 4
  const std::string path = b.write("infer.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("shape inference"), HasSubstr("bad_mm")));
}

OnnxBuilder two_dynamic_inputs() {
  OnnxBuilder b;
  b.input("ids", {"batch", "seq"});
  b.input("mask", {"batch", "128"});
  b.output("y", {"batch", "128"});
  b.node("Add", "add", {"ids", "mask"}, {"y"});
  return b;
}

TEST(ImportErrors, UnboundDynamicAxesAreAllNamed) {
  const std::string path = two_dynamic_inputs().write("unbound.onnx");
  EXPECT_THAT(import_error(path, {{"ids", {1, 128}}}),
              AllOf(HasSubstr(path), HasSubstr("input 'mask' axis 0 ('batch') is dynamic"),
                    Not(HasSubstr("'ids'")), HasSubstr("--input-shapes")));
  EXPECT_THAT(import_error(path), AllOf(HasSubstr("input 'ids' axis 0 ('batch')"),
                                        HasSubstr("input 'ids' axis 1 ('seq')"),
                                        HasSubstr("input 'mask' axis 0 ('batch')")));
}

TEST(ImportErrors, InputShapesKeyNamingNoInput) {
  const std::string path = two_dynamic_inputs().write("misnamed.onnx");
  EXPECT_THAT(import_error(path, {{"input_ids", {1, 128}}, {"mask", {1, 128}}}),
              AllOf(HasSubstr(path), HasSubstr("'input_ids'"), HasSubstr("not an input"),
                    HasSubstr("'ids', 'mask'")));
}

TEST(ImportErrors, InputShapesRankAndStaticAxisMismatch) {
  const std::string path = two_dynamic_inputs().write("mismatch.onnx");
  EXPECT_THAT(import_error(path, {{"ids", {1, 128, 1}}, {"mask", {1, 128}}}),
              AllOf(HasSubstr(path), HasSubstr("input 'ids' has rank 2"), HasSubstr("rank 3")));
  EXPECT_THAT(import_error(path, {{"ids", {1, 128}}, {"mask", {1, 64}}}),
              HasSubstr("input 'mask' axis 1 is fixed at 128 but --input-shapes gives 64"));
}

TEST(ImportErrors, BoundShapesThatDisagreeFailInference) {
  const std::string path = two_dynamic_inputs().write("disagree.onnx");
  // Add broadcasts [1,128] with [2,128] fine, but [3,128] with [2,128] not.
  EXPECT_THAT(import_error(path, {{"ids", {3, 128}}, {"mask", {2, 128}}}),
              AllOf(HasSubstr(path), HasSubstr("add")));
}

}  // namespace

namespace {

// ONNX 1.12 (Debian 12) knows opsets up to 17. An opset-18 model whose
// operators did not change in 18 imports (AcceptsOpsetsElevenToEighteen);
// one that uses an operator redefined in 18 (ReduceMean takes its axes as
// an input there) must say why, not fail deep in the checker.
TEST(ImportErrors, Opset18OperatorsNewerThanTheOnnxLibrary) {
  OnnxBuilder b(18);
  b.input("x", {"2", "3"});
  b.output("y", {"2", "1"});
  b.init_i64("axes", {1}, {1});
  b.node("ReduceMean", "mean", {"x", "axes"}, {"y"});
  const std::string path = b.write("opset18_reduce.onnx");
  EXPECT_THAT(import_error(path), AllOf(HasSubstr(path), HasSubstr("'mean' (ReduceMean)")));
}

}  // namespace
