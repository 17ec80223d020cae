// The generic schedule on a fused injective chain and a reduction: compiled
// results against plain loops, over shapes the vector width does not divide.
#include "ops/generic_schedule.h"

#include <gtest/gtest.h>

#include <random>

#include "codegen/codegen.h"
#include "ir/tensor.h"
#include "schedule/lower.h"

namespace kiln {
namespace {

using ir::Expr;
using ir::Var;

// Every ISA's lane count (NEON 4, AVX2 8, AVX-512 16), on the host's JIT:
// columns that the lanes divide and that they do not.
TEST(GenericSchedule, InjectiveChainAndRowSum) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t lanes : {4, 8, 16})
    for (int64_t rows : {1, 3, 130}) {
      for (int64_t cols : {1, 7, 15, 16, 33, 200}) {
        SCOPED_TRACE("lanes " + std::to_string(lanes) + ", " + std::to_string(rows) + "x" +
                     std::to_string(cols));
        ir::Tensor x = ir::placeholder({rows, cols}, ir::DataType::f32(), "x");
        ir::Tensor y = ir::compute(
            {rows, cols}, [&](const std::vector<Var>& i) { return ir::at(x, i[0], i[1]) * 2.0f; },
            "y");
        ir::Tensor z = ir::compute(
            {rows, cols}, [&](const std::vector<Var>& i) { return ir::at(y, i[0], i[1]) + 1.0f; },
            "z");
        ir::IterVar k = ir::reduce_axis(cols, "k");
        ir::Tensor s = ir::compute(
            {rows},
            [&](const std::vector<Var>& i) { return ir::sum(ir::at(y, i[0], k->var), {k}); }, "s");
        auto sch = ops::schedule_generic({z, s}, lanes);
        auto f = schedule::lower(sch, {x, z, s}, "chain");
        auto mod = codegen::jit_compile({f}, codegen::Target::host());
        std::vector<float> xv(rows * cols), zv(rows * cols), sv(rows);
        for (auto& v : xv) v = d(rng);
        void* args[] = {xv.data(), zv.data(), sv.data()};
        ASSERT_EQ(mod->get_function("chain")(args), 0);
        for (int64_t r = 0; r < rows; ++r) {
          double acc = 0;
          for (int64_t c = 0; c < cols; ++c) {
            EXPECT_FLOAT_EQ(zv[r * cols + c], xv[r * cols + c] * 2 + 1);
            acc += xv[r * cols + c] * 2;
          }
          EXPECT_NEAR(sv[r], acc, 1e-4) << rows << "x" << cols;
        }
      }
    }
}

}  // namespace
}  // namespace kiln
