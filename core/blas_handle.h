#pragma once
// cuBLAS and cuBLASLt handles: one per (device, host thread), created on first use and destroyed
// when the thread exits. A handle is not safe to share between threads that run at once, and
// creating one costs milliseconds, so each thread that drives a device (data parallel runs one
// thread per GPU) keeps its own. Include only from CUDA-enabled sources.
//
// Note [cuBLAS math mode]: handles use CUBLAS_DEFAULT_MATH, i.e. full FP32 for float GEMMs; no
// TF32 is enabled behind the caller's back, so GPU results match the CPU (Eigen) within float32
// rounding. (The environment variable NVIDIA_TF32_OVERRIDE=1 can still force TF32 globally.)

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>

#include "core/device.h"

namespace minitrain {

/// The calling thread's cuBLAS handle for `device`, bound (cublasSetStream) to the thread's
/// current stream on that device, core/stream.h current_stream(device). Call it for every
/// cuBLAS call rather than keeping the handle: a StreamGuard may have changed the stream.
/// Throws DeviceError for a CPU or unavailable device.
cublasHandle_t cublas_handle(Device device);

/// The calling thread's cuBLASLt handle for `device`. cuBLASLt takes the stream and the
/// workspace with each cublasLtMatmul call; see cublaslt_workspace.
cublasLtHandle_t cublaslt_handle(Device device);

/// Scratch memory for cublasLtMatmul on the calling thread's current stream of `device`:
/// kCublasLtWorkspaceBytes, allocated on first use. One per stream, because two streams running
/// at once must not share scratch memory.
struct BlasWorkspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};
BlasWorkspace cublaslt_workspace(Device device);

/// 32 MiB: what NVIDIA recommends for Hopper (less is enough for older GPUs); it lets cuBLASLt
/// choose its split-K and stream-K algorithms.
inline constexpr std::size_t kCublasLtWorkspaceBytes = std::size_t(32) << 20;

}  // namespace minitrain
