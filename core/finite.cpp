#include "core/finite.h"

#include <cmath>

#include "core/error.h"

namespace minitrain {
namespace {

double value_of(float v) { return v; }
double value_of(double v) { return v; }
double value_of(BFloat16 v) { return to_float(v); }
double value_of(Half v) { return to_float(v); }

template <typename T>
int64_t first_non_finite_of(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(value_of(p[i]))) return i;
  return -1;
}

double element(const Tensor& t, int64_t index) {
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[index];
    case DType::Float64:
      return t.data<double>()[index];
    case DType::BFloat16:
      return value_of(t.data<BFloat16>()[index]);
    case DType::Float16:
      return value_of(t.data<Half>()[index]);
  }
  return 0.0;
}

}  // namespace

int64_t first_non_finite(const Tensor& t) {
  MT_CHECK_AS(DeviceError, t.device().is_cpu(), "first_non_finite: the tensor is on ", t.device(),
              ", not the CPU");
  switch (t.dtype()) {
    case DType::Float32:
      return first_non_finite_of(t.data<float>(), t.numel());
    case DType::Float64:
      return first_non_finite_of(t.data<double>(), t.numel());
    case DType::BFloat16:
      return first_non_finite_of(t.data<BFloat16>(), t.numel());
    case DType::Float16:
      return first_non_finite_of(t.data<Half>(), t.numel());
  }
  return -1;
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
