#include "ops/int8_weight_range.h"

#include <string>

#include "ops/op_template.h"

namespace kiln::ops {

namespace {
constexpr const char* kParam = "weight_range";
}

bool narrow_weights(const Workload& w) {
  for (const auto& [name, values] : w.params) {
    if (name != kParam) continue;
    if (values.size() != 1 || values[0] != kNarrowWeightBits)
      detail::bad_workload(w, std::string(kParam) + " must be [" +
                                  std::to_string(kNarrowWeightBits) +
                                  "] (weights within [-64, 64]) when present");
    return true;
  }
  return false;
}

Workload with_narrow_weights(Workload w) {
  if (!narrow_weights(w)) w.params.push_back({kParam, {kNarrowWeightBits}});
  return w;
}

bool weights_fit_narrow(const int8_t* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (w[i] < -kNarrowWeightMax || w[i] > kNarrowWeightMax) return false;
  return true;
}

void fill_random_narrow(int8_t* w, int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> v(-kNarrowWeightMax, kNarrowWeightMax), q(0, 7);
  for (int64_t i = 0; i < n; ++i) {
    int r = q(rng);
    w[i] = static_cast<int8_t>(r == 0 ? kNarrowWeightMax : r == 1 ? -kNarrowWeightMax : v(rng));
  }
}

}  // namespace kiln::ops
