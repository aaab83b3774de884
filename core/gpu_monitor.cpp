// NVML behind the GPU monitor. Where the build has nvml.h (MINITRAIN_WITH_NVML: a real CUDA build,
// core/CMakeLists.txt) NVML is loaded and initialised once per process, on the first monitor or
// nvml_unavailable_reason(); every other build says why it has none.

#include "core/gpu_monitor.h"

#include <chrono>

#include "core/error.h"

#if MINITRAIN_WITH_NVML
#include <cuda_runtime_api.h>
#include <nvml.h>
#endif

namespace minitrain {

#if MINITRAIN_WITH_NVML
struct GpuMonitor::Nvml {
  nvmlDevice_t device = nullptr;
};
#else
struct GpuMonitor::Nvml {};
#endif

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#if MINITRAIN_WITH_NVML
// The loader's first two lines on one: what could not be loaded, and the first place it looked
// (the rest is advice for libraries a GPU path needs, which NVML is not).
std::string first_two_lines(const std::string& what) {
  std::string text = what;
  const std::size_t first = text.find('\n');
  if (first != std::string::npos) text = text.substr(0, text.find('\n', first + 1));
  for (std::size_t at; (at = text.find("\n  ")) != std::string::npos;) text.replace(at, 3, " ");
  return text;
}

// "" once NVML is loaded and initialised; else why not. Decided once per process: a note is said
// once, and NVML does not appear in a running process.
const std::string& nvml_state() {
  static const std::string reason = []() -> std::string {
    try {
      const nvmlReturn_t r = nvmlInit_v2();
      if (r != NVML_SUCCESS)
        return detail::concat("NVML did not start (nvmlInit: ", nvmlErrorString(r),
                              "); is the NVIDIA driver loaded?");
      return "";
    } catch (const DeviceError& e) {
      return first_two_lines(e.what());
    }
  }();
  return reason;
}

// The NVML device of CUDA device `ordinal`, or the reason there is none.
std::string find_nvml_device(int ordinal, nvmlDevice_t& out) {
  char bus_id[32] = {};  // "0000:3b:00.0": 13 characters; CUDA asks for at least 13
  const cudaError_t e = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, ordinal);
  if (e != cudaSuccess)
    return detail::concat("the PCI bus id of cuda:", ordinal,
                          " could not be read: ", cudaGetErrorString(e));
  const nvmlReturn_t r = nvmlDeviceGetHandleByPciBusId_v2(bus_id, &out);
  if (r != NVML_SUCCESS)
    return detail::concat("NVML has no device at PCI bus id ", bus_id, " (cuda:", ordinal,
                          "): ", nvmlErrorString(r));
  return "";
}

// One reading, or the reason it failed (a MIG instance reports no utilisation, for one).
std::string read_usage(nvmlDevice_t device, GpuUsage& out) {
  nvmlUtilization_t u{};
  nvmlMemory_t m{};
  if (const nvmlReturn_t r = nvmlDeviceGetUtilizationRates(device, &u); r != NVML_SUCCESS)
    return detail::concat("NVML gives no utilisation for it: ", nvmlErrorString(r));
  if (const nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, &m); r != NVML_SUCCESS)
    return detail::concat("NVML gives no memory figures for it: ", nvmlErrorString(r));
  out = GpuUsage{static_cast<double>(u.gpu), m.used, m.total};
  return "";
}
#endif

}  // namespace

std::string nvml_unavailable_reason() {
#if MINITRAIN_WITH_NVML
  return nvml_state();
#elif MINITRAIN_CUDA_EMULATED
  return "NVML is absent with emulated GPUs (they have no driver and no vendor libraries)";
#elif MINITRAIN_WITH_CUDA
  return "NVML is absent from this build: nvml.h was not found when it was configured (it comes "
         "with the CUDA toolkit's NVML component, or scripts/nvml_header.sh fetches it; then "
         "configure with -DNVML_INCLUDE_DIR=DIR)";
#else
  return "NVML is absent from a CPU-only build";
#endif
}

GpuMonitor::GpuMonitor(Device device) {
  if (!device.is_cuda()) return;
#if MINITRAIN_WITH_NVML
  note_ = nvml_state();
  if (!note_.empty()) return;
  auto nvml = std::make_unique<Nvml>();
  note_ = find_nvml_device(device.index(), nvml->device);
  GpuUsage first;
  if (note_.empty()) note_ = read_usage(nvml->device, first);
  if (!note_.empty()) return;
  nvml_ = std::move(nvml);
  last_ = first;
  last_read_ns_ = now_ns();
#else
  note_ = nvml_unavailable_reason();
#endif
}

GpuMonitor::~GpuMonitor() = default;

std::optional<GpuUsage> GpuMonitor::sample() {
  if (!nvml_) return std::nullopt;
  constexpr int64_t kReadEveryNs = 100'000'000;
  const int64_t now = now_ns();
  if (now - last_read_ns_ < kReadEveryNs) return last_;
#if MINITRAIN_WITH_NVML
  GpuUsage usage;
  if (read_usage(nvml_->device, usage).empty()) {  // a failed read keeps the last one
    last_ = usage;
    last_read_ns_ = now;
  }
#endif
  return last_;
}

}  // namespace minitrain
