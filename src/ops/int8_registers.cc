#include "ops/int8_registers.h"

#include <algorithm>

namespace kiln::ops::detail {

int int8_reserved_registers(const Isa& isa, int64_t weight_vectors, bool narrow_b) {
  if (isa.int8_dot_instruction) return 0;
  if (narrow_b) return int(weight_vectors + 3);  // input, ones, product, weights
  return int(2 * weight_vectors + 4);
}

int int8_accumulator_budget(const Isa& isa, int64_t weight_vectors, bool narrow_b) {
  int budget = isa.accumulator_budget();
  if (isa.int8_dot_instruction) return budget;
  return std::max(1, std::min(budget, isa.vector_registers -
                                          int8_reserved_registers(isa, weight_vectors, narrow_b)));
}

Isa int8_tile_isa(const Isa& isa, int64_t weight_vectors, bool narrow_b) {
  Isa r = isa;
  r.accumulator_registers = int8_accumulator_budget(isa, weight_vectors, narrow_b);
  return r;
}

bool int8_tile_fits(const Isa& isa, int64_t accumulators, int64_t weight_vectors, bool narrow_b) {
  return accumulators <=
         isa.vector_registers - int8_reserved_registers(isa, weight_vectors, narrow_b);
}

}  // namespace kiln::ops::detail
