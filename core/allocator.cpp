#include "core/allocator.h"

#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace minitrain {

Allocator& cpu_allocator();  // cpu_allocator.cpp
#if MINITRAIN_WITH_CUDA
std::unique_ptr<Allocator> make_cuda_allocator(int index);  // cuda_allocator.cpp
std::unique_ptr<Allocator> make_pinned_allocator();         // cuda_allocator.cpp
#endif

Allocator& pinned_host_allocator() {
#if MINITRAIN_WITH_CUDA
  // Page-locking needs a driver; without a usable GPU there is nothing to copy to anyway.
  if (cuda_device_count() > 0) {
    static Allocator* pinned = make_pinned_allocator().release();  // lives for the process
    return *pinned;
  }
#endif
  return cpu_allocator();
}

Allocator& allocator_for(Device d) {
  if (d.is_cpu()) return cpu_allocator();
  check_available(d);
#if MINITRAIN_WITH_CUDA
  // One per device, created on first use and kept for the life of the process: tensors held in
  // static objects may be freed after main() returns.
  static std::mutex mutex;
  static auto* allocators = new std::vector<std::unique_ptr<Allocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (allocators->size() <= static_cast<size_t>(d.index()))
    allocators->resize(static_cast<size_t>(d.index()) + 1);
  auto& slot = (*allocators)[static_cast<size_t>(d.index())];
  if (!slot) slot = make_cuda_allocator(d.index());
  return *slot;
#else
  MT_THROW(DeviceError, "no allocator for ", d, ": this is a CPU-only build");
#endif
}

MemoryStats memory_stats(Device d) { return allocator_for(d).stats(); }
void set_memory_cap(Device d, uint64_t bytes) { allocator_for(d).set_cap(bytes); }
void empty_cache(Device d) { allocator_for(d).empty_cache(); }

}  // namespace minitrain
