// 7-bit int8 weights: the optional workload parameter weight_range=[7] of the
// int8 templates whose weights are build-time constants (conv2d_NCHWc_int8.x86,
// dense_int8.x86). It promises that every weight is within [-64, 64], which lets
// x86 targets without a dot instruction (AVX2, AVX-512BW without VNNI) use
// pmaddubsw + pmaddwd(ones) (ir::Intrinsic::DotU8I8NarrowB, codegen/dot_product.h):
// twice the multiply rate of the exact sequence, exact under the promise (the int16
// pair sums of pmaddubsw stay within 2 * 255 * 64 = 32640). The graph sets it only
// after checking the constant weight's values (graph/passes/strategy.cc); `kiln
// quantize --reduce-range` writes such weights. Being a workload parameter, it is
// part of the key: tuning records of the two forms stay apart.
#pragma once

#include <cstdint>
#include <random>

#include "ir/expr.h"
#include "ops/workload.h"

namespace kiln::ops {

constexpr int64_t kNarrowWeightBits = 7;
// |w| <= 64: 2 * 255 * 64 < 32767, the promise of ir::Intrinsic::DotU8I8NarrowB.
constexpr int kNarrowWeightMax = ir::kDot4NarrowBMax;

// Whether w carries weight_range=[7]; absent: false. Any other value is a
// bad workload (detail::bad_workload naming it).
bool narrow_weights(const Workload& w);

// w with weight_range=[7] appended (the last parameter of the key).
Workload with_narrow_weights(Workload w);

// Whether every one of the n weights is within [-64, 64].
bool weights_fit_narrow(const int8_t* w, int64_t n);

// n random weights in [-64, 64]: uniform, with a quarter of them at +-64 (the
// values that bring pmaddubsw's pair sums closest to saturation).
void fill_random_narrow(int8_t* w, int64_t n, std::mt19937_64& rng);

}  // namespace kiln::ops
