#pragma once
// A block of device memory owned by reference-counted handles: tensors that are views of one
// another share one Storage, which returns its block to the allocator when the last one goes.

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace minitrain {

class Storage {
 public:
  /// Allocates from allocator_for(device); throws OutOfMemory or DeviceError.
  static std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }

 private:
  Storage(void* data, std::size_t nbytes, Device device) : data_(data), nbytes_(nbytes), device_(device) {}
  void* data_;
  std::size_t nbytes_;
  Device device_;
};

}  // namespace minitrain
