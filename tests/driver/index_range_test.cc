// Indices out of range (issue 65, item 2): ONNX makes an index outside
// [-n, n-1] of an axis of size n an error in Gather, GatherElements, GatherND,
// ScatterElements and ScatterND. A constant one fails the build naming the
// node, the index and the axis; one read at run time fails the run (the
// kernel returns KILN_STATUS_INDEX_OUT_OF_RANGE, GraphExecutor::run throws
// naming the kernel and the node, the C API returns an error), also where
// the gather is fused with an epilogue and where its loop runs in parallel.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver/driver_harness.h"
#include "runtime/kiln_runtime.h"

namespace kiln::test {
namespace {

// A package built from `b` (a tar in `dir`).
std::string build_package(const OnnxBuilder& b, const ScratchDir& dir, const std::string& name) {
  std::string onnx_path = dir.file(name + ".onnx");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, {});
  driver::BuildOptions options;
  driver::BuiltModule m = driver::build_module(g, options);
  std::string pkg = dir.file(name + ".tar");
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  return pkg;
}

// The error run() throws with `ids` set, "" if it throws none.
std::string run_error(runtime::GraphExecutor& ex, const std::vector<int64_t>& ids) {
  ex.set_input("ids", ids.data(), runtime::DType::parse("int64"),
               {static_cast<int64_t>(ids.size())});
  try {
    ex.run();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

std::vector<float> output_values(const runtime::GraphExecutor& ex) {
  runtime::NDArray a = ex.output(0);
  const float* p = a.data_as<float>();
  return std::vector<float>(p, p + a.nbytes() / 4);
}

// Gather rows of a [5, cols] table by run-time ids, Relu fused into its kernel.
OnnxBuilder gather_relu(int64_t cols, int64_t n_ids, std::vector<float>* table) {
  OnnxBuilder b;
  b.input("ids", {std::to_string(n_ids)}, onnx::TensorProto::INT64);
  b.output("y", {std::to_string(n_ids), std::to_string(cols)});
  table->resize(static_cast<size_t>(5 * cols));
  for (size_t i = 0; i < table->size(); ++i)
    (*table)[i] = static_cast<float>(i % 7) - 2.5f + static_cast<float>(i) * 1e-3f;
  b.init_f32("table", {5, cols}, *table);
  OnnxBuilder::attr_int(b.node("Gather", "lookup", {"table", "ids"}, {"rows"}), "axis", 0);
  b.node("Relu", "act", {"rows"}, {"y"});
  return b;
}

TEST(IndexRange, RunTimeGatherIndexOutOfRangeFailsTheRun) {
  ScratchDir dir;
  const int64_t cols = 3;
  std::vector<float> table;
  std::string pkg = build_package(gather_relu(cols, 2, &table), dir, "gather");
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  ASSERT_EQ(ex.num_kernels(), 1u);  // the Relu is fused into the gather

  // -5 and 4: the first and the last row.
  EXPECT_EQ(run_error(ex, {-5, 4}), "");
  std::vector<float> got = output_values(ex);
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_EQ(got[c], std::max(table[c], 0.f));
    EXPECT_EQ(got[cols + c], std::max(table[4 * cols + c], 0.f));
  }
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{7, 0}, std::vector<int64_t>{0, -9}, std::vector<int64_t>{5, 1},
        std::vector<int64_t>{-6, 1}}) {
    std::string err = run_error(ex, bad);
    SCOPED_TRACE("ids " + std::to_string(bad[0]) + ", " + std::to_string(bad[1]));
    EXPECT_NE(err.find("index read at run time was out of range"), std::string::npos) << err;
    EXPECT_NE(err.find("'lookup' (Gather)"), std::string::npos) << err;
    EXPECT_NE(err.find("kernel 'fused_gather_relu_0'"), std::string::npos) << err;
  }
  // The executor stays usable.
  EXPECT_EQ(run_error(ex, {3, -1}), "");
  got = output_values(ex);
  EXPECT_EQ(got[0], std::max(table[3 * cols], 0.f));
}

// A gather big enough for a parallel loop: the bad index is the last one,
// found by whichever thread runs that block, and only there.
TEST(IndexRange, RunTimeIndexOutOfRangeInParallelLoop) {
  ScratchDir dir;
  const int64_t cols = 2048, n = 256;
  std::vector<float> table;
  std::string pkg = build_package(gather_relu(cols, n, &table), dir, "gather_parallel");
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i % 10 - 5;
  EXPECT_EQ(run_error(ex, ids), "");
  std::vector<float> got = output_values(ex);
  for (int64_t r : {int64_t{0}, int64_t{9}, n - 1}) {  // ids -5, 4 and 0: rows 0, 4, 0
    const int64_t id = ids[static_cast<size_t>(r)], row = id < 0 ? id + 5 : id;
    EXPECT_EQ(got[static_cast<size_t>(r * cols + 5)],
              std::max(table[static_cast<size_t>(row * cols + 5)], 0.f));
  }
  for (int64_t bad : {int64_t{7}, int64_t{-9}}) {
    ids.back() = bad;
    EXPECT_NE(run_error(ex, ids).find("out of range"), std::string::npos);
    ids.back() = 0;
    ids.front() = bad;
    EXPECT_NE(run_error(ex, ids).find("out of range"), std::string::npos);
    ids.front() = 0;
  }
  EXPECT_EQ(run_error(ex, ids), "");
}

// The C API returns an error with the executor's message: no crash, no garbage.
TEST(IndexRange, CApiReportsTheRunTimeError) {
  ScratchDir dir;
  std::vector<float> table;
  std::string pkg = build_package(gather_relu(3, 2, &table), dir, "gather_c");
  kiln_executor* ex = nullptr;
  ASSERT_EQ(kiln_executor_load(pkg.c_str(), &ex), 0) << kiln_last_error();
  const int64_t shape[] = {2};
  const int64_t bad[] = {7, -9};
  ASSERT_EQ(kiln_executor_set_input(ex, "ids", bad, "int64", 1, shape), 0);
  EXPECT_NE(kiln_executor_run(ex), 0);
  EXPECT_NE(std::string(kiln_last_error()).find("out of range"), std::string::npos)
      << kiln_last_error();
  const int64_t good[] = {-5, 4};
  ASSERT_EQ(kiln_executor_set_input(ex, "ids", good, "int64", 1, shape), 0);
  EXPECT_EQ(kiln_executor_run(ex), 0) << kiln_last_error();
  kiln_executor_free(ex);
}

// Run-time indices of the other indexing operators, through the whole build.
TEST(IndexRange, RunTimeIndicesOfGatherNDAndScatters) {
  ScratchDir dir;
  struct Case {
    std::string op;
    std::vector<int64_t> ids_shape;
  };
  for (const Case& c : {Case{"GatherElements", {1, 3}}, Case{"GatherND", {3, 1}},
                        Case{"ScatterElements", {1, 3}}, Case{"ScatterND", {3, 1}}}) {
    SCOPED_TRACE(c.op);
    OnnxBuilder b;
    b.input("ids", {std::to_string(c.ids_shape[0]), std::to_string(c.ids_shape[1])},
            onnx::TensorProto::INT64);
    std::vector<float> data(15);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
    b.init_f32("data", {5, 3}, data);
    const bool scatter = c.op.rfind("Scatter", 0) == 0;
    std::vector<std::string> in{"data", "ids"};
    if (c.op == "ScatterElements") {
      b.init_f32("upd", {1, 3}, {-1.f, -2.f, -3.f});
      in.push_back("upd");
    } else if (c.op == "ScatterND") {
      b.init_f32("upd", {3, 3}, std::vector<float>(9, -1.f));
      in.push_back("upd");
    }
    std::vector<std::string> out_dims = scatter              ? std::vector<std::string>{"5", "3"}
                                        : c.op == "GatherND" ? std::vector<std::string>{"3", "3"}
                                                             : std::vector<std::string>{"1", "3"};
    b.output("y", out_dims);
    b.node(c.op, "indexing", in, {"y"});
    std::string pkg = build_package(b, dir, c.op);
    runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
    auto run_with = [&](std::vector<int64_t> ids) {
      ex.set_input("ids", ids.data(), runtime::DType::parse("int64"), c.ids_shape);
      try {
        ex.run();
      } catch (const std::runtime_error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    EXPECT_EQ(run_with({-5, 4, 2}), "");
    for (const std::vector<int64_t>& bad :
         {std::vector<int64_t>{7, 0, 1}, std::vector<int64_t>{0, 1, -9}}) {
      std::string err = run_with(bad);
      EXPECT_NE(err.find("out of range"), std::string::npos) << err;
      EXPECT_NE(err.find("'indexing' (" + c.op + ")"), std::string::npos) << err;
    }
  }
}

// A constant index out of range fails the build, naming the node, the op,
// the index and the axis' size.
TEST(IndexRange, ConstantIndexOutOfRangeFailsTheBuild) {
  ScratchDir dir;
  OnnxBuilder b;
  b.input("x", {"5", "3"});
  b.output("y", {"1", "3"});
  b.init_i64("ids", {1}, {99});
  OnnxBuilder::attr_int(b.node("Gather", "lookup", {"x", "ids"}, {"y"}), "axis", 0);
  try {
    build_package(b, dir, "gather_const");
    FAIL() << "the build succeeded";
  } catch (const std::exception& e) {
    std::string err = e.what();
    EXPECT_NE(err.find("lookup"), std::string::npos) << err;
    EXPECT_NE(err.find("Gather"), std::string::npos) << err;
    EXPECT_NE(err.find("index 99 is out of range for axis 0 of size 5"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace kiln::test
