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

}  // namespace kiln::test
