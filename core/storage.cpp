#include "core/storage.h"

#include "core/allocator.h"

namespace minitrain {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device) {
  Allocator& a = allocator_for(device);
  void* p = a.allocate(bytes);
  return std::shared_ptr<Storage>(new Storage(p, bytes, device));
}

Storage::~Storage() { allocator_for(device_).deallocate(data_); }

}  // namespace minitrain
