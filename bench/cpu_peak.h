#pragma once
// CPU benchmarks against the hardware, not only against a library: the OpenBLAS kernels chosen for
// this CPU (Note [OpenBLAS core]) and the measured peak FP32 rate (Note [peak FP32]), as the
// run's context and as each case's pct_of_peak.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "core/cpu_features.h"
#include "kernels/gemm/openblas_core.h"

namespace minitrain::bench {

/// The peak FP32 GFLOP/s of `threads` cores (at most the cores this process may use).
inline double peak_gflops(int threads) {
  const CpuPeak& p = cpu_peak_fp32();
  return p.gflops() / p.cores * std::clamp(threads, 1, p.cores);
}

/// Selects OpenBLAS's kernels (before any direct cblas call of the benchmark), measures the peak
/// before the cases load the machine, and records both in the JSON context.
inline void add_cpu_context(int threads) {
  const OpenBlasSelection& blas = select_openblas_core();
  benchmark::AddCustomContext("blas_kernels", blas.core + " (" + blas.reason + ")");
  benchmark::AddCustomContext("cpu_features", cpu_features().list());
  benchmark::AddCustomContext("cpu_peak_fp32", cpu_peak_fp32().describe());
  benchmark::AddCustomContext("peak_gflops_for_threads", std::to_string(peak_gflops(threads)));
}

/// pct_of_peak: a rate in GFLOP/s as a percentage of `threads` cores' peak.
inline double pct_of_peak(double gflops, int threads) {
  const double peak = peak_gflops(threads);
  return peak > 0 ? 100.0 * gflops / peak : 0.0;
}

}  // namespace minitrain::bench
