#pragma once
// A CUDA device's utilisation and memory as its driver reports them (what nvidia-smi shows), read
// through NVML, the driver's management library, opened with dlopen on first use like the other
// vendor libraries (core/vendor/vendor_library.h) and never linked. The CUDA device is found
// among NVML's devices by its PCI bus id: CUDA numbers the devices CUDA_VISIBLE_DEVICES leaves
// (a pipelines run's cuda:0 may be the machine's fourth GPU), NVML numbers them all.
//
// Where NVML cannot be had (no NVIDIA driver, the emulated GPUs, a build without nvml.h), a
// monitor reads nothing and says why once: GPU figures are an extra of the metrics, never a
// reason for a run to fail.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/device.h"

namespace minitrain {

struct GpuUsage {
  /// Percent of NVML's last sample period (1/6 s to 1 s, by GPU) in which a kernel ran.
  double utilization_pct = 0;
  uint64_t memory_used_bytes = 0;  ///< the whole device's, every process's
  uint64_t memory_total_bytes = 0;
};

/// Why GPU usage cannot be read in this process, on one line ("" when NVML is loaded and
/// initialised): the loader's error naming the library and where it looked, NVML's own error
/// (no driver), or what this build lacks. Loads and initialises NVML on the first call.
std::string nvml_unavailable_reason();

class GpuMonitor {
 public:
  /// Watches `device`: a CUDA device is mapped to its NVML device now; for the CPU a monitor that
  /// reads nothing and has nothing to say. Never throws.
  explicit GpuMonitor(Device device);
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  /// The device's usage now; nullopt where it cannot be read (note() says why). Reads NVML at
  /// most every 100 ms (its utilisation is a mean over its own longer period anyway) and gives
  /// the last reading in between, so a run of short steps pays for few reads.
  std::optional<GpuUsage> sample();
  /// Why sample() reads nothing, for the run to say once ("" for the CPU and where it reads).
  const std::string& note() const noexcept { return note_; }

 private:
  struct Nvml;  // the NVML handle, where NVML is built in
  std::unique_ptr<Nvml> nvml_;
  std::string note_;
  std::optional<GpuUsage> last_;
  int64_t last_read_ns_ = 0;
};

}  // namespace minitrain
