// The deployment path: the same kernels as the JIT tests, emitted as one
// shared library, loaded through the runtime (dlopen, no LLVM) and compared
// with the reference.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"
#include "ops/conv2d.h"
#include "ops/dense.h"
#include "runtime/module.h"

namespace kiln::test {
namespace {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

TEST(SharedLibraryKernels, DenseAndConvFromOneLibraryMatchReference) {
  std::mt19937_64 rng(31);
  ops::DenseWorkload dw{19, 45, 33};
  ops::Conv2DParams cp{1, 4, 9, 11, 6, 3, 3, 2, 1, 1, 1, 1, 1};
  auto dense_space = ops::dense_pack_space(dw, schedule::SplitPolicy::All);
  auto conv_space = ops::conv2d_nchw_space(cp, schedule::SplitPolicy::All);

  TempDir dir;
  for (int round = 0; round < 4; ++round) {
    auto dcfg = dense_space.random(rng), ccfg = conv_space.random(rng);
    SCOPED_TRACE("dense " + dcfg.to_json() + " conv " + ccfg.to_json());
    auto dk = ops::dense_pack(dw, dcfg, true);
    auto ck = ops::conv2d_nchw(cp, ccfg);
    std::string so = dir.file("kernels" + std::to_string(round) + ".so");
    codegen::build_shared_library(
        {schedule::lower(dk.sch, dk.args, "dense"), schedule::lower(ck.sch, ck.args, "conv")},
        host_target(), so);
    auto mod = runtime::Module::load(so);

    auto A = random_floats(dw.M * dw.K, rng), B = random_floats(dw.K * dw.N, rng);
    std::vector<float> C(dw.M * dw.N, NAN), ref(dw.M * dw.N);
    ops::reference::dense(A.data(), B.data(), ref.data(), dw.M, dw.N, dw.K);
    std::vector<void*> dargs{A.data(), B.data(), C.data()};
    ASSERT_EQ(mod.get_function("dense")(dargs.data()), 0);
    EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-5);

    auto x = random_floats(cp.in_channels * cp.height * cp.width, rng);
    auto w = random_floats(cp.out_channels * cp.in_channels * 9, rng);
    std::vector<float> out(cp.out_channels * cp.out_height() * cp.out_width(), NAN),
        cref(out.size());
    ops::reference::conv2d_nchw(x.data(), w.data(), cref.data(), cp);
    std::vector<void*> cargs{x.data(), w.data(), out.data()};
    ASSERT_EQ(mod.get_function("conv")(cargs.data()), 0);
    EXPECT_LE(ops::reference::max_relative_error(out.data(), cref.data(), out.size()), 1e-5);
  }
}

}  // namespace
}  // namespace kiln::test
