// kiln's hand-scheduled kernels for the benchmark table: each is compiled
// for the host, checked against the reference (a wrong kernel is never
// timed), and timed with weights already in the layout the kernel wants
// (packed at build time, as a deployed model would have them).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::bench {

struct KilnResult {
  double median_ms;
  std::string config;  // the schedule config used, as JSON
};

KilnResult kiln_dense_ms(int64_t M, int64_t N, int64_t K, int repeat);
KilnResult kiln_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                          int64_t KW, int64_t stride, int64_t pad, int repeat);

}  // namespace kiln::bench
