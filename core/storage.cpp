#include "core/storage.h"

#include "core/allocator.h"
#include "core/bytes.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace minitrain {

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device) {
  return allocate(bytes, device, allocator_for(device));
}

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes, Device device, Allocator& allocator) {
  // The one door to every allocator: past this bound their rounding could wrap.
  MT_CHECK_AS(ValueError, bytes <= kMaxAllocationBytes, device, ": cannot allocate ",
              format_bytes(bytes), " (", bytes, " bytes); no machine has that much memory");
  void* p = allocator.allocate(bytes);
  return std::shared_ptr<Storage>(new Storage(p, bytes, device, &allocator));
}

Storage::~Storage() { allocator_->deallocate(data_); }

}  // namespace minitrain
