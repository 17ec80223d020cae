// oneDNN (Debian's libdnnl 2.6, OpenMP runtime) timings of the operators kiln
// benchmarks against: the vendor-library bar its kernels are compared with.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::bench {

// Sets the OpenMP thread count oneDNN runs with and returns the count now in
// effect, or -1 when libgomp's entry points cannot be found. Call it before the
// first timing: the count applies to parallel regions started afterwards.
int set_onednn_threads(int n);

// Median milliseconds of C = A * B, fp32, all row-major (A MxK, B KxN, C MxN),
// through dnnl_sgemm (the whole call is timed, packing of B included).
// Inputs are ops::reference::random_uniform(M * K, 1) and (K * N, 2); with
// `result`, C (row-major) is copied there, for checks against the reference.
double onednn_sgemm_ms(int64_t M, int64_t N, int64_t K, int repeat,
                       std::vector<float>* result = nullptr);

// Median milliseconds of a fp32 2-D convolution (NCHW semantics, OIHW weights,
// square kernel stride and symmetric padding, no bias) in the layouts oneDNN
// prefers (format_tag::any, usually nChw16c / OIhw16i16o here). Data and
// weights are reordered into those layouts once, before timing: only the
// convolution primitive's execution is timed, as a tuned kiln build
// pre-packs weights and keeps activations blocked. Inputs (NCHW, OIHW) are
// ops::reference::random_uniform(..., 3) and (..., 4); with `result`, the
// output reordered to NCHW is copied there.
double onednn_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                        int64_t KW, int64_t stride, int64_t pad, int repeat,
                        std::vector<float>* result = nullptr);

}  // namespace kiln::bench
