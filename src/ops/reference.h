// Plain C++ reference implementations: the ground truth every generated
// kernel is compared against. Simple loops, no tricks, float accumulation in
// double where it helps the comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::ops::reference {

// C[M, N] = A[M, K] * B[K, N], row-major.
void dense(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K);

struct Conv2DParams {
  int64_t batch, in_channels, height, width;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
  int64_t out_height() const {
    return (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) / stride_h + 1;
  }
  int64_t out_width() const {
    return (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) / stride_w + 1;
  }
};

// NCHW data, OIHW weights, NCHW output; zero padding.
void conv2d_nchw(const float* data, const float* weight, float* out, const Conv2DParams& p);

// Convolution with asymmetric zero padding and groups (depthwise: groups =
// in_channels = out_channels). NCHW data, weight [OC, C / groups, KH, KW].
struct Conv2DAttrs {
  int64_t batch, in_channels, height, width;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  int64_t out_height() const {
    return (height + pad_top + pad_bottom - dilation_h * (kernel_h - 1) - 1) / stride_h + 1;
  }
  int64_t out_width() const {
    return (width + pad_left + pad_right - dilation_w * (kernel_w - 1) - 1) / stride_w + 1;
  }
  bool padded() const { return pad_top || pad_left || pad_bottom || pad_right; }
};
void conv2d_nchw_grouped(const float* data, const float* weight, float* out, const Conv2DAttrs& p);

// c[b, M, N] = a[b, M, K] * w[b or 0, K, N]: `Bb` is B or 1 (one w for every batch).
void batch_matmul(const float* a, const float* w, float* c, int64_t B, int64_t Bb, int64_t M,
                  int64_t N, int64_t K);

// n floats drawn uniformly from [lo, hi) with a fixed seed.
std::vector<float> random_uniform(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// Relative error max|a-b| / max(max|b|, tiny): one number for a whole tensor.
double max_relative_error(const float* a, const float* b, int64_t n);

}  // namespace kiln::ops::reference
