#pragma once
// What this CPU's vector units can do (CPUID and the registers the OS saves, XGETBV), and the
// peak FP32 rate that implies. Every CPU speed figure in bench/ is a share of that peak, not of a
// library's rate: a library can silently run kernels far below the hardware (Note [OpenBLAS core]
// in kernels/gemm/openblas_core.h).

#include <string>

namespace minitrain {

/// The instruction-set extensions the CPU reports and the OS enables (an extension whose
/// registers the OS does not save, XCR0, counts as absent: its instructions would fault).
struct CpuFeatures {
  std::string vendor;      ///< "GenuineIntel", "AuthenticAMD", ... ("" off x86-64)
  std::string model_name;  ///< the brand string ("Intel(R) Xeon(R) Processor" on a masked VM)
  int family = 0, model = 0;
  bool sse3 = false, avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false;
  bool avx512_bf16 = false, amx_tile = false, amx_bf16 = false;

  /// All of AVX-512 F, CD, BW, DQ and VL: what Skylake-SP and later kernels need.
  bool avx512_skylake() const { return avx512f && avx512cd && avx512bw && avx512dq && avx512vl; }
  /// float32 lanes of the widest FMA this CPU runs: 16 (AVX-512), 8 (AVX2 + FMA), 4 (SSE).
  int fp32_lanes() const;
  /// The extensions present, lower case, space-separated: "sse3 avx avx2 fma avx512f ...".
  std::string list() const;
};

/// This CPU's features (read once).
const CpuFeatures& cpu_features();

/// Note [peak FP32]: the CPU's peak float32 rate = cores x FMA units per core x fp32 lanes x 2
/// (an FMA is two flops) x clock. The clock and the FMA units are measured, not looked up: cloud
/// VMs mask the model, and turbo and AVX-512 licences move the clock. The FMA units are the
/// rate of independent widest-FMAs (12 accumulators, more than latency x units) over the scalar
/// clock, rounded to a whole number; the scalar clock is the rate of a chain of dependent integer
/// adds (one per cycle on every x86-64 core since the Pentium Pro). clock_ghz is then the clock
/// the FMA units ran at: their rate over their count. The fastest of 20 sub-millisecond rounds
/// each, on one thread: a figure taken on a busy machine is low, and says so through clock_ghz.
struct CpuPeak {
  int cores = 1;             ///< available_cores(): affinity and cgroup quota
  int fma_units = 1;         ///< measured FMA throughput per cycle, rounded
  int lanes = 4;             ///< CpuFeatures::fp32_lanes()
  double clock_ghz = 0;      ///< measured: the clock of the FMA loop
  double fma_per_cycle = 0;  ///< measured against the scalar clock, before rounding
  double gflops() const { return cores * fma_units * lanes * 2.0 * clock_ghz; }
  std::string describe() const;  ///< "2 cores x 2 FMA x 16 lanes x 2 x 2.10 GHz = 268.8 GFLOP/s"
};

/// Measures the peak once per process (about 50 ms) and returns it on every later call.
const CpuPeak& cpu_peak_fp32();

}  // namespace minitrain
