// `kiln run` (the built binary) and the deploy examples on a hand-made
// package: outputs match the reference; wrong inputs end with one message
// naming the file and tensor, a non-zero status and no output file.
#include <gtest/gtest.h>

#include <regex>

#include "package_builder.h"
#include "runtime/kiln_runtime.h"

namespace kiln::test {
namespace {

using runtime::DType;
using runtime::NDArray;

const std::string& kernel_library_for_cli() {
  static const std::string so = [] {
    TempDir dir;
    return build_kernel_library(dir.file("kernels.so"));
  }();
  return so;
}

class KilnRun : public ::testing::Test {
 protected:
  void SetUp() override {
    PackageParts parts;
    parts.so = kernel_library_for_cli();
    parts.params.push_back({"p", random_f32({kRows, kCols}, rng_)});
    p_ = parts.params[0].array.copy();
    package_ = dir_.file("model.tar");
    parts.write(package_);
  }

  std::string write_inputs(const std::string& name, std::vector<runtime::NamedArray> arrays) {
    std::string path = dir_.file(name);
    runtime::write_npz(path, arrays);
    return path;
  }

  std::pair<int, std::string> kiln(const std::string& args) {
    return run_command(std::string(KILN_BINARY) + " run " + args);
  }

  std::mt19937_64 rng_{42};
  TempDir dir_;
  std::string package_;
  NDArray p_;
};

TEST_F(KilnRun, WritesOutputsThatMatchTheReference) {
  std::vector<runtime::NamedArray> in;
  in.push_back({"x", random_f32({kRows, kCols}, rng_)});
  auto [y, z] = addrelu_reference(in[0].array.data_as<float>(), p_.data_as<float>());
  std::string inputs = write_inputs("in.npz", std::move(in));
  std::string out = dir_.file("pred.npz");
  auto [rc, text] = kiln(package_ + " --inputs " + inputs + " --output " + out);
  ASSERT_EQ(rc, 0) << text;
  auto outputs = runtime::read_npz(out);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "output_0");
  EXPECT_EQ(outputs[1].name, "output_1");
  for (int k = 0; k < 2; ++k) {
    const NDArray& got = outputs[k].array;
    EXPECT_EQ(got.shape(), (std::vector<int64_t>{kRows, kCols}));
    EXPECT_EQ(got.dtype(), DType::f32());
    const std::vector<float>& want = k == 0 ? y : z;
    int64_t bad = 0;
    for (int64_t i = 0; i < kNumel; ++i)
      if (std::abs(got.data_as<float>()[i] - want[i]) > 1e-6f * (1 + std::abs(want[i]))) ++bad;
    EXPECT_EQ(bad, 0) << "output_" << k;
  }
  // Deflated: the zeros of relu compress.
  EXPECT_LT(fs::file_size(out), static_cast<uintmax_t>(2 * kNumel * 4));
}

TEST_F(KilnRun, PrintTimeAndProfile) {
  std::vector<runtime::NamedArray> in;
  in.push_back({"x", random_f32({kRows, kCols}, rng_)});
  std::string inputs = write_inputs("in.npz", std::move(in));
  auto [rc, text] = kiln(package_ + " --inputs " + inputs + " --repeat 7 --print-time --profile");
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("Execution time summary (7 runs after 1 warm-up)"), std::string::npos)
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(mean \(ms\) +median \(ms\) +max \(ms\) +min)")))
      << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\n +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+)")))
      << text;
  // One row per kernel with 7 calls; no output file asked: shapes are printed.
  for (const char* k :
       {"fused_add_0", "fused_relu_1", "fused_add_2", "fused_relu_3", "fused_add_4"})
    EXPECT_TRUE(std::regex_search(text, std::regex(std::string(k) + R"( +(Add|Relu) +7 )")))
        << k << "\n"
        << text;
  EXPECT_NE(text.find("output_0 (y): float32 [3, 12345]"), std::string::npos) << text;
}

TEST_F(KilnRun, WrongInputsEndWithOneMessageAndNoOutputFile) {
  std::string out = dir_.file("pred.npz");
  auto expect_error = [&](const std::string& inputs, const std::string& message) {
    SCOPED_TRACE(message);
    auto [rc, text] = kiln(package_ + " --inputs " + inputs + " --output " + out);
    EXPECT_EQ(rc, 1) << text;
    EXPECT_EQ(text, "kiln run: error: " + message + "\n");
    EXPECT_FALSE(fs::exists(out));
  };
  const std::string expected = "'x' float32 [3, 12345]";

  std::vector<runtime::NamedArray> misnamed;
  misnamed.push_back({"input", random_f32({kRows, kCols}, rng_)});
  std::string path = write_inputs("misnamed.npz", std::move(misnamed));
  expect_error(path, path + ": array 'input' is not an input of '" + package_ +
                         "'; its inputs are " + expected);

  std::vector<runtime::NamedArray> shape;
  shape.push_back({"x", random_f32({kRows, kCols + 1}, rng_)});
  path = write_inputs("shape.npz", std::move(shape));
  expect_error(path, path +
                         ": array 'x' is float32 [3, 12346] but the model's input is float32 "
                         "[3, 12345]; its inputs are " +
                         expected);

  std::vector<runtime::NamedArray> dtype;
  dtype.push_back({"x", NDArray::empty({kRows, kCols}, DType::i64())});
  path = write_inputs("dtype.npz", std::move(dtype));
  expect_error(path, path +
                         ": array 'x' is int64 [3, 12345] but the model's input is float32 "
                         "[3, 12345]; its inputs are " +
                         expected);

  path = write_inputs("empty.npz", {});
  expect_error(path, path + ": no array for the input 'x'; the model's inputs are " + expected);

  expect_error(dir_.file("none.npz"), dir_.file("none.npz") + ": no such file");
}

// Issue 65 #11: an input named with non-ASCII bytes or a backslash is fed from the npz under
// that name (the CLI read the first as "member '': empty array name", the second as "a/b").
TEST_F(KilnRun, InputNamesAreReadAsStored) {
  for (const std::string name : {std::string("\xc3\xa9"), std::string("a\\b")}) {
    SCOPED_TRACE(name);
    PackageParts parts;
    parts.so = kernel_library_for_cli();
    parts.params.push_back({"p", p_.copy()});
    parts.graph["inputs"][0]["name"] = name;
    parts.graph["tensors"][0]["name"] = name;
    const std::string package = dir_.file("named.tar");
    parts.write(package);
    std::vector<runtime::NamedArray> in;
    in.push_back({name, random_f32({kRows, kCols}, rng_)});
    auto [y, z] = addrelu_reference(in[0].array.data_as<float>(), p_.data_as<float>());
    const std::string inputs = write_inputs("named.npz", std::move(in));
    const std::string out = dir_.file("named_out.npz");
    auto [rc, text] = kiln(package + " --inputs " + inputs + " --output " + out);
    ASSERT_EQ(rc, 0) << text;
    auto outputs = runtime::read_npz(out);
    ASSERT_EQ(outputs.size(), 2u);
    int64_t bad = 0;
    for (int64_t i = 0; i < kNumel; ++i)
      bad += std::abs(outputs[0].array.data_as<float>()[i] - y[i]) > 1e-6f * (1 + std::abs(y[i]));
    EXPECT_EQ(bad, 0);
  }
}

TEST_F(KilnRun, CorruptPackageAndUsageErrors) {
  std::string bad = dir_.file("bad.tar");
  write_file(bad, read_file(package_).substr(0, 3000));
  auto [rc, text] = kiln(bad + " --inputs x.npz");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(text.rfind("kiln run: error: corrupt package '" + bad + "': mod.so: ", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;

  std::tie(rc, text) = kiln(package_ + " --repeat 0");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("--repeat needs a positive integer"), std::string::npos) << text;
  std::tie(rc, text) = kiln(package_ + " --bogus");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("unknown option '--bogus'"), std::string::npos) << text;
  std::tie(rc, text) = kiln("");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("no package given"), std::string::npos) << text;
  std::tie(rc, text) = kiln(package_);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(text.find("--inputs INPUT.npz is required: the model's inputs are 'x' float32"),
            std::string::npos)
      << text;
}

TEST_F(KilnRun, DeployExamplesRunThePackage) {
  // Zeros in: y = relu(relu(p)), z = 2 relu(p).
  auto [rc, text] = run_command(std::string(KILN_DEPLOY_EXAMPLE) + " " + package_);
  ASSERT_EQ(rc, 0) << text;
  char first[64];
  std::snprintf(first, sizeof(first), "%g", std::max(p_.data_as<float>()[0], 0.0f));
  EXPECT_NE(text.find(std::string("output 0 y: float32 [3, 12345]: ") + first), std::string::npos)
      << text;
  std::tie(rc, text) = run_command(std::string(KILN_DEPLOY_C_EXAMPLE) + " " + package_);
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find(std::string("output 0 y: float32 [3, 12345] ") + first), std::string::npos)
      << text;
  EXPECT_NE(text.find("output 1 z: float32 [3, 12345]"), std::string::npos) << text;

  // With inputs from an npz.
  std::vector<runtime::NamedArray> in;
  in.push_back({"x", random_f32({kRows, kCols}, rng_)});
  auto [y, z] = addrelu_reference(in[0].array.data_as<float>(), p_.data_as<float>());
  std::string inputs = write_inputs("in.npz", std::move(in));
  std::tie(rc, text) =
      run_command(std::string(KILN_DEPLOY_EXAMPLE) + " " + package_ + " " + inputs);
  ASSERT_EQ(rc, 0) << text;
  std::snprintf(first, sizeof(first), "%g", z[0]);
  EXPECT_NE(text.find(std::string("output 1 z: float32 [3, 12345]: ") + first), std::string::npos)
      << text;
}

TEST_F(KilnRun, CApi) {
  kiln_executor* ex = nullptr;
  EXPECT_EQ(kiln_executor_load(dir_.file("nope.tar").c_str(), &ex), KILN_ERROR);
  EXPECT_EQ(std::string(kiln_last_error()),
            "package '" + dir_.file("nope.tar") + "': no such file");
  std::string bad = dir_.file("bad.tar");
  write_file(bad, "junk");
  EXPECT_EQ(kiln_executor_load(bad.c_str(), &ex), KILN_CORRUPT_PACKAGE);
  EXPECT_EQ(ex, nullptr);

  ASSERT_EQ(kiln_executor_load(package_.c_str(), &ex), KILN_OK) << kiln_last_error();
  int32_t n_in = 0, n_out = 0;
  ASSERT_EQ(kiln_executor_num_inputs(ex, &n_in), KILN_OK);
  ASSERT_EQ(kiln_executor_num_outputs(ex, &n_out), KILN_OK);
  EXPECT_EQ(n_in, 1);
  EXPECT_EQ(n_out, 2);
  const char *name, *dtype;
  int32_t ndim;
  const int64_t* shape;
  ASSERT_EQ(kiln_executor_input_info(ex, 0, &name, &dtype, &ndim, &shape), KILN_OK);
  EXPECT_STREQ(name, "x");
  EXPECT_STREQ(dtype, "float32");
  ASSERT_EQ(ndim, 2);
  EXPECT_EQ(shape[0], kRows);
  EXPECT_EQ(shape[1], kCols);
  ASSERT_EQ(kiln_executor_output_info(ex, 1, &name, nullptr, nullptr, nullptr), KILN_OK);
  EXPECT_STREQ(name, "z");
  EXPECT_EQ(kiln_executor_output_info(ex, 2, &name, nullptr, nullptr, nullptr),
            KILN_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "output index 2 is out of range (2 outputs)");

  NDArray x = random_f32({kRows, kCols}, rng_);
  int64_t s[2] = {kRows, kCols};
  EXPECT_EQ(kiln_executor_set_input(ex, "input", x.data(), "float32", 2, s), KILN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("no input 'input'; its inputs are: 'x' float32"),
            std::string::npos);
  EXPECT_EQ(kiln_executor_set_input(ex, "x", x.data(), "int32", 2, s), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_executor_set_input(ex, "x", x.data(), "float32", 1, s), KILN_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_executor_set_input(ex, "x", x.data(), "floaty", 2, s), KILN_INVALID_ARGUMENT);
  ASSERT_EQ(kiln_executor_set_input(ex, "x", x.data(), "float32", 2, s), KILN_OK);
  ASSERT_EQ(kiln_executor_run(ex), KILN_OK);

  auto [y, z] = addrelu_reference(x.data_as<float>(), p_.data_as<float>());
  std::vector<float> got(kNumel);
  EXPECT_EQ(kiln_executor_get_output(ex, 0, got.data(), got.size() * 4 - 1), KILN_INVALID_ARGUMENT);
  ASSERT_EQ(kiln_executor_get_output(ex, 0, got.data(), got.size() * 4), KILN_OK);
  EXPECT_EQ(got, y);
  const void* data;
  size_t nbytes;
  ASSERT_EQ(kiln_executor_output_data(ex, 1, &data, &nbytes), KILN_OK);
  EXPECT_EQ(nbytes, static_cast<size_t>(kNumel * 4));
  EXPECT_EQ(std::memcmp(data, z.data(), nbytes), 0);
  EXPECT_EQ(kiln_executor_run(nullptr), KILN_INVALID_ARGUMENT);
  EXPECT_STREQ(kiln_last_error(), "executor is NULL");
  kiln_executor_free(ex);
  kiln_executor_free(nullptr);
}

}  // namespace
}  // namespace kiln::test
