// Code size: an estimate of how many instructions LLVM receives for a kernel,
// taken on the loop IR before it sees it, and the compile-time budget built on
// it.
//
// LLVM's O3 pipeline and code generation take time roughly in proportion to
// the instructions of a function, and unrolling multiplies them: a register
// tile unrolled over oc x oh x ow x kw becomes one straight block of
// thousands of vector FMAs. estimate_code_size() counts the scalar and vector
// operations a statement becomes (arithmetic, compares, casts, calls, loads,
// stores, ramps and broadcasts; loop and branch overhead), multiplying the
// body of every loop still marked Unrolled by its extent, and a vector
// operation wider than the target's vector registers by the registers it
// needs. A loop inside an unrolled loop costs a fixed weight per copy on top
// of its body (LLVM's loop passes run on every copy: the most expensive
// thing to hand LLVM, per operation). Alias analysis adds a share in
// proportion to the accesses times the buffers they reach past the first 16
// (every kernel argument is a noalias scope on every access; code_size.cc).
// It runs after vectorize_loops (vector lanes decided) and before
// unroll_loops (unrolled loops still marked), as lower() calls it.
//
// fit_code_budget() keeps a kernel within a budget of estimated operations by
// turning its outermost unrolled loops back into serial loops, largest first,
// until the estimate fits (kDefaultCodeBudget: bench/models/results/
// compile-times-2026-11-23-zen4.md has the calibration against compile time).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/stmt.h"

namespace kiln::schedule {

// Estimated operations above which a kernel's unrolling is demoted (build) or
// a tuning candidate is rejected (kiln tune). Calibrated on a Zen 4 (2 cores,
// LLVM 16, O3): straight-line register tiles of <= 49k took <= 2.5 s, 89k
// 12 s and 97k 30 s; the templates' largest in-budget configs took <= 5.4 s;
// every kernel measured over 20 s was estimated at >= 550k.
inline constexpr int64_t kDefaultCodeBudget = 50000;

// Operations LLVM receives for s: every loop still marked Unrolled counts its
// body extent times; a vector of lanes x bits counts ceil(lanes x bits /
// vector_bits) operations (the registers it is split into).
int64_t estimate_code_size(const ir::Stmt& s, int vector_bits = 512);

struct CodeBudgetResult {
  ir::Stmt stmt;                     // s, with demoted loops serial
  int64_t size_before = 0;           // estimate of s
  int64_t size_after = 0;            // estimate of stmt
  std::vector<std::string> demoted;  // loop variables of the loops made serial, in order
};

// Within `budget` estimated operations: while the estimate is over it, the
// outermost Unrolled loop (one inside no other Unrolled loop) whose unrolled
// body is largest becomes Serial. A statement with no unrolled loop left may
// stay over the budget (its size is then its statements', not a product).
// budget <= 0: no budget (s unchanged).
CodeBudgetResult fit_code_budget(const ir::Stmt& s, int64_t budget, int vector_bits = 512);

// A kernel whose estimated size is over the budget where demotion is not
// wanted (a tuning candidate: the config asks for that unrolling).
class CodeBudgetExceeded : public std::runtime_error {
 public:
  CodeBudgetExceeded(const std::string& kernel, int64_t size, int64_t budget);
  int64_t size = 0, budget = 0;
};

}  // namespace kiln::schedule
