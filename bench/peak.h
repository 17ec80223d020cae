// The machine's fp32 FMA peak, measured now: this VM's throughput varies from
// window to window (MACHINE.md), so kernels are also reported against the
// peak measured in the same run, beside MACHINE.md's figure.
#pragma once

namespace kiln::bench {

// GFLOP/s of independent zmm FMA chains on `threads` threads (median of runs).
double measured_fma_peak_gflops(int threads);

}  // namespace kiln::bench
