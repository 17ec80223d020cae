// The run-time shaped part of a model (frontend/host_region.h,
// runtime/host_op.h) through the C API, and the operator lists of the two
// sides of it.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "driver/driver_harness.h"
#include "frontend/host_region.h"
#include "runtime/host_op.h"
#include "runtime/kiln_runtime.h"

namespace kiln::test {

TEST(HostSteps, FrontendAndRuntimeAgreeOnTheHostOperators) {
  std::set<std::string> runtime_ops;
  for (const std::string& op : runtime::host_op_names()) runtime_ops.insert(op);
  EXPECT_EQ(frontend::host_operators(), runtime_ops);
}

// Relu is compiled; NonZero of its output runs on the host. The C API gives
// each run's output shape, and no value before the first run.
TEST(HostSteps, TheCApiGivesEachRunsShape) {
  ScratchDir dir;
  OnnxBuilder b(13);
  b.input("x", {"2", "3"});
  b.output("nz", {"2", "n"}, onnx::TensorProto::INT64);
  b.node("Relu", "relu", {"x"}, {"r"});
  b.node("NonZero", "nonzero", {"r"}, {"nz"});
  b.write(dir.file("m.onnx"));
  driver::BuildOptions o;
  o.output_path = dir.file("m.tar");
  driver::build(dir.file("m.onnx"), o);

  kiln_executor* ex = nullptr;
  ASSERT_EQ(KILN_OK, kiln_executor_load(dir.file("m.tar").c_str(), &ex)) << kiln_last_error();
  std::vector<int64_t> out(16);
  EXPECT_NE(KILN_OK, kiln_executor_get_output(ex, 0, out.data(), out.size() * 8));
  EXPECT_NE(std::string(kiln_last_error()).find("before the first run"), std::string::npos)
      << kiln_last_error();
  const int64_t shape[2] = {2, 3};
  for (const std::vector<float>& x :
       {std::vector<float>{1, -1, 0, 0, 2, 3}, std::vector<float>{-1, -1, -1, -1, -1, 5},
        std::vector<float>{-1, -1, -1, -1, -1, -1}}) {
    ASSERT_EQ(KILN_OK, kiln_executor_set_input(ex, "x", x.data(), "float32", 2, shape));
    ASSERT_EQ(KILN_OK, kiln_executor_run(ex)) << kiln_last_error();
    std::vector<int64_t> want_rows, want_cols;
    for (int64_t i = 0; i < 6; ++i)
      if (x[i] > 0) want_rows.push_back(i / 3), want_cols.push_back(i % 3);
    int32_t ndim = 0;
    const int64_t* got_shape = nullptr;
    ASSERT_EQ(KILN_OK, kiln_executor_output_info(ex, 0, nullptr, nullptr, &ndim, &got_shape));
    ASSERT_EQ(ndim, 2);
    const int64_t n = static_cast<int64_t>(want_rows.size());
    EXPECT_EQ(got_shape[0], 2);
    EXPECT_EQ(got_shape[1], n);
    ASSERT_EQ(KILN_OK, kiln_executor_get_output(ex, 0, out.data(), out.size() * 8));
    for (int64_t k = 0; k < n; ++k) {
      EXPECT_EQ(out[k], want_rows[k]);
      EXPECT_EQ(out[n + k], want_cols[k]);
    }
  }
  kiln_executor_free(ex);
}

// A graph input or output that is a sequence of float tensors.
void sequence_value(onnx::ValueInfoProto* v, const std::string& name) {
  v->set_name(name);
  v->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
}

// seq2 = SequenceInsert(seq, Relu(x)) and has = OptionalHasElement(o): a
// sequence input and output and an optional input through the C API.
TEST(HostSteps, TheCApiTakesAndGivesSequencesAndOptionals) {
  ScratchDir dir;
  OnnxBuilder b(16);
  b.input("x", {"2"});
  sequence_value(b.graph()->add_input(), "seq");
  auto* o = b.graph()->add_input();
  o->set_name("o");
  auto* ot = o->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
  ot->set_elem_type(onnx::TensorProto::FLOAT);
  ot->mutable_shape()->add_dim()->set_dim_value(2);
  sequence_value(b.graph()->add_output(), "seq2");
  b.output("has", {}, onnx::TensorProto::BOOL);
  b.node("Relu", "relu", {"x"}, {"r"});
  b.node("SequenceInsert", "insert", {"seq", "r"}, {"seq2"});
  b.node("OptionalHasElement", "has", {"o"}, {"has"});
  b.write(dir.file("m.onnx"));
  driver::BuildOptions opts;
  opts.output_path = dir.file("m.tar");
  driver::build(dir.file("m.onnx"), opts);

  kiln_executor* ex = nullptr;
  ASSERT_EQ(KILN_OK, kiln_executor_load(dir.file("m.tar").c_str(), &ex)) << kiln_last_error();
  int32_t inputs = 0, is_seq = -1, is_opt = -1;
  ASSERT_EQ(KILN_OK, kiln_executor_num_inputs(ex, &inputs));
  ASSERT_EQ(inputs, 3);
  ASSERT_EQ(KILN_OK, kiln_executor_input_kind(ex, 1, &is_seq, &is_opt));
  EXPECT_EQ(is_seq, 1);
  EXPECT_EQ(is_opt, 0);
  ASSERT_EQ(KILN_OK, kiln_executor_input_kind(ex, 2, &is_seq, &is_opt));
  EXPECT_EQ(is_seq, 0);
  EXPECT_EQ(is_opt, 1);
  ASSERT_EQ(KILN_OK, kiln_executor_output_kind(ex, 0, &is_seq, nullptr));
  EXPECT_EQ(is_seq, 1);

  const std::vector<float> x = {-1, 3}, e0 = {1, 2, 3}, e1 = {4};
  const int64_t two = 2, three = 3, one = 1;
  const void* data[2] = {e0.data(), e1.data()};
  const int32_t ndims[2] = {1, 1};
  const int64_t* shapes[2] = {&three, &one};
  ASSERT_EQ(KILN_OK, kiln_executor_set_input(ex, "x", x.data(), "float32", 1, &two));
  ASSERT_EQ(KILN_OK, kiln_executor_set_input_sequence(ex, "seq", 2, data, ndims, shapes))
      << kiln_last_error();
  ASSERT_EQ(KILN_OK, kiln_executor_set_input_none(ex, "o")) << kiln_last_error();
  ASSERT_EQ(KILN_OK, kiln_executor_run(ex)) << kiln_last_error();
  int32_t length = 0;
  ASSERT_EQ(KILN_OK, kiln_executor_output_sequence_length(ex, 0, &length)) << kiln_last_error();
  ASSERT_EQ(length, 3);
  const std::vector<std::vector<float>> want = {e0, e1, {0, 3}};
  for (int32_t j = 0; j < length; ++j) {
    const void* p = nullptr;
    int32_t ndim = 0;
    const int64_t* shape = nullptr;
    size_t nbytes = 0;
    ASSERT_EQ(KILN_OK, kiln_executor_output_element(ex, 0, j, &p, &ndim, &shape, &nbytes));
    ASSERT_EQ(ndim, 1);
    ASSERT_EQ(shape[0], static_cast<int64_t>(want[j].size()));
    ASSERT_EQ(nbytes, want[j].size() * 4);
    const float* f = static_cast<const float*>(p);
    EXPECT_EQ(std::vector<float>(f, f + want[j].size()), want[j]) << j;
  }
  EXPECT_NE(KILN_OK, kiln_executor_output_element(ex, 0, 3, nullptr, nullptr, nullptr, nullptr));
  std::vector<float> out(8);
  EXPECT_NE(KILN_OK, kiln_executor_get_output(ex, 0, out.data(), 32));
  EXPECT_NE(std::string(kiln_last_error()).find("is a sequence"), std::string::npos);
  uint8_t has = 2;
  ASSERT_EQ(KILN_OK, kiln_executor_get_output(ex, 1, &has, 1)) << kiln_last_error();
  EXPECT_EQ(has, 0);
  ASSERT_EQ(KILN_OK, kiln_executor_set_input(ex, "o", x.data(), "float32", 1, &two));
  ASSERT_EQ(KILN_OK, kiln_executor_run(ex)) << kiln_last_error();
  ASSERT_EQ(KILN_OK, kiln_executor_get_output(ex, 1, &has, 1)) << kiln_last_error();
  EXPECT_EQ(has, 1);
  EXPECT_NE(KILN_OK, kiln_executor_set_input_none(ex, "x"));
  EXPECT_NE(std::string(kiln_last_error()).find("not optional"), std::string::npos);
  kiln_executor_free(ex);
}

}  // namespace kiln::test
