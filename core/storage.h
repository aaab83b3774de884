#pragma once
// A block of device memory owned by reference-counted handles: tensors that are views of one
// another share one Storage, which returns its block to the allocator when the last one goes.

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace minitrain {

class Allocator;

class Storage {
 public:
  /// Allocates from allocator_for(device); throws OutOfMemory or DeviceError.
  static std::shared_ptr<Storage> allocate(std::size_t bytes, Device device);
  /// Allocates from `allocator`, whose memory lives on `device` (e.g. pinned host memory).
  static std::shared_ptr<Storage> allocate(std::size_t bytes, Device device, Allocator& allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const noexcept { return data_; }
  std::size_t nbytes() const noexcept { return nbytes_; }
  Device device() const noexcept { return device_; }

 private:
  Storage(void* data, std::size_t nbytes, Device device, Allocator* allocator)
      : data_(data), nbytes_(nbytes), device_(device), allocator_(allocator) {}
  void* data_;
  std::size_t nbytes_;
  Device device_;
  Allocator* allocator_;  // where data_ goes back; allocators live for the whole process
};

}  // namespace minitrain
