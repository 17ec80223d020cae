// The generic schedule on a fused injective chain and a reduction: compiled
// results against plain loops, over shapes the vector width does not divide.
#include "ops/generic_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "codegen/codegen.h"
#include "ir/tensor.h"
#include "schedule/lower.h"

namespace kiln {
namespace {

int64_t element_count(const ir::Tensor& t) {
  int64_t n = 1;
  for (const ir::Expr& e : t->shape) n *= *ir::as_const_int(e);
  return n;
}

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

// NCHW[x]c stages with their rows before their channel blocks
// (schedule_generic's rows_first, graph/passes/parallel_splits.h): an
// elementwise stage, a strided 3x3 max pool (vector reduction) and a global
// sum over the rows (one row: a channel split whatever rows_first says), with
// rows, blocks and lanes the vectors and threads do not divide. Both orders
// compute the plain loops' results; with rows first the parallel loop's
// leading dims are n and the rows.
TEST(GenericSchedule, RowsFirstNchwcStagesMatchPlainLoops) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<float> d(-1, 1);
  const int64_t lanes = 8;
  for (int64_t cb : {1, 3})
    for (int64_t h : {5, 9, 130})
      for (int64_t lane : {4, 8, 16})
        for (bool rows_first : {false, true}) {
          const int64_t w = 7, oh = (h - 1) / 2 + 1, ow = (w - 1) / 2 + 1;
          SCOPED_TRACE("cb " + std::to_string(cb) + " h " + std::to_string(h) + " lane " +
                       std::to_string(lane) + (rows_first ? " rows first" : " channels first"));
          ir::Tensor x = ir::placeholder({1, cb, h, w, lane}, ir::DataType::f32(), "x");
          ir::Tensor y = ir::compute(
              {1, cb, h, w, lane},
              [&](const std::vector<Var>& i) {
                return ir::at(x, i[0], i[1], i[2], i[3], i[4]) * 2.0f + 1.0f;
              },
              "y");
          ir::IterVar kh = ir::reduce_axis(3, "kh"), kw = ir::reduce_axis(3, "kw");
          ir::Tensor pool = ir::compute(
              {1, cb, oh, ow, lane},
              [&](const std::vector<Var>& i) {
                Expr r = i[2] * 2 + kh->var - 1, c = i[3] * 2 + kw->var - 1;
                Expr zero = Expr(int64_t{0});
                Expr inside = ir::logical_and(ir::logical_and(r >= zero, r < Expr(h)),
                                              ir::logical_and(c >= zero, c < Expr(w)));
                Expr v = ir::select(inside,
                                    ir::at(x, i[0], i[1], ir::max(r, zero), ir::max(c, zero), i[4]),
                                    Expr(-1e30f));
                return ir::reduce_max(v, {kh, kw});
              },
              "pool");
          ir::IterVar rh = ir::reduce_axis(h, "rh"), rw = ir::reduce_axis(w, "rw");
          ir::Tensor total = ir::compute(
              {1, cb, 1, 1, lane},
              [&](const std::vector<Var>& i) {
                return ir::sum(ir::at(x, i[0], i[1], rh->var, rw->var, i[4]), {rh, rw});
              },
              "total");
          std::vector<float> xv(cb * h * w * lane);
          for (auto& v : xv) v = d(rng);
          for (const ir::Tensor& out : {y, pool, total}) {
            auto sch = ops::schedule_generic({out}, lanes, rows_first);
            const schedule::Stage& st = sch[out];
            if (rows_first && out != total)
              EXPECT_EQ(st->leaf_iter_vars[0]->var.name().rfind(
                            st->op->axis[0]->var.name() + "." + st->op->axis[2]->var.name(), 0),
                        0u)
                  << out->name << "'s parallel loop " << st->leaf_iter_vars[0]->var.name();
            auto f = schedule::lower(sch, {x, out}, "k");
            auto mod = codegen::jit_compile({f}, codegen::Target::host());
            std::vector<float> ov(element_count(out), NAN);
            void* args[] = {xv.data(), ov.data()};
            ASSERT_EQ(mod->get_function("k")(args), 0);
            auto at = [&](int64_t c, int64_t r, int64_t q, int64_t l) {
              return xv[((c * h + r) * w + q) * lane + l];
            };
            for (int64_t c = 0; c < cb; ++c)
              for (int64_t l = 0; l < lane; ++l) {
                double acc = 0;
                for (int64_t r = 0; r < h; ++r)
                  for (int64_t q = 0; q < w; ++q) {
                    acc += at(c, r, q, l);
                    if (out == y)
                      ASSERT_FLOAT_EQ(ov[((c * h + r) * w + q) * lane + l], at(c, r, q, l) * 2 + 1);
                  }
                if (out == total) EXPECT_NEAR(ov[c * lane + l], acc, 1e-3);
                if (out != pool) continue;
                for (int64_t r = 0; r < oh; ++r)
                  for (int64_t q = 0; q < ow; ++q) {
                    float m = -1e30f;
                    for (int64_t a = 0; a < 3; ++a)
                      for (int64_t b = 0; b < 3; ++b) {
                        int64_t rr = r * 2 + a - 1, cc = q * 2 + b - 1;
                        if (rr >= 0 && rr < h && cc >= 0 && cc < w)
                          m = std::max(m, at(c, rr, cc, l));
                      }
                    ASSERT_EQ(ov[((c * oh + r) * ow + q) * lane + l], m) << r << "," << q;
                  }
              }
          }
        }
}

}  // namespace
}  // namespace kiln
