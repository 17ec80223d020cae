// kiln's kernels for the benchmark table: each is compiled for the host,
// checked against the reference (a wrong kernel is never timed), and timed
// with weights already in the layout the kernel wants (packed at build time,
// as a deployed model would have them).
//
// Configs are built from the template's own fallback(w) with a few hand-picked
// knobs on top (a row's register tile), never written out whole: a knob the
// template gains later keeps its fallback value here, so it cannot break the
// benchmark. A hand-picked knob the space no longer accepts (renamed, or a
// value that is no longer a candidate) is left at its fallback value and
// reported in `dropped`; `kiln_bench --smoke` fails on that for the full-size
// rows, so the picks are updated rather than silently lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::bench {

struct KilnResult {
  double median_ms;
  std::string config;                // the schedule config used, as JSON
  double rel_error;                  // against ops/reference.h, before timing
  std::vector<std::string> dropped;  // hand-picked knobs not applied, with why
};

// The config a row would use, without compiling anything: its JSON and the
// hand-picked knobs that could not be applied.
struct ConfigCheck {
  std::string config;
  std::vector<std::string> dropped;
};
ConfigCheck kiln_dense_config(int64_t M, int64_t N, int64_t K);
ConfigCheck kiln_conv2d_config(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                               int64_t KW, int64_t stride, int64_t pad);

// Throws std::runtime_error when the kernel's output differs from the
// reference by more than 1e-4 (relative to the reference's largest value).
KilnResult kiln_dense_ms(int64_t M, int64_t N, int64_t K, int repeat);
KilnResult kiln_conv2d_ms(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH,
                          int64_t KW, int64_t stride, int64_t pad, int repeat);

}  // namespace kiln::bench
