#include "core/tensor.h"

#include <cstring>

#include "core/allocator.h"
#include "core/checked_math.h"
#include "core/stream.h"

#if MINITRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#endif

namespace minitrain {

namespace {
std::size_t tensor_bytes(const Shape& shape, DType dtype) {
  return static_cast<std::size_t>(checked_mul(shape.numel(),
                                              static_cast<int64_t>(dtype_size(dtype)), "tensor ",
                                              shape, " of ", dtype, ": its byte count"));
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return Tensor(Storage::allocate(tensor_bytes(shape, dtype), device), 0, shape, dtype);
}

Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  return Tensor(
      Storage::allocate(tensor_bytes(shape, dtype), Device::cpu(), pinned_host_allocator()), 0,
      shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.nbytes() == 0) return t;
  if (device.is_cpu()) {
    std::memset(t.raw_data(), 0, t.nbytes());  // all-zero bits are 0.0 in IEEE 754
  } else {
#if MINITRAIN_WITH_CUDA
    DeviceGuard guard(device);
    CHECK_CUDA(
        cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), current_stream(device).native_handle()));
#endif
  }
  return t;
}

namespace {
template <typename T>
Tensor from_host(const std::vector<T>& values, const Shape& shape, Device device, DType dtype) {
  MT_CHECK_AS(ShapeError, static_cast<int64_t>(values.size()) == shape.numel(),
              "from_vector: ", values.size(), " values cannot fill shape ", shape, " (",
              shape.numel(), " elements)");
  Tensor t = Tensor::empty(shape, dtype, device);
  copy_bytes(t.raw_data(), device, values.data(), Device::cpu(), t.nbytes());
  return t;
}
}  // namespace

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, Device device) {
  return from_host(values, shape, device, DType::Float32);
}
Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, Device device) {
  return from_host(values, shape, device, DType::Float64);
}

void Tensor::check_defined(const char* what) const {
  MT_CHECK(defined(), "Tensor::", what, " called on an undefined tensor");
}

void Tensor::check_dtype(DType want, const char* what) const {
  check_defined(what);
  MT_CHECK_AS(DTypeError, dtype_ == want, "Tensor::", what, ": tensor ", shape_, " holds ", dtype_,
              ", not ", want);
}

const Shape& Tensor::shape() const {
  check_defined("shape");
  return shape_;
}
DType Tensor::dtype() const {
  check_defined("dtype");
  return dtype_;
}
Device Tensor::device() const {
  check_defined("device");
  return storage_->device();
}

void* Tensor::raw_data() const {
  check_defined("data");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

Tensor Tensor::reshape(const std::vector<int64_t>& dims) const {
  check_defined("reshape");
  std::vector<int64_t> out = dims;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MT_CHECK_AS(ShapeError, infer < 0, "reshape: more than one -1 requested for tensor ", shape_);
      infer = static_cast<int64_t>(i);
    } else {
      MT_CHECK_AS(ShapeError, out[i] >= 0, "reshape: negative extent ", out[i],
                  " requested for tensor ", shape_);
      known *= out[i];
    }
  }
  if (infer >= 0) {
    MT_CHECK_AS(ShapeError, known != 0 && numel() % known == 0, "reshape: cannot infer -1: tensor ",
                shape_, " has ", numel(), " elements, not a multiple of ", known);
    out[static_cast<size_t>(infer)] = numel() / known;
  }
  Shape target(out);
  MT_CHECK_AS(ShapeError, target.numel() == numel(), "reshape: tensor ", shape_, " has ", numel(),
              " elements but shape ", target, " holds ", target.numel());
  return Tensor(storage_, offset_, target, dtype_);
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  check_defined("narrow");
  MT_CHECK_AS(ShapeError, ndim() >= 1, "narrow: a 0-d tensor has no rows");
  const int64_t rows = shape_[0];
  MT_CHECK_AS(ShapeError, start >= 0 && length >= 0 && start + length <= rows, "narrow: rows [",
              start, ", ", start + length, ") are out of range for tensor ", shape_);
  std::vector<int64_t> dims = shape_.dims();
  dims[0] = length;
  const int64_t row_elems = rows == 0 ? 0 : numel() / rows;
  return Tensor(storage_, offset_ + start * row_elems, Shape(dims), dtype_);
}

Tensor Tensor::to(Device device) const {
  check_defined("to");
  if (device == this->device()) return *this;
  Tensor t = empty(shape_, dtype_, device);
  copy_bytes(t.raw_data(), device, raw_data(), this->device(), nbytes());
  return t;
}

Tensor Tensor::clone() const {
  check_defined("clone");
  Tensor t = empty(shape_, dtype_, device());
  copy_bytes(t.raw_data(), device(), raw_data(), device(), nbytes());
  return t;
}

void Tensor::copy_(const Tensor& src) {
  check_defined("copy_");
  MT_CHECK(src.defined(), "Tensor::copy_: source is an undefined tensor");
  MT_CHECK_AS(ShapeError, src.shape_ == shape_, "copy_: source shape ", src.shape_,
              " differs from destination shape ", shape_);
  MT_CHECK_AS(DTypeError, src.dtype_ == dtype_, "copy_: source dtype ", src.dtype_,
              " differs from destination dtype ", dtype_, "; use cast() to convert");
  copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  check_dtype(dtype_of<T>::value, "to_vector");
  std::vector<T> out(static_cast<size_t>(numel()));
  copy_bytes(out.data(), Device::cpu(), raw_data(), device(), nbytes());
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;

namespace {
template <typename T>
std::vector<double> widened(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = double(to_float(v[i]));
  return out;
}
}  // namespace

std::vector<double> Tensor::to_double_vector() const {
  check_defined("to_double_vector");
  switch (dtype_) {
    case DType::Float64:
      return to_vector<double>();
    case DType::BFloat16:
      return widened(to_vector<BFloat16>());
    case DType::Float16:
      return widened(to_vector<Half>());
    case DType::Float32:
      break;
  }
  const std::vector<float> f = to_vector<float>();
  return {f.begin(), f.end()};
}

double Tensor::item() const {
  check_defined("item");
  MT_CHECK_AS(ShapeError, numel() == 1, "item: tensor ", shape_, " has ", numel(),
              " elements, not one");
  return to_double_vector()[0];
}

}  // namespace minitrain
