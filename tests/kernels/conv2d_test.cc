// conv2d in NCHW (stride, padding, dilation; padding inlined, at root, or per
// channel tile) and in NCHW[x]c, against the reference over random configs.
#include "ops/conv2d.h"

#include <gtest/gtest.h>

#include "harness.h"

namespace kiln::test {
namespace {

using ops::Conv2DParams;

std::string describe(const Conv2DParams& p) {
  return "N" + std::to_string(p.batch) + " C" + std::to_string(p.in_channels) + " " +
         std::to_string(p.height) + "x" + std::to_string(p.width) + " OC" +
         std::to_string(p.out_channels) + " k" + std::to_string(p.kernel_h) + "x" +
         std::to_string(p.kernel_w) + " s" + std::to_string(p.stride_h) + " p" +
         std::to_string(p.pad_h) + " d" + std::to_string(p.dilation_h);
}

std::vector<float> reference_output(const Conv2DParams& p, const std::vector<float>& x,
                                    const std::vector<float>& w) {
  std::vector<float> ref(p.batch * p.out_channels * p.out_height() * p.out_width());
  ops::reference::conv2d_nchw(x.data(), w.data(), ref.data(), p);
  return ref;
}

TEST(Conv2dKernel, NchwMatchesReferenceOverRandomConfigs) {
  std::mt19937_64 rng(11);
  const Conv2DParams shapes[] = {
      {1, 3, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1},    // padded 3x3
      {1, 5, 11, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1},   // stride 2, odd sizes
      {2, 4, 10, 10, 5, 3, 3, 1, 1, 2, 2, 2, 2},  // dilation 2, pad 2, batch 2
      {1, 8, 6, 6, 8, 1, 1, 1, 1, 0, 0, 1, 1},    // 1x1
      {1, 3, 13, 13, 7, 5, 5, 2, 2, 2, 2, 1, 1},  // 5x5 stride 2
      {1, 2, 8, 9, 3, 2, 3, 1, 2, 1, 0, 1, 1},    // rectangular kernel, mixed stride
  };
  for (const auto& p : shapes) {
    auto space = ops::conv2d_nchw_space(p, schedule::SplitPolicy::All);
    auto x = random_floats(p.batch * p.in_channels * p.height * p.width, rng);
    auto w = random_floats(p.out_channels * p.in_channels * p.kernel_h * p.kernel_w, rng);
    auto ref = reference_output(p, x, w);
    for (int c = 0; c < configs_per_shape(6); ++c) {
      auto cfg = space.random(rng);
      SCOPED_TRACE(describe(p) + " config " + cfg.to_json());
      std::vector<float> out(ref.size(), NAN);
      run_jit(ops::conv2d_nchw(p, cfg), {x.data(), w.data(), out.data()});
      EXPECT_LE(ops::reference::max_relative_error(out.data(), ref.data(), ref.size()), 1e-5);
    }
  }
}

TEST(Conv2dKernel, NchwcMatchesReferenceOverRandomConfigs) {
  std::mt19937_64 rng(12);
  const Conv2DParams shapes[] = {
      {1, 16, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1},
      {1, 8, 10, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1},
      {1, 12, 6, 6, 8, 1, 1, 1, 1, 0, 0, 1, 1},
  };
  for (const auto& p : shapes) {
    auto space = ops::conv2d_nchwc_space(p);
    auto x = random_floats(p.batch * p.in_channels * p.height * p.width, rng);
    auto w = random_floats(p.out_channels * p.in_channels * p.kernel_h * p.kernel_w, rng);
    auto ref = reference_output(p, x, w);
    for (int c = 0; c < configs_per_shape(6); ++c) {
      auto cfg = space.random(rng);
      SCOPED_TRACE(describe(p) + " config " + cfg.to_json());
      int64_t icb = ops::conv2d_nchwc_ic_block(cfg), ocb = ops::conv2d_nchwc_oc_block(cfg);
      auto xb = ops::nchw_to_nchwc(x.data(), p.batch, p.in_channels, p.height, p.width, icb);
      auto wb = ops::oihw_to_blocked(w.data(), p.out_channels, p.in_channels, p.kernel_h,
                                     p.kernel_w, icb, ocb);
      std::vector<float> out(ref.size(), NAN);
      run_jit(ops::conv2d_nchwc(p, cfg), {xb.data(), wb.data(), out.data()});
      auto plain = ops::nchwc_to_nchw(out.data(), p.batch, p.out_channels, p.out_height(),
                                      p.out_width(), ocb);
      EXPECT_LE(ops::reference::max_relative_error(plain.data(), ref.data(), ref.size()), 1e-5);
    }
  }
}

}  // namespace
}  // namespace kiln::test
