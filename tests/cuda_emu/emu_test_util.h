#pragma once
// Helpers for the emulated GPU's own tests: device buffers, checked runtime calls, and the hooks
// a test needs to provoke faults on purpose (cuda_emu/include/cuda_emu/testing.h).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_emu/testing.h"

#define EMU_OK(call) \
  ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

namespace minitrain::emu_testing {

/// A device allocation of n values, freed on scope exit.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)) != cudaSuccess) p_ = nullptr;
  }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return p_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

/// Waits for the device and returns the error with the emulator's explanation, then clears the
/// fault so that later tests in this process can use the device again.
inline std::string fault_after_sync(cudaError_t* code = nullptr) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (code) *code = e;
  std::string text =
      e == cudaSuccess ? "" : std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  int device = 0;
  cudaGetDevice(&device);
  mtemu::clear_device_fault(device);
  (void)cudaGetLastError();
  return text;
}

}  // namespace minitrain::emu_testing
