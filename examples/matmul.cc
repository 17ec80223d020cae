// The README's example: a 1024 x 1024 matrix multiply written as a tensor
// expression, scheduled by hand (register tile, parallel, vectorized),
// compiled with the JIT, checked against the reference and timed.
#include <chrono>
#include <cstdio>

#include "codegen/codegen.h"
#include "ir/tensor.h"
#include "ops/reference.h"
#include "schedule/lower.h"

using namespace kiln;
using namespace kiln::ir;

int main() {
  const int64_t n = 1024;
  Tensor A = placeholder({n, n}, DataType::f32(), "A");
  Tensor B = placeholder({n, n}, DataType::f32(), "B");
  IterVar k = reduce_axis(n, "k");
  Tensor C = compute(
      {n, n},
      [&](const std::vector<Var>& i) {
        return sum(at(A, i[0], k->var) * at(B, k->var, i[1]), {k});
      },
      "C");

  schedule::Schedule s = schedule::create_schedule({C});
  Tensor CC = s.cache_write(C, MemScope::Local);             // register tile
  auto t = s[C]->tile(s[C]->axis(0), s[C]->axis(1), 8, 32);  // yo, xo, yi, xi
  s[C]->parallel(s[C]->fuse(t[0], t[1]));
  s[C]->vectorize(t[3]);
  s[CC]->compute_at(s[C], s[C]->leaf_iter_vars[0]);
  s[CC]->reorder({s[CC]->reduce_axis(0), s[CC]->axis(0), s[CC]->axis(1)});
  s[CC]->unroll(s[CC]->axis(0));
  s[CC]->vectorize(s[CC]->axis(1));

  ir::LoweredFunc f = schedule::lower(s, {A, B, C}, "matmul");
  auto jit = codegen::jit_compile({f}, codegen::Target::host());

  auto a = ops::reference::random_uniform(n * n, 1), b = ops::reference::random_uniform(n * n, 2);
  std::vector<float> c(n * n), ref(n * n);
  void* args[] = {a.data(), b.data(), c.data()};
  jit->get_function("matmul")(args);
  ops::reference::dense(a.data(), b.data(), ref.data(), n, n, n);
  double err = ops::reference::max_relative_error(c.data(), ref.data(), n * n);

  auto start = std::chrono::steady_clock::now();
  const int runs = 10;
  for (int r = 0; r < runs; ++r) jit->get_function("matmul")(args);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      runs;
  std::printf("matmul 1024^3: max rel. error %.1e, %.2f ms, %.1f GFLOP/s\n", err, ms,
              2.0 * n * n * n / ms * 1e-6);
  return err <= 1e-5 ? 0 : 1;
}
