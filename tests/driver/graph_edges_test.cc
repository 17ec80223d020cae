// Whole models whose structure is unusual rather than whose operators are:
// outputs that are inputs, constants or folded away, unused inputs, nodes
// that the passes remove, several outputs of one node. Same end-to-end check
// as whole_graph_test.cc (tar and .so against graph::run_graph).
#include <gtest/gtest.h>

#include "driver_harness.h"

namespace kiln::test {
namespace {

// y = Identity(x) next to z = Relu(x): the simplifier removes the Identity,
// but the output must still be a copy of x under its own name.
TEST(GraphEdges, OutputOfAnIdentity) {
  OnnxBuilder b;
  b.input("x", {"3", "5"});
  b.output("y", {"3", "5"});
  b.output("z", {"3", "5"});
  b.node("Identity", "id", {"x"}, {"y"});
  b.node("Relu", "relu", {"x"}, {"z"});
  check_end_to_end(b, "identity_output");
}

// ONNX 1.12's shape inference types no graph output at all when one of them
// is a graph input or an initializer (outputs [x, Relu(x)] failed with "ONNX
// shape inference gave no type to 'y'", the path printed twice: issue 65 #12);
// the import infers without those outputs and gives them back. Each such output
// is a copy of its input or weight.

// A graph output that is a graph input, with no node in between, first and last.
TEST(GraphEdges, InputIsAlsoOutput) {
  OnnxBuilder b;
  b.input("x", {"3", "5"});
  b.output("x", {"3", "5"});
  b.output("z", {"3", "5"});
  b.node("Sigmoid", "sig", {"x"}, {"z"});
  check_end_to_end(b, "input_output");

  OnnxBuilder relu;
  relu.input("x", {"2", "3"});
  relu.output("y", {"2", "3"});
  relu.output("x", {"2", "3"});
  relu.node("Relu", "relu", {"x"}, {"y"});
  check_end_to_end(relu, "input_output_last");
}

// A graph output that is an initializer, with no node in between.
TEST(GraphEdges, InitializerIsAlsoOutput) {
  std::mt19937 rng(33);
  OnnxBuilder b;
  b.input("x", {"2", "7"});
  b.output("w", {"7"});
  b.output("y", {"2", "7"});
  b.output("x", {"2", "7"});
  init_random(b, "w", {7}, rng);
  b.node("Mul", "use", {"x", "w"}, {"y"});
  check_end_to_end(b, "initializer_output");
}

// An output computed from initializers only: constant folding turns it into
// a weight, which the package must still return.
TEST(GraphEdges, ConstantFoldedOutput) {
  std::mt19937 rng(31);
  OnnxBuilder b;
  b.input("x", {"2", "7"});
  b.output("c", {"2", "7"});
  b.output("y", {"2", "7"});
  init_random(b, "w1", {2, 7}, rng);
  init_random(b, "w2", {7}, rng);
  b.node("Add", "fold_me", {"w1", "w2"}, {"c"});
  b.node("Mul", "use", {"x", "c"}, {"y"});
  check_end_to_end(b, "constant_output");
}

// An input no node reads, and a Dropout (removed for inference) before the
// output.
TEST(GraphEdges, UnusedInputAndDropout) {
  OnnxBuilder b;
  b.input("x", {"4", "9"});
  b.input("unused", {"2"});
  b.output("y", {"4", "9"});
  b.node("Dropout", "drop", {"x"}, {"d"});
  b.node("Tanh", "tanh", {"d"}, {"y"});
  check_end_to_end(b, "unused_input");
}

// Both outputs of a Split are graph outputs, and one is read again.
TEST(GraphEdges, EveryOutputOfASplit) {
  OnnxBuilder b;
  b.input("x", {"3", "8"});
  b.output("lo", {"3", "3"});
  b.output("hi", {"3", "5"});
  b.output("s", {"3", "1"});
  b.init_i64("split", {2}, {3, 5});
  OnnxBuilder::attr_int(b.node("Split", "split", {"x", "split"}, {"lo", "hi"}), "axis", 1);
  b.init_i64("axes", {1}, {1});
  b.node("ReduceSum", "sum_hi", {"hi", "axes"}, {"s"});
  check_end_to_end(b, "split_outputs");
}

// Inputs and outputs of other dtypes than float32, and a scalar input:
// y = Where(cond, float(i), s), k = int64(cond) + i64(i), e = (i == 0).
TEST(GraphEdges, BoolInt32ScalarInputsAndOutputs) {
  OnnxBuilder b;
  b.input("cond", {"3", "5"}, onnx::TensorProto::BOOL);
  b.input("i", {"3", "5"}, onnx::TensorProto::INT32);
  b.input("s", {}, onnx::TensorProto::FLOAT);
  b.output("y", {"3", "5"});
  b.output("k", {"3", "5"}, onnx::TensorProto::INT64);
  b.output("e", {"3", "5"}, onnx::TensorProto::BOOL);
  OnnxBuilder::attr_int(b.node("Cast", "i_to_f", {"i"}, {"fi"}), "to", onnx::TensorProto::FLOAT);
  b.node("Where", "where", {"cond", "fi", "s"}, {"y"});
  OnnxBuilder::attr_int(b.node("Cast", "c_to_l", {"cond"}, {"cl"}), "to", onnx::TensorProto::INT64);
  OnnxBuilder::attr_int(b.node("Cast", "i_to_l", {"i"}, {"il"}), "to", onnx::TensorProto::INT64);
  b.node("Add", "add", {"cl", "il"}, {"k"});
  auto* zero = b.graph()->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(onnx::TensorProto::INT32);
  zero->add_int32_data(0);
  b.node("Equal", "eq", {"i", "zero"}, {"e"});
  E2EOptions opt;
  opt.ranges = {{"i", {-3, 3}}};
  check_end_to_end(b, "dtypes", opt);
}

// A value read by many nodes in different groups, and a diamond that joins
// again: storage reuse must not overwrite a value that is still needed.
TEST(GraphEdges, FanOutAndJoin) {
  std::mt19937 rng(32);
  OnnxBuilder b;
  b.input("x", {"5", "7"});
  b.output("y", {"5", "7"});
  init_random(b, "w", {7, 7}, rng);
  b.node("Exp", "e", {"x"}, {"a"});
  b.node("MatMul", "mm1", {"a", "w"}, {"m1"});
  b.node("Neg", "n", {"a"}, {"na"});
  b.node("MatMul", "mm2", {"na", "w"}, {"m2"});
  b.node("Sub", "d", {"m1", "m2"}, {"s"});
  b.node("Mul", "m", {"s", "a"}, {"p"});
  OnnxBuilder::attr_int(b.node("Softmax", "sm", {"p"}, {"q"}), "axis", 1);
  b.node("Add", "join", {"q", "a"}, {"y"});
  check_end_to_end(b, "fan_out");
}

// Clip's bounds fed at run time (ONNX's test_clip): read by the kernel, not
// dropped as if absent.
TEST(GraphEdges, ClipBoundsFedAtRunTime) {
  OnnxBuilder b;
  b.input("x", {"3", "5"});
  b.input("lo", {});
  b.input("hi", {});
  b.output("y", {"3", "5"});
  b.node("Clip", "clip", {"x", "lo", "hi"}, {"y"});
  // Bounds inside x's range, so that both clip some elements and keep others.
  E2EOptions opt;
  opt.ranges["lo"] = {-0.5, -0.2};
  opt.ranges["hi"] = {0.2, 0.5};
  check_end_to_end(b, "clip_runtime_bounds", opt);
  OnnxBuilder only_max;
  only_max.input("x", {"3", "5"});
  only_max.input("hi", {});
  only_max.output("y", {"3", "5"});
  only_max.node("Clip", "clip", {"x", "", "hi"}, {"y"});
  check_end_to_end(only_max, "clip_runtime_max", opt);
}

// An input that the compiled Pad needs at build time but that comes at run
// time (its constant value) moves the node to the executor's host region
// (frontend/host_region.h), which reads it every run: never ignored.
TEST(GraphEdges, RunTimePadValueIsReadEveryRun) {
  ScratchDir dir;
  OnnxBuilder b(13);
  b.input("x", {"3", "5"});
  b.input("value", {});
  b.output("y", {"3", "7"});
  b.init_i64("pads", {4}, {0, 1, 0, 1});
  b.node("Pad", "pad", {"x", "pads", "value"}, {"y"});
  b.write(dir.file("pad.onnx"));
  driver::BuildOptions o;
  o.output_path = dir.file("pad.tar");
  driver::build(dir.file("pad.onnx"), o);
  auto ex = runtime::GraphExecutor::load(dir.file("pad.tar"));
  std::vector<float> x(15);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (float value : {0.f, 2.5f, -7.f}) {
    ex.set_input("x", x.data(), runtime::DType::f32(), {3, 5});
    ex.set_input("value", &value, runtime::DType::f32(), {});
    ex.run();
    runtime::NDArray y = ex.output(0);
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{3, 7}));
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 7; ++c)
        EXPECT_EQ(y.data_as<float>()[r * 7 + c], c == 0 || c == 6 ? value : x[r * 5 + c - 1]);
  }
}

// Trilu's k fed at run time (ONNX's test_tril_neg & co.): read by the
// kernel, for every k the inputs draw.
TEST(GraphEdges, TriluDiagonalFedAtRunTime) {
  for (unsigned seed : {1u, 2u, 3u, 4u}) {
    for (int64_t upper : {0, 1}) {
      OnnxBuilder b(14);
      b.input("x", {"2", "4", "5"});
      b.input("k", {}, onnx::TensorProto::INT64);
      b.output("y", {"2", "4", "5"});
      OnnxBuilder::attr_int(b.node("Trilu", "tri", {"x", "k"}, {"y"}), "upper", upper);
      E2EOptions opt;
      opt.seed = seed;
      opt.ranges["k"] = {-3, 3};
      check_end_to_end(b, "trilu_runtime_k", opt);
    }
  }
}

// A MatMul over an empty reduction (K = 0) with a constant weight: zeros,
// as ONNX defines it (it died with SIGFPE choosing a template).
TEST(GraphEdges, MatMulOverAnEmptyReduction) {
  for (const char* op : {"MatMul", "Gemm"}) {
    OnnxBuilder b(13);
    b.input("x", {"2", "0"});
    b.input("z", {"2", "4"});
    b.output("y", {"2", "4"});
    b.init_f32("w", {0, 4}, {});
    b.node(op, "mm", {"x", "w"}, {"p"});
    b.node("Add", "add", {"p", "z"}, {"y"});
    SCOPED_TRACE(op);
    check_end_to_end(b, std::string("empty_reduction_") + op);
  }
}

}  // namespace
}  // namespace kiln::test
