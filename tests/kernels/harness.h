// Helpers shared by the kernel tests: random data, compile-and-run through
// the JIT or a shared library, and comparison against references.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/function.h"
#include "ops/kernel.h"
#include "schedule/lower.h"

namespace kiln::test {

inline std::vector<float> random_floats(size_t n, std::mt19937_64& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline const codegen::Target& host_target() {
  static const codegen::Target t = codegen::Target::host();
  return t;
}

// Lowers, JIT-compiles and runs the kernel once on the given buffers.
inline void run_jit(const ops::Kernel& k, const std::vector<float*>& buffers) {
  ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name);
  auto mod = codegen::jit_compile({f}, host_target());
  std::vector<void*> args(buffers.begin(), buffers.end());
  ASSERT_EQ(mod->get_function(k.name)(args.data()), 0);
}

}  // namespace kiln::test
