// Per-thread cuBLAS / cuBLASLt handles, keyed by device index. A thread_local table owns them;
// its destructor runs when the thread exits and hands the handles and workspaces back. Creating
// a handle is slow (it loads kernels), so this runs once per (device, thread); later calls cost
// a table lookup and a cublasSetStream.

#include "core/blas_handle.h"

#include <cuda_runtime_api.h>

#include <map>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"

namespace minitrain {

namespace {

struct DeviceHandles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::map<const CUstream_st*, void*> lt_workspaces;  // current stream -> scratch memory
};

// Owns every handle the calling thread created. The destructor must not throw: errors at thread
// or process exit (the driver may already be shutting down) are ignored.
class ThreadHandles {
 public:
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;

  ~ThreadHandles() {
    int previous = -1;
    const bool have_previous = cudaGetDevice(&previous) == cudaSuccess;
    for (auto& [index, h] : devices_) {
      if (cudaSetDevice(index) != cudaSuccess) continue;
      if (h.blas) {
        (void)cublasSetStream(h.blas, nullptr);  // unbind from a stream that may be gone
        (void)cublasDestroy(h.blas);
      }
      if (h.lt) (void)cublasLtDestroy(h.lt);
      for (auto& [stream, p] : h.lt_workspaces) (void)cudaFree(p);  // waits for pending work
    }
    if (have_previous) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }

  DeviceHandles& of(Device d) { return devices_[d.index()]; }

 private:
  std::map<int, DeviceHandles> devices_;
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles handles;
  return handles;
}

// Looks up the device's current stream first, so the thread's stream table is created before
// (and therefore destroyed after) the handle table that refers to its streams.
CUstream_st* checked_stream(Device device, const char* what) {
  MT_CHECK_AS(DeviceError, device.is_cuda(), what, ": ", device,
              " is not a CUDA device; cuBLAS serves GPU tensors only");
  check_available(device);
  return current_stream(device).native_handle();
}

}  // namespace

cublasHandle_t cublas_handle(Device device) {
  CUstream_st* stream = checked_stream(device, "cublas_handle");
  DeviceHandles& h = thread_handles().of(device);
  if (h.blas == nullptr) {
    DeviceGuard guard(device);  // a handle belongs to the device current at creation
    cublasHandle_t created = nullptr;
    CHECK_CUBLAS(cublasCreate(&created));
    h.blas = created;
    // Note [cuBLAS math mode] in blas_handle.h: full FP32, never TF32 unless asked for.
    CHECK_CUBLAS(cublasSetMathMode(h.blas, CUBLAS_DEFAULT_MATH));
  }
  CHECK_CUBLAS(cublasSetStream(h.blas, stream));
  return h.blas;
}

cublasLtHandle_t cublaslt_handle(Device device) {
  (void)checked_stream(device, "cublaslt_handle");
  DeviceHandles& h = thread_handles().of(device);
  if (h.lt == nullptr) {
    DeviceGuard guard(device);
    cublasLtHandle_t created = nullptr;
    CHECK_CUBLAS(cublasLtCreate(&created));
    h.lt = created;
  }
  return h.lt;
}

BlasWorkspace cublaslt_workspace(Device device) {
  CUstream_st* stream = checked_stream(device, "cublaslt_workspace");
  DeviceHandles& h = thread_handles().of(device);
  auto it = h.lt_workspaces.find(stream);
  if (it == h.lt_workspaces.end()) {
    DeviceGuard guard(device);
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, kCublasLtWorkspaceBytes));
    it = h.lt_workspaces.emplace(stream, p).first;
  }
  return {it->second, kCublasLtWorkspaceBytes};
}

}  // namespace minitrain
