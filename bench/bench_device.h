#pragma once
// The benchmarks' --device=cpu|cuda|cuda:N|auto flag (default auto: the GPU when there is one),
// taken out of argv before Google Benchmark parses it, and the context lines that name the device
// in the JSON output (scripts/plot_bench.py prints them under its charts).

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "core/device.h"

namespace minitrain::bench {

/// Removes --device=SPEC from argv (updating argc) and returns that device; DeviceError when it is
/// not available here.
inline Device take_device_flag(int& argc, char** argv) {
  std::string spec = "auto";
  int out = 0;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--device=", 9) == 0)
      spec = argv[i] + 9;
    else
      argv[out++] = argv[i];
  }
  argc = out;
  const Device d = Device::parse(spec);
  check_available(d);
  return d;
}

/// "device", and "threads" on the CPU or the GPU's name on CUDA, as Google Benchmark context.
inline void add_device_context(Device device, int threads) {
  benchmark::AddCustomContext("device", device.str());
  if (device.is_cpu()) benchmark::AddCustomContext("threads", std::to_string(threads));
  for (const CudaDeviceInfo& info : cuda_devices())
    if (device.is_cuda() && info.index == device.index())
      benchmark::AddCustomContext("gpu", info.name);
}

}  // namespace minitrain::bench
