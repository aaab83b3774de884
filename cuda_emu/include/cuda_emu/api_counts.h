#pragma once
// Counts of the runtime calls that set a small training step's time on a real GPU (each costs the
// host microseconds, a blocking one also the GPU's idle time): kernel launches, memsets, calls
// that block the host until device work is done, device-to-host copies, cudaMalloc/cudaFree.
// Per process, over every device and thread, since start or the last api_counts_reset(). Exact:
// they count calls, not time, so they are the same on every machine (docs/gpu_step.md).

#include <cstdint>

namespace mtemu {

struct ApiCounts {
  uint64_t launches = 0;  ///< kernel launches the runtime accepted
  uint64_t memsets = 0;   ///< cudaMemset / cudaMemsetAsync calls that set bytes
  /// Calls that returned only once device work had run: cudaStreamSynchronize,
  /// cudaDeviceSynchronize, cudaEventSynchronize, cudaMemcpy, cudaMemset, and an asynchronous copy
  /// into pageable memory (CUDA completes it before returning). One call counts once.
  uint64_t host_syncs = 0;
  uint64_t device_to_host_copies = 0;  ///< copies from device memory into host memory (any kind)
  uint64_t mallocs = 0;                ///< successful cudaMalloc calls
  uint64_t frees = 0;                  ///< successful cudaFree calls (of a non-null pointer)
};

ApiCounts api_counts();
/// The calls the calling thread made: a training loop's own, apart from its data loader's
/// workers (whose waits for a staging buffer block no step).
ApiCounts api_counts_of_this_thread();
/// Zeroes the process's counts and the calling thread's.
void api_counts_reset();

namespace detail {
enum class ApiEvent { Launch, Memset, DeviceToHostCopy, Malloc, Free };
void count_api(ApiEvent e) noexcept;
/// Counts one host sync for the outermost blocking call of the calling thread: cudaMemcpy's own
/// cudaStreamSynchronize is part of the cudaMemcpy, not a second sync.
class BlockingCall {
 public:
  BlockingCall() noexcept;
  ~BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
};
}  // namespace detail
}  // namespace mtemu
