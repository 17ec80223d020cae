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
  // Whether a register tile should share each broadcast input over as many
  // channel blocks as its accumulators allow. Intel's AVX-512 server cores
  // issue two 512-bit FMAs and two 512-bit loads a cycle, so a tile of one
  // block, one broadcast load per FMA, runs at the load ports' pace (1x1
  // convs on Sapphire Rapids: 4 blocks x 3 columns x 2 rows ran 1.4-1.6x 1
  // block x 14 columns). Not on Zen 4 (one 512-bit FMA a cycle) nor, as
  // measured on 2 threads, Zen 5 (bench/models/results/
  // fallback-experiments-2026-11-30-zen5.md).
  bool fma_waits_on_loads = false;

  int lanes(int element_bits = 32) const { return vector_bits / element_bits; }
  // Accumulators a register tile may hold: three quarters of the registers,
  // the rest for the weights and the broadcast input of each step.
  int accumulator_budget() const {
    return accumulator_registers > 0 ? accumulator_registers : vector_registers * 3 / 4;
  }
};

}  // namespace kiln
