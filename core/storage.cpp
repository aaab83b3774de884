#include "core/storage.h"

#include "core/allocator.h"

namespace minitrain {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device) {
  return allocate(bytes, device, allocator_for(device));
}

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device, Allocator& allocator) {
  void* p = allocator.allocate(bytes);
  return std::shared_ptr<Storage>(new Storage(p, bytes, device, &allocator));
}

Storage::~Storage() { allocator_->deallocate(data_); }

}  // namespace minitrain
