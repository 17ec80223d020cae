// The compile budget on a real template kernel: a config of dense_pack's own
// space whose unrolled size is over the budget is demoted by lower() (its
// outermost unrolled loops made serial), compiles quickly, and still matches
// the template's reference; with demotion off lower() refuses it instead.
// The largest register tile of the space, unrolled over k by 32, is over a
// budget of kBudget on every ISA. (The default budget's kernels, tens of
// seconds of LLVM, came from per-lane loops replicated by unrolling, which
// the vectorizer's predicated partial vectors no longer make.)
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "codegen/codegen.h"
#include "harness.h"
#include "ops/dense.h"
#include "ops/op_template.h"
#include "ops/reference.h"
#include "schedule/code_size.h"
#include "schedule/lower.h"

namespace kiln::test {
namespace {

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

TEST(CompileBudget, OverBudgetConfigIsDemotedAndMatchesReference) {
  // 50 rows (16-row tiles: the last guarded) and 64-column tiles of 80
  // columns (the second one partial: predicated), unrolled over k by 32.
  constexpr int64_t kBudget = 10000;
  ops::Workload w = ops::dense_workload("dense_pack.x86", {50, 80, 64});
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::Config cfg = ops::detail::KnobValues()
                             .split("tile_y", 50, {1, 16})
                             .split("tile_x", 80, {1, 64})
                             .split("tile_k", 64, {32})
                             .knob("tile_order", 0)
                             .in(t.space(w));
  ops::Kernel k = ops::make_kernel(t, w, cfg);

  schedule::LowerOptions refuse;
  refuse.demote_over_budget = false;
  refuse.code_budget = kBudget;
  EXPECT_THROW(schedule::lower(k.sch, k.args, k.name, refuse), schedule::CodeBudgetExceeded);

  schedule::LowerOptions o;  // the build's, demotion on, with the smaller budget
  o.code_budget = kBudget;
  o.vector_bits = host_target().isa().vector_bits;
  schedule::LowerReport report;
  o.report = &report;
  ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name, o);
  EXPECT_GT(report.code_size_before, kBudget);
  EXPECT_LE(report.code_size, kBudget);
  ASSERT_FALSE(report.demoted.empty());
  EXPECT_EQ(schedule::estimate_code_size(f.body, o.vector_bits) <= report.code_size, true)
      << "the unrolled kernel is no larger than its estimate before unrolling";

  auto t0 = std::chrono::steady_clock::now();
  auto mod = codegen::jit_compile({f}, host_target());
  double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(compile_s, 20) << "a demoted kernel must compile in bounded time";

  std::mt19937_64 rng(11);
  std::vector<std::vector<float>> inputs;
  for (const auto& s : t.input_shapes(w, cfg)) inputs.push_back(random_floats(product(s), rng));
  std::vector<float> ref(product(t.output_shape(w, cfg)), NAN), out(ref.size(), NAN);
  std::vector<const float*> in_ptrs;
  std::vector<void*> args;
  for (auto& v : inputs) {
    in_ptrs.push_back(v.data());
    args.push_back(v.data());
  }
  t.reference(w, cfg, in_ptrs, ref.data());
  args.push_back(out.data());
  ASSERT_EQ(mod->get_function(k.name)(args.data()), 0);
  EXPECT_LE(ops::reference::max_relative_error(out.data(), ref.data(), ref.size()), 1e-5);
}

}  // namespace
}  // namespace kiln::test
