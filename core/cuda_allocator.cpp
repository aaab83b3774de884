// The device side of the CUDA caching allocator: cudaMalloc/cudaFree on one device. Compiled only
// in CUDA builds; the caching logic itself is device-independent (caching_allocator.cpp).

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>

#include "core/bytes.h"
#include "core/caching_allocator.h"
#include "core/cuda_check.h"
#include "core/stream.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/allocator_hooks.h"
#endif

namespace minitrain {

namespace {
class CudaRawMemory final : public RawMemory {
 public:
  explicit CudaRawMemory(int index) : device_(Device::cuda(index)) {}

  void* raw_alloc(std::size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // out of memory is not sticky: clear it and let the cache retry
      return nullptr;
    }
    CHECK_CUDA(e);
    return p;
  }
  void raw_free(void* p) override {
    DeviceGuard guard(device_, std::nothrow);
    (void)cudaFree(p);  // cannot throw from here; a failure at exit is harmless
  }
  uint64_t device_free_bytes() override {
    DeviceGuard guard(device_);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return free_b;
  }
  const void* current_stream() override {
    return minitrain::current_stream(device_).native_handle();
  }
  void synchronize() override {
    DeviceGuard guard(device_);
    CHECK_CUDA(cudaDeviceSynchronize());
  }
#if MINITRAIN_CUDA_EMULATED
  // On emulated GPUs AddressSanitizer guards a block's rounding slack and the whole of a cached
  // block, in the order of the block's stream (see cuda_emu/allocator_hooks.h).
  void on_handout(void* p, std::size_t requested, std::size_t,
                  const void* stream) noexcept override {
    cudaStream_t s = const_cast<cudaStream_t>(static_cast<const CUstream_st*>(stream));
    if (mtemu::limit_access(p, requested, s) != cudaSuccess) (void)cudaGetLastError();
  }
#endif

 private:
  Device device_;
};
// Page-locked host memory. Blocks are not tied to a stream (key nullptr): the DataLoader, their
// user, waits on an event before it reuses a buffer.
class PinnedRawMemory final : public RawMemory {
 public:
  void* raw_alloc(std::size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    CHECK_CUDA(e);
    return p;
  }
  void raw_free(void* p) override { (void)cudaFreeHost(p); }
  uint64_t device_free_bytes() override { return 0; }
  const void* current_stream() override { return nullptr; }
  void synchronize() override { (void)cudaDeviceSynchronize(); }
};
}  // namespace

std::unique_ptr<Allocator> make_pinned_allocator() {
  return std::make_unique<CachingAllocator>("pinned host", std::make_unique<PinnedRawMemory>());
}

std::unique_ptr<Allocator> make_cuda_allocator(int index) {
  auto a = std::make_unique<CachingAllocator>(Device::cuda(index).str(),
                                              std::make_unique<CudaRawMemory>(index));
  // A per-process cap from the environment, so that several processes can share one GPU.
  if (const char* cap = std::getenv("MINITRAIN_CUDA_MEMORY_CAP"); cap && *cap)
    a->set_cap(parse_bytes(cap));
  return a;
}

}  // namespace minitrain
