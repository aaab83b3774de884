#pragma once
// `minitrain bench gemm --counters [--device-profile h100] [--shape M,N,K]`, on emulated GPUs: per
// rung of the CUDA GEMM ladder an Nsight Compute-like table of the emulator's exact counters
// (global sectors per request, shared-memory bank conflicts, active lanes), the theoretical
// occupancy and its limiter with the real compiler's registers, and the roofline model's time
// (docs/emulator_counters.md). Every modelled figure says "modelled".

#include <ostream>
#include <string>

namespace minitrain::cli {

struct GemmCountersRequest {
  std::string device_profile = "h100";
  std::string shape = "256,256,256";  ///< M,N,K of the GEMM each rung runs
  std::string json;  ///< where to write the table as JSON too (for `minitrain plot --roofline`)
};

/// 0 when every rung ran and its result matched the CPU's; 1 otherwise; ValueError on bad input
/// and DeviceError where there are no emulated GPUs (a real GPU: use ncu; a CPU-only build).
int run_gemm_counters(const GemmCountersRequest& request, std::ostream& out, std::ostream& err);

}  // namespace minitrain::cli
