// The CPU allocator: 64-byte aligned blocks straight from the C library, with statistics kept by
// atomics so that many threads allocate without a lock. No cache: glibc already keeps small
// blocks, and large ones are better returned to the OS between runs.

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "core/allocator.h"
#include "core/bytes.h"
#include "core/error.h"

namespace minitrain {

namespace {
class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    // aligned_alloc wants a size that is a multiple of the alignment; 0 still gets a block.
    const std::size_t size = (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    const std::size_t rounded = size == 0 ? kCpuAlignment : size;
    const uint64_t cap = cap_.load();
    const uint64_t now = in_use_.load();
    if (cap != 0 && now + rounded > cap)
      MT_THROW(OutOfMemory, "cpu: out of memory allocating ", format_bytes(bytes), " (in use ",
               format_bytes(now), ", free under cap ", format_bytes(cap > now ? cap - now : 0),
               ", cap ", format_bytes(cap), "); raise the cap or reduce the batch size");
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (p == nullptr)
      MT_THROW(OutOfMemory, "cpu: out of memory allocating ", format_bytes(bytes), " (in use ",
               format_bytes(now), "); reduce the batch size or the model");
    {
      std::lock_guard<std::mutex> lock(sizes_mutex_);
      sizes_[p] = rounded;
    }
    const uint64_t after = in_use_.fetch_add(rounded) + rounded;
    uint64_t peak = peak_.load();
    while (after > peak && !peak_.compare_exchange_weak(peak, after)) {
    }
    raw_allocs_.fetch_add(1);
    live_.fetch_add(1);
    return p;
  }

  void deallocate(void* p) noexcept override {
    if (p == nullptr) return;
    std::size_t size = 0;
    {
      std::lock_guard<std::mutex> lock(sizes_mutex_);
      auto it = sizes_.find(p);
      if (it == sizes_.end()) return;  // not ours: ignoring beats corrupting the heap
      size = it->second;
      sizes_.erase(it);
    }
    std::free(p);
    in_use_.fetch_sub(size);
    live_.fetch_sub(1);
  }

  MemoryStats stats() const override {
    MemoryStats s;
    s.in_use = in_use_.load();
    s.peak = peak_.load();
    s.cap = cap_.load();
    s.raw_allocs = raw_allocs_.load();
    s.live_blocks = live_.load();
    s.allocations = s.raw_allocs;  // every block is a new one
    return s;
  }
  void set_cap(uint64_t bytes) override { cap_.store(bytes); }
  void empty_cache() override {}
  void reset_peak() override { peak_.store(in_use_.load()); }

 private:
  std::atomic<uint64_t> in_use_{0}, peak_{0}, cap_{0}, raw_allocs_{0}, live_{0};
  std::mutex sizes_mutex_;
  std::unordered_map<void*, std::size_t> sizes_;
};
}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator* a = new CpuAllocator();  // never destroyed: tensors may outlive main()
  return *a;
}

}  // namespace minitrain
