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

}  // namespace kiln::bench
