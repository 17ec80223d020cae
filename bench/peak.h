// The machine's fp32 FMA peak, measured now: this VM's throughput varies from
// window to window (MACHINE.md), so kernels are also reported against the
// peak measured in the same run, beside MACHINE.md's figure.
#pragma once

namespace kiln::bench {

// GFLOP/s of independent FMA chains on `threads` threads (median of runs), at
// one vector width: 512 (zmm, 24 chains) or 256 (ymm, 12 chains: AVX2's 16
// registers). 0 when this CPU lacks the width's FMA.
double measured_fma_peak_gflops(int threads, int vector_bits = 512);

// GOP/s (one multiply and one add per u8 x s8 product) of independent AVX-512
// VNNI vpdpbusd chains (zmm, 16 chains: 16 lanes x 4 products each) on
// `threads` threads, median of runs. 0 when this CPU lacks avx512vnni.
double measured_vnni_peak_gops(int threads);

// The two u8 x s8 dot sequences a CPU without VNNI has (ymm, AVX2), each as
// independent chains with the operands' widening out of the loop, so that
// only the multiply and add uops that every dot of a register tile pays are
// timed:
//   Pmaddwd    two vpmaddwd on the bytes widened to int16 pairs and two
//              vpaddd: kiln's exact lowering (codegen/dot_product.h);
//   Pmaddubsw  vpmaddubsw, vpmaddwd by ones and vpaddd: exact only when the
//              weights are within [-64, 64] (its int16 pair sums saturate).
// Both do 32 products (8 int32 lanes x 4) with two multiply uops, as two
// 8-lane FMAs do 16: the multiply ports give int8 twice the fp32 peak.
enum class Avx2Int8Dot { Pmaddwd, Pmaddubsw };

// GOP/s (2 per product) of `kind` on `threads` threads, median of runs; 0
// when this CPU lacks AVX2.
double measured_avx2_int8_peak_gops(int threads, Avx2Int8Dot kind);

}  // namespace kiln::bench
