#include "ops/reference.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln::ops::reference {

void dense(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[m * K + k]) * double(B[k * N + n]);
      C[m * N + n] = static_cast<float>(acc);
    }
}

void conv2d_nchw(const float* data, const float* weight, float* out, const Conv2DParams& p) {
  int64_t OH = p.out_height(), OW = p.out_width();
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t oc = 0; oc < p.out_channels; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t ic = 0; ic < p.in_channels; ++ic)
            for (int64_t kh = 0; kh < p.kernel_h; ++kh)
              for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                int64_t ih = oh * p.stride_h - p.pad_h + kh * p.dilation_h;
                int64_t iw = ow * p.stride_w - p.pad_w + kw * p.dilation_w;
                if (ih < 0 || ih >= p.height || iw < 0 || iw >= p.width) continue;
                acc +=
                    double(data[((n * p.in_channels + ic) * p.height + ih) * p.width + iw]) *
                    double(weight[((oc * p.in_channels + ic) * p.kernel_h + kh) * p.kernel_w + kw]);
              }
          out[((n * p.out_channels + oc) * OH + oh) * OW + ow] = static_cast<float>(acc);
        }
}

void conv2d_nchw_grouped(const float* data, const float* weight, float* out,
                         const Conv2DAttrs& p) {
  int64_t OH = p.out_height(), OW = p.out_width();
  int64_t icg = p.in_channels / p.groups, ocg = p.out_channels / p.groups;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t oc = 0; oc < p.out_channels; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = 0;
          for (int64_t i = 0; i < icg; ++i)
            for (int64_t kh = 0; kh < p.kernel_h; ++kh)
              for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
                int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
                int64_t iw = ow * p.stride_w - p.pad_left + kw * p.dilation_w;
                if (ih < 0 || ih >= p.height || iw < 0 || iw >= p.width) continue;
                int64_t ic = oc / ocg * icg + i;
                acc += double(data[((n * p.in_channels + ic) * p.height + ih) * p.width + iw]) *
                       double(weight[((oc * icg + i) * p.kernel_h + kh) * p.kernel_w + kw]);
              }
          out[((n * p.out_channels + oc) * OH + oh) * OW + ow] = static_cast<float>(acc);
        }
}

void batch_matmul(const float* a, const float* w, float* c, int64_t B, int64_t Bb, int64_t M,
                  int64_t N, int64_t K) {
  for (int64_t b = 0; b < B; ++b)
    dense(a + b * M * K, w + (Bb == 1 ? 0 : b) * K * N, c + b * M * N, M, N, K);
}

std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double max_relative_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

}  // namespace kiln::ops::reference
