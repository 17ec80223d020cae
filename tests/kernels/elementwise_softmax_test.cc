// A chain of elementwise ops (math intrinsics included) and a softmax, each
// under random schedules: splits that need not divide, vectorized and
// unrolled inner loops, parallel outer loops, and every way to place the
// intermediate stages (inline, root, inside the consumer's loops).
#include <gtest/gtest.h>

#include <cmath>

#include "harness.h"
#include "ops/reference.h"
#include "schedule/config_space.h"
#include "schedule/split_apply.h"

namespace kiln::test {
namespace {

using namespace kiln::ir;
using schedule::ConfigSpace;
using schedule::SplitPolicy;

// mode 0: inline, 1: root, 2: inside `host` at loop `at`.
void place(schedule::Schedule& sch, const Tensor& t, int64_t mode, const schedule::Stage& host,
           const IterVar& at) {
  if (mode == 0)
    sch[t]->compute_inline();
  else if (mode == 2)
    sch[t]->compute_at(host, at);
}

// Splits both axes of stage s by the config, parallel rows, vectorized (or
// unrolled) columns; returns the outer row loop and the outer column loop.
std::pair<IterVar, IterVar> tile_2d(const schedule::Stage& s, const schedule::Config& cfg) {
  auto r = apply_split(s, s->axis(0), cfg.split("tile_r"));
  auto c = apply_split(s, s->axis(1), cfg.split("tile_c"));
  s->reorder({r[0], c[0], r[1], c[1]});
  if (cfg.knob("parallel")) s->parallel(r[0]);
  int64_t inner = cfg.knob("inner");
  if (inner == 1) s->vectorize(c[1]);
  if (inner == 2) s->unroll(c[1]);
  if (cfg.knob("unroll_rows")) s->unroll(r[1]);
  return {r[0], c[0]};
}

ConfigSpace space_2d(int64_t rows, int64_t cols) {
  ConfigSpace space;
  space.define_split("tile_r", rows, 2, SplitPolicy::All);
  space.define_split("tile_c", cols, 2, SplitPolicy::All);
  space.define_knob("parallel", {0, 1});
  space.define_knob("inner", {0, 1, 2});
  space.define_knob("unroll_rows", {0, 1});
  space.define_knob("mode_a", {0, 1, 2});
  space.define_knob("mode_b", {0, 1, 2});
  return space;
}

float chain_reference(float a, float b) {
  float t1 = a * b + 1.0f;
  float t2 = std::max(t1, 0.0f);
  float t3 = 1.0f / (1.0f + std::exp(-t2)) * std::tanh(a);
  return std::exp(-t3) + std::sqrt(std::fabs(b)) + std::erf(a) - std::log(b * b + 0.5f) +
         std::floor(a * 3.0f) / 4.0f;
}

TEST(ElementwiseKernel, ChainMatchesReferenceOverRandomSchedules) {
  std::mt19937_64 rng(21);
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {5, 37}, {16, 64}, {13, 100}, {3, 129}};
  for (auto [R, C] : shapes) {
    auto space = space_2d(R, C);
    auto a = random_floats(R * C, rng, -2.0f, 2.0f), b = random_floats(R * C, rng, -2.0f, 2.0f);
    std::vector<float> ref(R * C);
    for (int64_t i = 0; i < R * C; ++i) ref[i] = chain_reference(a[i], b[i]);
    for (int c = 0; c < configs_per_shape(8); ++c) {
      auto cfg = space.random(rng);
      SCOPED_TRACE(std::to_string(R) + "x" + std::to_string(C) + " config " + cfg.to_json());
      Tensor A = placeholder({R, C}, DataType::f32(), "A"),
             B = placeholder({R, C}, DataType::f32(), "B");
      auto ab = [&](auto f) {
        return [f](const std::vector<Var>& i) { return f(Expr(i[0]), Expr(i[1])); };
      };
      Tensor T1 = compute(
          {R, C}, ab([&](Expr i, Expr j) { return at(A, i, j) * at(B, i, j) + 1.0f; }), "T1");
      Tensor T2 = compute(
          {R, C}, ab([&](Expr i, Expr j) { return max(at(T1, i, j), make_float(0.0)); }), "T2");
      Tensor T3 = compute(
          {R, C}, ab([&](Expr i, Expr j) { return sigmoid(at(T2, i, j)) * tanh(at(A, i, j)); }),
          "T3");
      Tensor D = compute({R, C}, ab([&](Expr i, Expr j) {
                           Expr av = at(A, i, j), bv = at(B, i, j);
                           return exp(-at(T3, i, j)) + sqrt(fabs(bv)) + erf(av) -
                                  log(bv * bv + 0.5f) + floor(av * 3.0f) / 4.0f;
                         }),
                         "D");
      ops::Kernel k{"chain", {A, B, D}, schedule::create_schedule({D})};
      auto [ro, co] = tile_2d(k.sch[D], cfg);
      int64_t mode_t3 = cfg.knob("mode_a"), mode_t1 = cfg.knob("mode_b");
      // A root stage cannot read one computed inside D's loops.
      if (mode_t3 == 1 && mode_t1 == 2) mode_t1 = 1;
      place(k.sch, T3, mode_t3, k.sch[D], co);
      place(k.sch, T1, mode_t1, k.sch[D], ro);
      k.sch[T2]->compute_inline();
      std::vector<float> out(R * C, NAN);
      run_jit(k, {a.data(), b.data(), out.data()});
      EXPECT_LE(ops::reference::max_relative_error(out.data(), ref.data(), out.size()), 1e-5);
    }
  }
}

TEST(SoftmaxKernel, MatchesReferenceOverRandomSchedules) {
  std::mt19937_64 rng(22);
  const std::pair<int64_t, int64_t> shapes[] = {{1, 10}, {4, 1000}, {7, 33}, {32, 64}};
  for (auto [R, C] : shapes) {
    auto space = space_2d(R, C);
    auto x = random_floats(R * C, rng, -5.0f, 5.0f);
    std::vector<float> ref(R * C);
    for (int64_t r = 0; r < R; ++r) {
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(x[r * C + c]));
      for (int64_t c = 0; c < C; ++c) s += std::exp(double(x[r * C + c]) - mx);
      for (int64_t c = 0; c < C; ++c)
        ref[r * C + c] = float(std::exp(double(x[r * C + c]) - mx) / s);
    }
    for (int c = 0; c < configs_per_shape(8); ++c) {
      auto cfg = space.random(rng);
      SCOPED_TRACE(std::to_string(R) + "x" + std::to_string(C) + " config " + cfg.to_json());
      Tensor X = placeholder({R, C}, DataType::f32(), "X");
      IterVar k1 = reduce_axis(C, "k1"), k2 = reduce_axis(C, "k2");
      Tensor M = compute(
          {R}, [&](const std::vector<Var>& i) { return reduce_max(at(X, i[0], k1->var), {k1}); },
          "max");
      Tensor E = compute(
          {R, C}, [&](const std::vector<Var>& i) { return exp(at(X, i[0], i[1]) - at(M, i[0])); },
          "e");
      Tensor S = compute(
          {R}, [&](const std::vector<Var>& i) { return sum(at(E, i[0], k2->var), {k2}); }, "sum");
      Tensor Y = compute(
          {R, C}, [&](const std::vector<Var>& i) { return at(E, i[0], i[1]) / at(S, i[0]); },
          "softmax");
      ops::Kernel k{"softmax", {X, Y}, schedule::create_schedule({Y})};
      auto [ro, co] = tile_2d(k.sch[Y], cfg);
      // The reductions must be complete before a row is normalized: at root or per row tile.
      int64_t mode_e = cfg.knob("mode_a");
      if (mode_e == 0) k.sch[E]->compute_inline();
      if (mode_e == 2) k.sch[E]->compute_at(k.sch[Y], ro);
      // A root stage cannot read one computed inside Y's loops, and the
      // reverse: e at root forces max to root, e per row forces sum per row.
      bool per_row = mode_e == 2 || (mode_e == 0 && cfg.knob("mode_b") != 1);
      if (per_row) {
        k.sch[S]->compute_at(k.sch[Y], ro);
        k.sch[M]->compute_at(k.sch[Y], ro);
      }
      if (cfg.knob("inner") == 1)
        k.sch[S]->vectorize(k.sch[S]->reduce_axis(0));  // falls back to serial
      std::vector<float> out(R * C, NAN);
      run_jit(k, {x.data(), out.data()});
      EXPECT_LE(ops::reference::max_relative_error(out.data(), ref.data(), out.size()), 1e-5);
    }
  }
}

}  // namespace
}  // namespace kiln::test
