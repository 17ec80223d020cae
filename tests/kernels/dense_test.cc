// dense_nopack and dense_pack against the reference, over shapes (primes
// among them) and configs drawn at random from spaces whose splits need not
// divide the extents.
#include "ops/dense.h"

#include <gtest/gtest.h>

#include "harness.h"
#include "ops/reference.h"

namespace kiln::test {
namespace {

using ops::DenseWorkload;

const DenseWorkload kShapes[] = {
    {1, 1, 1}, {7, 13, 5}, {16, 32, 64}, {33, 17, 29}, {64, 48, 40}, {1, 1000, 96}, {31, 64, 7},
};
const int kConfigsPerShape = configs_per_shape(6);

// A random config whose register tile a template would offer (rows <= 16,
// unrolled k <= 32): the unlimited legacy space also holds fully unrolled
// tiles that take LLVM minutes to compile and say nothing more about
// correctness.
schedule::Config random_template_sized(const schedule::ConfigSpace& space, std::mt19937_64& rng) {
  auto cfg = space.random(rng);
  for (int tries = 0; tries < 100 && (cfg.split("tile_y").back() > 16 ||
                                      cfg.split("tile_k").back() > 32);
       ++tries)
    cfg = space.random(rng);
  return cfg;
}

void check_dense(const DenseWorkload& w, bool pack, std::mt19937_64& rng) {
  auto space = pack ? ops::dense_pack_space(w, schedule::SplitPolicy::All)
                    : ops::dense_nopack_space(w, schedule::SplitPolicy::All);
  auto A = random_floats(w.M * w.K, rng), B = random_floats(w.K * w.N, rng);
  std::vector<float> ref(w.M * w.N);
  ops::reference::dense(A.data(), B.data(), ref.data(), w.M, w.N, w.K);
  for (int c = 0; c < kConfigsPerShape; ++c) {
    auto cfg = random_template_sized(space, rng);
    SCOPED_TRACE("M=" + std::to_string(w.M) + " N=" + std::to_string(w.N) +
                 " K=" + std::to_string(w.K) + " config " + cfg.to_json());
    auto kern = pack ? ops::dense_pack(w, cfg, /*pack_in_kernel=*/true) : ops::dense_nopack(w, cfg);
    std::vector<float> C(w.M * w.N, NAN);
    run_jit(kern, {A.data(), B.data(), C.data()});
    EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-5);
  }
}

TEST(DenseKernel, NopackMatchesReferenceOverRandomConfigs) {
  std::mt19937_64 rng(1);
  for (auto& w : kShapes) check_dense(w, false, rng);
}

TEST(DenseKernel, PackMatchesReferenceOverRandomConfigs) {
  std::mt19937_64 rng(2);
  for (auto& w : kShapes) check_dense(w, true, rng);
}

TEST(DenseKernel, PrepackedWeightsMatchReference) {
  std::mt19937_64 rng(3);
  DenseWorkload w{24, 96, 50};
  auto space = ops::dense_pack_space(w, schedule::SplitPolicy::Factors);
  auto A = random_floats(w.M * w.K, rng), B = random_floats(w.K * w.N, rng);
  std::vector<float> ref(w.M * w.N);
  ops::reference::dense(A.data(), B.data(), ref.data(), w.M, w.N, w.K);
  for (int c = 0; c < kConfigsPerShape; ++c) {
    auto cfg = random_template_sized(space, rng);
    SCOPED_TRACE(cfg.to_json());
    auto Bp = ops::pack_dense_weight(B.data(), w.K, w.N, ops::dense_pack_block(cfg));
    std::vector<float> C(w.M * w.N, NAN);
    run_jit(ops::dense_pack(w, cfg, false), {A.data(), Bp.data(), C.data()});
    EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-5);
  }
}

}  // namespace
}  // namespace kiln::test
