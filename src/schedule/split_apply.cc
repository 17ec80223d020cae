#include "schedule/split_apply.h"

namespace kiln::schedule {

std::vector<IterVar> apply_split(const Stage& s, const IterVar& iv,
                                 const std::vector<int64_t>& factors) {
  std::vector<IterVar> loops(factors.size());
  IterVar rest = iv;
  for (size_t i = factors.size(); i-- > 1;) {
    auto [outer, inner] = s->split(rest, factors[i]);
    loops[i] = inner;
    rest = outer;
  }
  loops[0] = rest;
  return loops;
}

}  // namespace kiln::schedule
