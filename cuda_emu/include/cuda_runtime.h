#pragma once
// The emulated build's <cuda_runtime.h>: the runtime API, the device-side language and the
// kernel launch that `<<<grid, block, smem, stream>>>` is rewritten into at build time.
#include "cuda_runtime_api.h"
#include "cuda_emu/device_api.h"
#include "cuda_emu/launch.h"

// The toolkit's cuda_runtime.h also has these C++ overloads, which standalone programs use.
template <class T>
inline cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
  return ::cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
template <class T>
inline cudaError_t cudaMallocHost(T** ptr, std::size_t bytes) {
  return ::cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
