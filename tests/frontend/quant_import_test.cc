// Import of quantized ONNX models: the seven operators are supported, their
// types come through shape inference, and a bad scale or zero point is one
// ImportError naming the file and the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"
#include "frontend/op_support.h"
#include "graph/interpreter.h"

namespace kiln::test {
namespace {

using frontend::import_onnx;
using frontend::ImportError;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string import_error(const std::string& path) {
  try {
    import_onnx(path);
  } catch (const ImportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "importing " << path << " did not throw";
  return "";
}

// An initializer of any element type from raw little-endian bytes.
template <typename T>
void init(OnnxBuilder& b, const std::string& name, const std::vector<int64_t>& dims,
          const std::vector<T>& v, int elem) {
  auto* t = b.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kU8 = onnx::TensorProto::UINT8;
constexpr int kI8 = onnx::TensorProto::INT8;
constexpr int kI32 = onnx::TensorProto::INT32;

// x -> Q (u8) -> DQ ; w s8 per channel -> DQ(axis 0) ; Conv -> y, at `opset`.
OnnxBuilder qdq_conv(int64_t opset, std::vector<float> w_scale = {0.5f, 0.25f}) {
  OnnxBuilder b(opset);
  b.input("x", {"1", "2", "3", "3"});
  b.output("y", {"1", "2", "3", "3"});
  init<float>(b, "xs", {}, {0.1f}, kF32);
  init<uint8_t>(b, "xz", {}, {128}, kU8);
  b.node("QuantizeLinear", "q_x", {"x", "xs", "xz"}, {"xq"});
  b.node("DequantizeLinear", "dq_x", {"xq", "xs", "xz"}, {"xf"});
  init<int8_t>(b, "wq", {2, 2, 1, 1}, {1, -2, 3, 4}, kI8);
  int64_t nw = static_cast<int64_t>(w_scale.size());
  init<float>(b, "ws", {nw}, w_scale, kF32);
  init<int8_t>(b, "wz", {nw}, std::vector<int8_t>(w_scale.size(), 0), kI8);
  auto* dq = b.node("DequantizeLinear", "dq_w", {"wq", "ws", "wz"}, {"wf"});
  OnnxBuilder::attr_int(dq, "axis", 0);
  b.node("Conv", "conv", {"xf", "wf"}, {"y"});
  return b;
}

TEST(QuantImport, EveryQuantizedOperatorIsSupported) {
  for (const char* op : {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                         "MatMulInteger", "QLinearMatMul", "ConvInteger", "QLinearConv"})
    EXPECT_TRUE(frontend::is_supported_op("", op)) << op;
}

TEST(QuantImport, QdqConvImportsAndRuns) {
  const std::string path = qdq_conv(13).write("qdq_conv.onnx");
  graph::Graph g = import_onnx(path);
  EXPECT_EQ(g.type_of("xq")->dtype, "uint8");
  EXPECT_EQ(g.type_of("wf")->dtype, "float32");
  graph::Initializer x;
  x.type = {"float32", {1, 2, 3, 3}};
  std::vector<float> xv = {0.05f, 0.15f, -0.25f, 1.0f, 2.0f, -3.0f,  0.0f,   12.74f, 12.76f,
                           0.3f,  0.4f,  0.5f,   -1.f, -2.f, -12.8f, -12.9f, 0.01f,  0.06f};
  x.data.resize(xv.size() * 4);
  std::memcpy(x.data.data(), xv.data(), x.data.size());
  std::vector<float> y = graph::run_graph(g, {{"x", x}}).at("y").as<float>();
  // By hand for pixel 0: x0 = 0.05 -> q 128 (0.5 rounds to 0), x1 = 0.3 -> q 131;
  // y[c0] = 0.5 * (1 * 0 + -2 * 0.3), y[c1] = 0.25 * (3 * 0 + 4 * 0.3).
  EXPECT_NEAR(y[0], 0.5f * (-2.0f * 0.3f), 1e-6);
  EXPECT_NEAR(y[9], 0.25f * (4.0f * 0.3f), 1e-6);
  // Pixel 8: x0 = 12.76 saturates at 255 (12.7), x1 = 0.06 -> q 129 (0.1).
  EXPECT_NEAR(y[8], 0.5f * (12.7f - 2.0f * 0.1f), 1e-5);
}

TEST(QuantImport, ScaleOfTheWrongLengthNamesTheNode) {
  const std::string path = qdq_conv(13, {0.5f, 0.25f, 1.0f}).write("bad_scale.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr(path), HasSubstr("node 'dq_w' (DequantizeLinear)"),
                    HasSubstr("x_scale has 3 values but axis 0")));
}

TEST(QuantImport, PerAxisScaleNeedsOpset13) {
  // Opset 12's DequantizeLinear (version 10) has no axis and one scale per tensor.
  OnnxBuilder b = qdq_conv(12);
  for (auto& n : *b.graph()->mutable_node()) n.clear_attribute();
  const std::string path = b.write("opset12_axis.onnx");
  EXPECT_THAT(import_error(path),
              AllOf(HasSubstr("node 'dq_w' (DequantizeLinear)"), HasSubstr("needs opset 13")));
  // Per-tensor at opset 12 imports.
  OnnxBuilder ok = qdq_conv(12, {0.5f});
  for (auto& n : *ok.graph()->mutable_node()) n.clear_attribute();
  EXPECT_NO_THROW(import_onnx(ok.write("opset12_ok.onnx")));
}

// Issue 65 #13: axis=4 on the rank-4 weight said "x_scale must be a scalar"; it names the axis,
// the rank and the node. -5 too; -4 (= 0) imports.
TEST(QuantImport, PerAxisAxisOutOfRangeIsNamed) {
  for (int64_t axis : {4, -5}) {
    OnnxBuilder b = qdq_conv(13);
    for (auto& n : *b.graph()->mutable_node())
      if (n.name() == "dq_w") n.mutable_attribute(0)->set_i(axis);
    const std::string path = b.write("axis_out_of_range.onnx");
    EXPECT_THAT(import_error(path),
                AllOf(HasSubstr(path), HasSubstr("node 'dq_w' (DequantizeLinear)"),
                      HasSubstr("axis " + std::to_string(axis) +
                                " is out of range for the rank-4 quantized tensor [2, 2, 1, 1] "
                                "(valid: -4 to 3)"),
                      Not(HasSubstr("must be a scalar"))));
  }
  OnnxBuilder ok = qdq_conv(13);
  for (auto& n : *ok.graph()->mutable_node())
    if (n.name() == "dq_w") n.mutable_attribute(0)->set_i(-4);
  EXPECT_NO_THROW(import_onnx(ok.write("axis_minus_4.onnx")));
}

TEST(QuantImport, UnsupportedDtypesAndMissingScalesAreNamed) {
  // An int32 zero point for QuantizeLinear: the schema allows only uint8 / int8.
  OnnxBuilder b(13);
  b.input("x", {"4"});
  b.output("y", {"4"}, kI32);
  init<float>(b, "s", {}, {1.0f}, kF32);
  init<int32_t>(b, "z", {}, {0}, kI32);
  b.node("QuantizeLinear", "q_int32", {"x", "s", "z"}, {"y"});
  EXPECT_THAT(import_error(b.write("q_int32.onnx")), HasSubstr("q_int32"));
  // An int16 quantized tensor for DequantizeLinear (ONNX 1.12 has no float8 at all).
  OnnxBuilder i16(13);
  i16.input("x", {"4"}, onnx::TensorProto::INT16);
  i16.output("y", {"4"});
  init<float>(i16, "s", {}, {1.0f}, kF32);
  i16.node("DequantizeLinear", "dq_int16", {"x", "s"}, {"y"});
  EXPECT_THAT(import_error(i16.write("dq_int16.onnx")), HasSubstr("dq_int16"));
  // No scale at all.
  OnnxBuilder m(13);
  m.input("x", {"4"});
  m.output("y", {"4"}, kU8);
  m.node("QuantizeLinear", "q_noscale", {"x"}, {"y"});
  EXPECT_THAT(import_error(m.write("q_noscale.onnx")), HasSubstr("q_noscale"));
  // QLinearConv with a float bias (it must be int32).
  OnnxBuilder c(13);
  c.input("x", {"1", "1", "2", "2"}, kU8);
  c.output("y", {"1", "1", "2", "2"}, kU8);
  init<float>(c, "s", {}, {1.0f}, kF32);
  init<uint8_t>(c, "z", {}, {0}, kU8);
  init<int8_t>(c, "w", {1, 1, 1, 1}, {2}, kI8);
  init<int8_t>(c, "wz", {}, {0}, kI8);
  init<float>(c, "b", {1}, {1.0f}, kF32);
  c.node("QLinearConv", "qconv", {"x", "s", "z", "w", "s", "wz", "s", "z", "b"}, {"y"});
  EXPECT_THAT(import_error(c.write("qconv_float_bias.onnx")), HasSubstr("qconv"));
}

}  // namespace
}  // namespace kiln::test
