#include "core/finite.h"

#include <cmath>

#include "core/error.h"

namespace minitrain {
namespace {

template <typename T>
int64_t first_non_finite_of(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return i;
  return -1;
}

double element(const Tensor& t, int64_t index) {
  return t.dtype() == DType::Float32 ? double(t.data<float>()[index]) : t.data<double>()[index];
}

}  // namespace

int64_t first_non_finite(const Tensor& t) {
  MT_CHECK_AS(DeviceError, t.device().is_cpu(), "first_non_finite: the tensor is on ", t.device(),
              ", not the CPU");
  if (t.dtype() == DType::Float32) return first_non_finite_of(t.data<float>(), t.numel());
  MT_CHECK_AS(DTypeError, t.dtype() == DType::Float64, "first_non_finite: the tensor holds ",
              t.dtype(), ", not float32 or float64");
  return first_non_finite_of(t.data<double>(), t.numel());
}

std::string unravel_index(int64_t index, const Shape& shape) {
  std::vector<int64_t> coords(static_cast<std::size_t>(shape.ndim()));
  for (int64_t d = shape.ndim() - 1; d >= 0; --d) {
    coords[static_cast<std::size_t>(d)] = index % shape[d];
    index /= shape[d];
  }
  return dims_str(coords);
}

std::string non_finite_name(const Tensor& t, int64_t index) {
  const double v = element(t, index);
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

}  // namespace minitrain
