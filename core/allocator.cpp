#include "core/allocator.h"

#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace minitrain {

Allocator& cpu_allocator();                              // cpu_allocator.cpp
#if MINITRAIN_WITH_CUDA
std::unique_ptr<Allocator> make_cuda_allocator(int index);  // cuda_allocator.cpp
#endif

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
