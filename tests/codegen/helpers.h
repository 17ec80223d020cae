// Shared helpers for codegen tests: build kernels by hand and run them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/expr.h"
#include "ir/function.h"
#include "ir/stmt.h"

// C++'s _Float16, the reference for float16 results, needs clang >= 15 on
// x86; the sanitizer build's clang 14 lacks it, and checks on float16 values
// run in the default (gcc) build only.
#if defined(__clang__) && __clang_major__ < 15
#define KILN_TEST_HAS_FLOAT16 0
#else
#define KILN_TEST_HAS_FLOAT16 1
#endif

namespace kiln::codegen::test {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

inline Stmt seq(std::vector<Stmt> s) { return make_seq(std::move(s)); }
inline Stmt serial(Var v, Expr mn, Expr ext, Stmt body) {
  return make_for(std::move(v), std::move(mn), std::move(ext), ForKind::Serial, std::move(body));
}
inline Stmt let_stmt(Var v, Expr value, Stmt body) {
  return make_stmt<LetStmtNode>(std::move(v), std::move(value), std::move(body));
}
inline Stmt allocate(Buffer b, Expr size, Stmt body) {
  return make_stmt<AllocateNode>(std::move(b), std::move(size), std::move(body));
}
inline Expr let_expr(Var v, Expr value, Expr body) {
  return make_expr<LetNode>(std::move(v), std::move(value), std::move(body));
}

inline const Target& host() {
  static Target t = Target::host();
  return t;
}

// JIT-compiles one kernel and returns it together with its module.
struct Compiled {
  std::unique_ptr<JitModule> module;
  kiln_kernel_fn fn = nullptr;
  int32_t operator()(std::vector<void*> args) const { return fn(args.data()); }
};

inline Compiled jit(const LoweredFunc& f, const Target& t = host()) {
  Compiled c;
  c.module = jit_compile({f}, t);
  c.fn = c.module->get_function(f.name);
  return c;
}

template <typename T>
std::vector<T> random_vector(size_t n, double lo, double hi, uint32_t seed = 42) {
  std::mt19937 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) x = static_cast<T>(d(rng));
  } else {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (auto& x : v) x = static_cast<T>(d(rng));
  }
  return v;
}

}  // namespace kiln::codegen::test
