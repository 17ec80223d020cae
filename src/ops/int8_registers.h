// The register budget of an int8 register tile: how many accumulators fit
// beside what the target's lowering of dot4_u8i8 holds in registers.
//
// With a dot instruction (Isa::int8_dot_instruction: vpdpbusd, sdot / usdot)
// a step needs the broadcast input and one vector per weight vector, as an
// fp32 FMA tile does: the ISA's usual budget (three quarters of the
// registers). Without it (AVX2, AVX-512BW without VNNI: vpmaddwd on int16
// pairs, codegen/dot_product.h) every weight vector is widened to two int16
// vectors kept for all rows of the tile, the broadcast input to two, and the
// two products need a register each: 2 * weight_vectors + 4 registers beside
// the accumulators. Counting them with the fp32 rule left 12 accumulators on
// haswell's 16 ymm registers and spilled 2-4 of them in every ResNet kernel.
// With 7-bit weights (narrow_b: the workload's weight_range=7, ops/int8_weight_range.h)
// the lowering is pmaddubsw + pmaddwd(ones) on the bytes as they are: beside the
// accumulators only the broadcast input, the ones, one product and the weight
// vectors themselves, weight_vectors + 3 registers (close to the fp32 budget).
// Derived from the Target's Isa row, never from the host.
#pragma once

#include <cstdint>

#include "support/isa.h"

namespace kiln::ops::detail {

// Registers beside the accumulators of an int8 tile with `weight_vectors`
// vectors of weights per step (0 with a dot instruction beyond the usual quarter).
int int8_reserved_registers(const Isa& isa, int64_t weight_vectors, bool narrow_b = false);

// The accumulators the fallback of an int8 tile may use: the ISA's usual budget,
// or less when the dot is a sequence (at least 1).
int int8_accumulator_budget(const Isa& isa, int64_t weight_vectors, bool narrow_b = false);

// isa with that budget, for the fallback rules the int8 templates share with
// the fp32 ones (detail::fallback_ow_tile, dense's rows).
Isa int8_tile_isa(const Isa& isa, int64_t weight_vectors, bool narrow_b = false);

// Whether `accumulators` fit on isa with `weight_vectors` weight vectors per
// step: the tuner's bound (all registers but the reserved ones, or all of them
// with a dot instruction, as the fp32 templates' fits()).
bool int8_tile_fits(const Isa& isa, int64_t accumulators, int64_t weight_vectors,
                    bool narrow_b = false);

}  // namespace kiln::ops::detail
