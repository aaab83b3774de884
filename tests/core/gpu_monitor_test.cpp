// The GPU monitor never fails a run: on the CPU it reads and says nothing, and where NVML cannot
// be had the reason is one line that names what is missing, decided once per process.

#include "core/gpu_monitor.h"

#include <gtest/gtest.h>

#include <string>

namespace minitrain {
namespace {

TEST(GpuMonitor, TheCpuHasNothingToReadOrSay) {
  GpuMonitor cpu(Device::cpu());
  EXPECT_EQ(cpu.note(), "");
  EXPECT_FALSE(cpu.sample().has_value());
}

TEST(GpuMonitor, WhyNvmlIsAbsentIsOneLineNamingIt) {
  const std::string reason = nvml_unavailable_reason();
  EXPECT_EQ(reason, nvml_unavailable_reason());  // decided once
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
#if !MINITRAIN_WITH_CUDA
  EXPECT_EQ(reason, "NVML is absent from a CPU-only build");
#elif MINITRAIN_CUDA_EMULATED
  EXPECT_NE(reason.find("NVML is absent with emulated GPUs"), std::string::npos) << reason;
#else
  // A real CUDA build: "" where the driver's NVML loads; else the loader's or NVML's reason.
  if (!reason.empty()) {
    EXPECT_NE(reason.find("NVML"), std::string::npos) << reason;
  }
#endif
}

}  // namespace
}  // namespace minitrain
