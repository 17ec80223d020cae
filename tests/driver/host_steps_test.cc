// The operators the frontend moves to the host region are exactly those the
// runtime runs there (frontend/host_region.h, runtime/host_op.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "frontend/host_region.h"
#include "runtime/host_op.h"

namespace kiln {

TEST(HostSteps, FrontendAndRuntimeAgreeOnTheHostOperators) {
  std::set<std::string> runtime_ops;
  for (const std::string& op : runtime::host_op_names()) runtime_ops.insert(op);
  EXPECT_EQ(frontend::host_operators(), runtime_ops);
}

}  // namespace kiln
