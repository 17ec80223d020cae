// The AMX tile-data permission (runtime/amx.h) and the graph executor asking
// for it: on a CPU without AMX the wrapper says so; a package whose "requires"
// lists amx-tile is refused here by the feature check, naming amx-tile, and
// loads (with the permission granted) on a CPU with AMX.
#include <gtest/gtest.h>

#include <cerrno>

#include "package_builder.h"
#include "runtime/amx.h"
#include "runtime/cpu_features.h"
#include "runtime/graph_executor.h"

namespace kiln::test {
namespace {

TEST(AmxPermission, MessagesNameTheCause) {
  EXPECT_EQ(runtime::amx_permission_message(false, 0), "amx-tile not supported by this CPU");
  EXPECT_EQ(runtime::amx_permission_message(true, 0), "");
  std::string e = runtime::amx_permission_message(true, EINVAL);
  EXPECT_NE(e.find("the Linux kernel refused AMX tile data"), std::string::npos) << e;
  EXPECT_NE(e.find("Linux 5.16"), std::string::npos) << e;
  EXPECT_NE(runtime::amx_permission_message(true, EPERM).find("refused"), std::string::npos);
}

TEST(AmxPermission, ThisCpu) {
  if (runtime::host_has_cpu_feature("amx-tile")) {
    EXPECT_EQ(runtime::request_amx_permission(), "");
    EXPECT_NO_THROW(runtime::require_amx_permission());
    return;
  }
  EXPECT_EQ(runtime::request_amx_permission(), "amx-tile not supported by this CPU");
  // Linux itself refuses too (EOPNOTSUPP on a CPU without AMX; EINVAL before 5.16).
  std::string linux_says = runtime::amx_permission_from_linux();
  EXPECT_NE(linux_says.find("the Linux kernel refused AMX tile data (arch_prctl("),
            std::string::npos)
      << linux_says;
  // Asked once per process: the same answer again.
  EXPECT_EQ(runtime::request_amx_permission(), "amx-tile not supported by this CPU");
  try {
    runtime::require_amx_permission();
    ADD_FAILURE() << "no error on a CPU without AMX";
  } catch (const std::runtime_error& x) {
    EXPECT_STREQ(x.what(), "amx-tile not supported by this CPU");
  }
}

TEST(AmxPermission, ExecutorChecksPackagesThatUseTiles) {
  std::mt19937_64 rng(5);
  TempDir dir;
  std::string path = dir.file("p.tar");
  PackageParts parts;
  parts.so = build_kernel_library(dir.file("kernels.so"));
  parts.params.push_back({"p", random_f32({kRows, kCols}, rng)});
  parts.graph["requires"] = {{"arch", runtime::host_arch()},
                             {"cpu_features", {"amx-tile", "amx-int8"}}};
  parts.graph["target"] = "llvm -mcpu=sapphirerapids";
  parts.write(path);
  if (runtime::host_has_cpu_feature("amx-tile") && runtime::host_has_cpu_feature("amx-int8")) {
    EXPECT_NO_THROW(runtime::GraphExecutor::load(path));
    EXPECT_EQ(runtime::request_amx_permission(), "");
    return;
  }
  std::string e;
  try {
    runtime::GraphExecutor::load(path);
    ADD_FAILURE() << "a package needing amx-tile loaded on a CPU without it";
  } catch (const runtime::IncompatiblePackage& x) {
    e = x.what();
  }
  EXPECT_NE(e.find("it needs CPU features this machine lacks: amx-tile"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln::test
