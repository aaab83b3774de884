#pragma once
// A dense, contiguous, row-major array on one device. Copying a Tensor copies a handle: copies
// (and views made by reshape / narrow) share storage, as torch tensors do; clone() copies data.
// Arithmetic lives in kernels/; this class knows shape, type, place and bytes.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace minitrain {

class Tensor {
 public:
  Tensor() = default;  ///< undefined: defined() is false, every accessor but defined() throws

  /// Uninitialised memory. Throws DeviceError for an unavailable device, OutOfMemory when full.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32,
                      Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32,
                      Device device = Device::cpu());
  /// A CPU tensor in page-locked memory (pinned_host_allocator), the source of asynchronous
  /// copies to a GPU; ordinary memory where CUDA is unusable.
  static Tensor empty_pinned(const Shape& shape, DType dtype = DType::Float32);
  /// Copies `values` (numel of shape many) to a new tensor on `device`; throws ShapeError.
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            Device device = Device::cpu());
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            Device device = Device::cpu());

  bool defined() const noexcept { return storage_ != nullptr; }
  const Shape& shape() const;
  int64_t ndim() const { return shape().ndim(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int64_t dim) const { return shape()[dim]; }
  DType dtype() const;
  Device device() const;
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype()); }

  /// Typed pointer to the first element; throws DTypeError when T is not the tensor's type.
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<T>::value, "data");
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  /// A view with another shape and the same elements; one extent may be -1 (inferred).
  Tensor reshape(const std::vector<int64_t>& dims) const;
  Tensor flatten() const { return reshape({-1}); }
  /// A view of rows [start, start + length) along the first dimension.
  Tensor narrow(int64_t start, int64_t length) const;

  /// This tensor on `device`: itself (shared) when already there, else a copy.
  Tensor to(Device device) const;
  Tensor clone() const;
  /// Copies `src` (same shape and dtype, any device) into this tensor's memory.
  void copy_(const Tensor& src);

  /// The elements in a host vector (T must be the tensor's type).
  template <typename T>
  std::vector<T> to_vector() const;
  /// The elements in a host vector of doubles, whatever the float dtype (exact: float32 widens).
  std::vector<double> to_double_vector() const;
  /// The single element of a one-element tensor, converted to double.
  double item() const;

  /// How many handles share this tensor's storage, views included (0 when undefined): 1 means
  /// this handle is the only one (core/buffer_slot.h reuses such a buffer).
  long storage_use_count() const noexcept { return storage_.use_count(); }
  bool shares_storage_with(const Tensor& other) const noexcept {
    return storage_ != nullptr && storage_ == other.storage_;
  }
  /// Readable contents, torch-style: large tensors show their first and last three entries.
  std::string str() const;

 private:
  Tensor(std::shared_ptr<Storage> storage, int64_t offset, Shape shape, DType dtype)
      : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {}
  void check_defined(const char* what) const;
  void check_dtype(DType want, const char* what) const;

  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::Float32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Byte copy between any two devices. A copy to the host returns when the data is there; a copy
/// to a GPU is queued on the destination's current stream (the source may be reused at once).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes);

class Stream;
/// The same copy queued on `stream` (of the GPU involved) without waiting: the caller keeps the
/// host side alive and untouched until the stream has passed the copy (record an Event).
/// Asynchronous only from pinned host memory; from pageable memory CUDA copies synchronously.
void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device,
                      std::size_t bytes, const Stream& stream);

}  // namespace minitrain
