#pragma once
// A caching allocator: freed blocks go to a free list keyed by (stream, size) instead of back to
// the device, and a later request of a similar size on the same stream takes one from there.
// Bounded by the device's memory and an optional cap; when either would be exceeded it first
// returns its whole cache to the device and retries, and only then throws OutOfMemory.
//
// Note [streams and the caching allocator]: a block is reused only on the stream it was
// allocated on. Work on one stream runs in order, so a block freed (on the host) while kernels
// that read it are still queued is safe to hand to the next kernel of the same stream. A tensor
// used on another stream must be synchronised by its user before it is freed.
//
// The device side is behind RawMemory so that this logic is tested on the host as well.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/allocator.h"

namespace minitrain {

class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* raw_alloc(std::size_t bytes) = 0;  ///< nullptr when the device is full
  virtual void raw_free(void* p) = 0;  ///< may throw (a device fault); the block counts as gone
  virtual uint64_t device_free_bytes() = 0;
  virtual const void* current_stream() = 0;  ///< the key of the calling thread's stream
  virtual void synchronize() = 0;            ///< waits for device work before blocks go back
  /// A block of `block_bytes` goes to a tensor of `requested` bytes on `stream`, or (requested
  /// 0) back to the cache. For checking tools; does nothing by default, must not throw.
  virtual void on_handout(void* p, std::size_t requested, std::size_t block_bytes,
                          const void* stream) noexcept {
    (void)p, (void)requested, (void)block_bytes, (void)stream;
  }
};

class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(std::string device_name, std::unique_ptr<RawMemory> raw);
  ~CachingAllocator() override;

  void* allocate(std::size_t bytes) override;
  void deallocate(void* p) noexcept override;
  MemoryStats stats() const override;
  void set_cap(uint64_t bytes) override;
  void empty_cache() override;
  void reset_peak() override;

  // Note [graph memory pool]: a CUDA graph's kernels write the blocks they were captured with at
  // every replay, whatever the host has freed since, so those blocks must not serve anyone else
  // while the graph lives. begin_pool(stream) opens a private pool: until end_pool_capture, a
  // request of the calling thread on `stream` (the capturing thread and stream) takes a block from
  // the pool's own free blocks, else from the cache (the block then belongs to the pool), else from
  // the device (which a capture refuses: warm up first). A pool's block, freed, returns to the pool
  // and never to the cache; within the capture it serves the capture's later requests (one stream
  // runs in order, so the replay reuses it as the eager step did). release_pool hands every pool
  // block back: the free ones to the cache, the live ones to the cache when their tensors free
  // them.
  //
  // Note [capture_pool_here without the lock]: every BufferSlot::get asks capture_pool_here (and,
  // for a buffer a graph holds, pool_alive), a training step some tens of times. While no pool is
  // capturing (every eager step) the answer is 0 for every thread, so an atomic count of capturing
  // pools answers it without the mutex or the stream lookup. The count is changed under the mutex
  // by begin_pool (+1), and by end_pool_capture or release_pool of a pool still capturing (-1).
  // Only the capturing thread's own requests are a capture's, and that thread called begin_pool
  // before them, so it always sees its own increment (program order); another thread that reads a
  // stale count is answered 0 either way (a stale 0 is the right answer for it; a stale nonzero
  // takes the lock and finds no pool of its own). The same holds for pool_alive with the count of
  // pools not yet released: a slot asks only about pools it saw, created before.
  uint64_t begin_pool(const void* stream);
  uint64_t capture_pool_here() override;
  bool pool_alive(uint64_t id) const override;
  void end_pool_capture(uint64_t pool) noexcept;
  void release_pool(uint64_t pool) noexcept;
  /// Bytes owned by a pool (live and free); 0 for a released or unknown one.
  uint64_t pool_bytes(uint64_t pool) const;

  /// Block sizes: multiples of 512 B below 1 MiB, of 2 MiB above, so that similar requests
  /// share blocks and the free list stays short.
  static std::size_t round_size(std::size_t bytes) noexcept;

 private:
  struct Block {
    std::size_t size;
    const void* stream;
    uint64_t pool = 0;  // Note [graph memory pool]; 0: the cache's
  };
  struct Pool {
    const void* stream = nullptr;  // the capturing stream: every block of the pool served it
    std::thread::id thread;        // the capturing thread: another thread's requests are not the
                                   // capture's (a data loader's worker on the same stream)
    bool capturing = true;         // serves their requests until end_pool_capture
    std::multimap<std::size_t, void*> free;
  };
  void* take_cached_locked(std::size_t size, const void* stream, Block* block);
  void* hand_out_locked(void* p, const Block& block, std::size_t bytes);
  void release_cache_locked();
  [[noreturn]] void throw_oom_locked(std::size_t requested, std::size_t rounded, const char* why);

  std::string device_name_;
  std::unique_ptr<RawMemory> raw_;
  mutable std::mutex mutex_;
  std::multimap<std::pair<const void*, std::size_t>, void*> free_;  // (stream, size) -> block
  std::unordered_map<void*, Block> live_;
  std::unordered_map<void*, Block> cached_;
  std::map<uint64_t, Pool> pools_;
  uint64_t next_pool_ = 1;
  // Note [capture_pool_here without the lock]: pools capturing now, and pools not yet released.
  std::atomic<int> capturing_pools_{0};
  std::atomic<int> live_pools_{0};
  MemoryStats stats_;
};

}  // namespace minitrain
