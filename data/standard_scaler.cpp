// Standardised features (data/standard_scaler.h), scikit-learn's StandardScaler with its defaults.

#include "data/standard_scaler.h"

#include <cfloat>
#include <cmath>

#include "core/error.h"

namespace minitrain {
namespace {

// x[i, j] as float32, whatever x holds (predict reads float64 .npy files too).
float value_at(const Tensor& x, int64_t i) {
  return x.dtype() == DType::Float64 ? static_cast<float>(x.data<double>()[i]) : x.data<float>()[i];
}

void check_host_matrix(const Tensor& x, const char* what) {
  MT_CHECK_AS(ShapeError, x.ndim() == 2, what, ": features must be 2-D [rows, features], got ",
              x.shape());
  MT_CHECK_AS(DTypeError, x.dtype() == DType::Float32 || x.dtype() == DType::Float64, what,
              ": features must be float32 or float64");
  MT_CHECK_AS(DeviceError, x.device().is_cpu(), what, ": features must be on the CPU, got ",
              x.device().str());
}

}  // namespace

StandardScaler fit_standard_scaler(const Tensor& x) {
  check_host_matrix(x, "fit_standard_scaler");
  const int64_t n = x.size(0), f = x.size(1);
  MT_CHECK_AS(ShapeError, n >= 1, "fit_standard_scaler: no rows to fit on");
  StandardScaler s;
  s.mean.resize(static_cast<std::size_t>(f));
  s.scale.resize(static_cast<std::size_t>(f));
  const double rows = static_cast<double>(n);
  for (int64_t j = 0; j < f; ++j) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += value_at(x, i * f + j);
    const double mean = sum / rows;
    double sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = value_at(x, i * f + j) - mean;
      sq += d * d;
    }
    const double var = sq / rows;  // ddof = 0, numpy's and sklearn's default
    const double eps = DBL_EPSILON;
    const double bound = rows * eps * var + (rows * mean * eps) * (rows * mean * eps);
    const double scale = var <= bound ? 1.0 : std::sqrt(var);
    s.mean[static_cast<std::size_t>(j)] = static_cast<float>(mean);
    // A spread too small for float32 (a subnormal or 0 after rounding) divides as a constant.
    const float scale32 = static_cast<float>(scale);
    s.scale[static_cast<std::size_t>(j)] = scale32 >= FLT_MIN ? scale32 : 1.0f;
  }
  return s;
}

Tensor standardize(const Tensor& x, const StandardScaler& scaler) {
  check_host_matrix(x, "standardize");
  const int64_t n = x.size(0), f = x.size(1);
  MT_CHECK_AS(ShapeError, f == static_cast<int64_t>(scaler.mean.size()), "standardize: ", f,
              " features per row, but the scaler was fitted on ", scaler.mean.size());
  Tensor out = Tensor::empty({n, f});
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const auto k = static_cast<std::size_t>(j);
      o[i * f + j] = (value_at(x, i * f + j) - scaler.mean[k]) / scaler.scale[k];
    }
  return out;
}

}  // namespace minitrain
