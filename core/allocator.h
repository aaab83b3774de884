#pragma once
// Where tensor memory comes from. One allocator per device, shared by every thread of the
// process: the CPU one hands out 64-byte aligned blocks, the CUDA one caches freed blocks
// (see caching_allocator.h) so a training loop stops calling cudaMalloc after its first step.

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace minitrain {

struct MemoryStats {
  uint64_t in_use = 0;       ///< bytes held by live tensors
  uint64_t peak = 0;         ///< the most in_use has been since start (or reset_peak)
  uint64_t cached = 0;       ///< bytes freed by tensors but kept for reuse
  uint64_t cap = 0;          ///< per-process limit on in_use + cached; 0 = none
  uint64_t raw_allocs = 0;   ///< calls that reached the device (cudaMalloc / aligned_alloc)
  uint64_t live_blocks = 0;  ///< blocks currently handed out
  /// allocate() calls that handed out a block, cached or new (the caching allocator's; the CPU
  /// allocator's count every call): what a step asks of the allocator, docs/gpu_step.md
  uint64_t allocations = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Never returns null: throws OutOfMemory naming requested, free and cap bytes. 0 bytes
  /// returns a unique non-null pointer that must still be deallocated.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  virtual MemoryStats stats() const = 0;
  virtual void set_cap(uint64_t bytes) = 0;  ///< 0 removes the cap
  virtual void empty_cache() = 0;            ///< returns cached blocks to the device
  virtual void reset_peak() = 0;
  /// The graph memory pool (Note [graph memory pool]) that a request of the calling thread would
  /// come from now: the id of the capture in progress on its current stream, 0 when none.
  virtual uint64_t capture_pool_here() { return 0; }
  /// Whether pool `id` still belongs to a live graph (not yet released).
  virtual bool pool_alive(uint64_t id) const {
    (void)id;
    return false;
  }
};

/// The process-wide allocator of a device. Throws DeviceError for a device that does not exist.
Allocator& allocator_for(Device d);

/// Page-locked host memory for asynchronous host-to-GPU copies, cached like GPU memory
/// (cudaHostAlloc is slow). Where CUDA is unusable it is the ordinary CPU allocator.
Allocator& pinned_host_allocator();

MemoryStats memory_stats(Device d);
void set_memory_cap(Device d, uint64_t bytes);
void empty_cache(Device d);

/// Alignment of CPU blocks: a cache line, and enough for any vector load Eigen issues.
inline constexpr std::size_t kCpuAlignment = 64;

}  // namespace minitrain
