// Shared libraries through runtime::Module, and the runtime's NDArray.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "codegen/helpers.h"
#include "runtime/module.h"
#include "runtime/ndarray.h"

namespace kiln::codegen::test {
namespace {

namespace fs = std::filesystem;
using runtime::DType;
using runtime::NDArray;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kiln-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// out[i, :] = exp(in[i, :]) * 2 + bias[i] with rows in parallel, 16 lanes + tail.
LoweredFunc rows_kernel(int64_t rows, int64_t cols) {
  Buffer In = make_buffer("In", DataType::f32(), {rows * cols});
  Buffer Bias = make_buffer("Bias", DataType::f32(), {rows});
  Buffer Out = make_buffer("Out", DataType::f32(), {rows * cols});
  Var i("i"), j("j"), t("t");
  auto body = [&](Expr idx, int lanes) {
    Expr b = lanes == 1 ? load(Bias, i) : broadcast(load(Bias, i), lanes);
    return make_store(Out, exp(load(In, idx)) * 2.0f + b, idx);
  };
  Stmt row = seq({serial(j, 0, cols / 16, body(ramp(i * cols + j * 16, 1, 16), 16)),
                  serial(t, cols / 16 * 16, cols % 16, body(i * cols + t, 1))});
  return {"rows_exp", {In, Bias, Out}, make_for(i, 0, rows, ForKind::Parallel, row)};
}

TEST(SharedLibrary, MatchesTheJit) {
  const int64_t rows = 13, cols = 70;
  LoweredFunc f = rows_kernel(rows, cols);
  TempDir dir;
  std::string so = (dir.path / "kernels.so").string();
  build_shared_library({f}, host(), so);
  ASSERT_TRUE(fs::exists(so));
  for (const auto& e : fs::directory_iterator(dir.path))  // no temporaries left
    EXPECT_EQ(e.path().filename(), "kernels.so");

  NDArray in = NDArray::empty({rows, cols}, DType::f32());
  NDArray bias = NDArray::empty({rows}, DType::f32());
  auto src = random_vector<float>(rows * cols, -5, 5), bsrc = random_vector<float>(rows, -1, 1, 9);
  std::copy(src.begin(), src.end(), in.data_as<float>());
  std::copy(bsrc.begin(), bsrc.end(), bias.data_as<float>());
  NDArray out_so = NDArray::empty({rows, cols}, DType::f32());
  NDArray out_jit = NDArray::empty({rows, cols}, DType::f32());

  runtime::Module m = runtime::Module::load(so);
  std::vector<void*> args{in.data(), bias.data(), out_so.data()};
  ASSERT_EQ(m.get_function("rows_exp")(args.data()), 0);
  auto k = jit(f);
  ASSERT_EQ(k({in.data(), bias.data(), out_jit.data()}), 0);
  for (int64_t x = 0; x < rows * cols; ++x) {
    ASSERT_EQ(out_so.data_as<float>()[x], out_jit.data_as<float>()[x]) << x;
    float want = std::exp(src[x]) * 2 + bsrc[x / cols];
    ASSERT_NEAR(out_so.data_as<float>()[x], want, 1e-5 * std::fabs(want) + 1e-6);
  }
  // Moving keeps the library loaded.
  runtime::Module moved = std::move(m);
  EXPECT_TRUE(moved.loaded());
  EXPECT_FALSE(m.loaded());  // NOLINT(bugprone-use-after-move)
  ASSERT_EQ(moved.get_function("rows_exp")(args.data()), 0);
}

TEST(SharedLibrary, ErrorsNameThePathAndSymbol) {
  TempDir dir;
  std::string so = (dir.path / "k.so").string();
  build_shared_library({rows_kernel(2, 16)}, host(), so);
  runtime::Module m = runtime::Module::load(so);
  try {
    m.get_function("nope");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(so), std::string::npos);
  }
  std::string missing = (dir.path / "missing.so").string();
  try {
    runtime::Module::load(missing);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }
  std::string junk = (dir.path / "junk.so").string();
  std::ofstream(junk) << "not an ELF file";
  EXPECT_THROW(runtime::Module::load(junk), std::runtime_error);
}

TEST(SharedLibrary, FailureLeavesNoFile) {
  TempDir dir;
  std::string so = (dir.path / "no-such-dir" / "k.so").string();
  EXPECT_THROW(build_shared_library({rows_kernel(2, 16)}, host(), so), std::runtime_error);
  EXPECT_FALSE(fs::exists(so));
  // A kernel that does not lower: nothing written either.
  std::string so2 = (dir.path / "bad.so").string();
  Buffer A = make_buffer("A", DataType::f32(), {4});
  EXPECT_THROW(build_shared_library({{"bad", {A}, make_store(A, Var("free", DataType::f32()), 0)}},
                                    host(), so2),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(so2));
}

TEST(NDArray, AlignedShapedAndCopyable) {
  for (int64_t n : {0, 1, 3, 17, 1000}) {
    NDArray a = NDArray::empty({n, 3}, DType::f32());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(a.numel(), n * 3);
    EXPECT_EQ(a.nbytes(), n * 12);
    EXPECT_EQ(a.shape(), (std::vector<int64_t>{n, 3}));
  }
  NDArray a = NDArray::empty({4}, DType::i32());
  for (int k = 0; k < 4; ++k) a.data_as<int32_t>()[k] = k * 10;
  NDArray b = a.copy();
  a.data_as<int32_t>()[0] = 99;
  EXPECT_EQ(b.data_as<int32_t>()[0], 0);
  EXPECT_EQ(b.data_as<int32_t>()[3], 30);
  EXPECT_NE(a.data(), b.data());
  NDArray c = std::move(a);
  EXPECT_EQ(c.data_as<int32_t>()[0], 99);
  EXPECT_EQ(c.dtype(), DType::i32());
  EXPECT_THROW(NDArray::empty({-1}, DType::f32()), std::invalid_argument);
}

TEST(NDArray, DTypeText) {
  for (const char* s : {"float32", "float16", "float64", "int8", "int64", "uint8", "bfloat16",
                        "bool", "float32x16", "int32x4"})
    EXPECT_EQ(DType::parse(s).str(), s);
  EXPECT_EQ(DType::parse("bool").bytes(), 1);
  EXPECT_EQ(DType::parse("float32x4").bytes(), 16);
  for (const char* bad :
       {"", "float", "float7", "int3", "bfloat32", "foo32", "float32x", "x4", "float32x0", "bool8"})
    EXPECT_THROW(DType::parse(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace kiln::codegen::test
