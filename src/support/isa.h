// One row of kiln's per-ISA table (codegen::Target::isa() fills it from the
// target's features): what templates derive lane counts, register budgets
// and tile sizes from, instead of a constant of one machine.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct Isa {
  std::string isa_class;      // "x86_64-avx512", "x86_64-avx2", "x86_64-sse",
                              // "aarch64-neon", "armv7-neon", or "generic"
  int vector_bits = 128;      // widest profitable vector
  int vector_registers = 16;  // architectural vector registers
  int fma_per_cycle = 1;      // vector FMAs issued per cycle per core
  // Intel AMX tile instructions (amx-tile plus amx-int8: tdpbusd; plus
  // amx-bf16: tdpbf16ps): strategy rows pick the tile templates by these,
  // from the target's features, never the host's.
  bool amx_int8 = false;
  bool amx_bf16 = false;
  // Whether one instruction computes the 4-way u8 x s8 dot with its accumulate
  // (vpdpbusd, Arm sdot / usdot). Without it the dot is a sequence
  // (codegen/dot_product.h) whose widened operands and products hold registers
  // beside an int8 register tile (ops/int8_registers.h counts them).
  bool int8_dot_instruction = false;
  // The accumulators a register tile may hold when a template needs another
  // budget than three quarters of the registers (0: that default).
  int accumulator_registers = 0;
  // The L1 data cache per core, in bytes (0: unknown), from the target's
  // cache table (codegen::cache_sizes): what a reduction's weights must fit
  // to be reused across a row's register tiles instead of streaming from L2.
  int64_t l1d_bytes = 0;
  // The L2 cache per core, in bytes (0: unknown), from the same table: what a
  // layer's input or a group of register tiles' weights must fit to be read
  // from beyond it once, not once per output-channel tile.
  int64_t l2_bytes = 0;

  int lanes(int element_bits = 32) const { return vector_bits / element_bits; }
  // Accumulators a register tile may hold: three quarters of the registers,
  // the rest for the weights and the broadcast input of each step.
  int accumulator_budget() const {
    return accumulator_registers > 0 ? accumulator_registers : vector_registers * 3 / 4;
  }
};

}  // namespace kiln
