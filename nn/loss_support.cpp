// The Loss classes' shared checks and cached tensors.

#include "nn/loss_support.h"

#include <cmath>

#include "core/error.h"
#include "core/option_error.h"
#include "kernels/cast.h"
#include "kernels/fill.h"

namespace minitrain {

void check_loss_setting(bool ok, const std::string& loss, const char* setting, const char* rule,
                        double value) {
  if (!ok)
    throw OptionError(loss, setting,
                      ::minitrain::detail::concat("must be ", rule, " but is ", value));
}

void check_loss_weights(const std::string& loss, const char* setting,
                        const std::vector<double>& weights) {
  for (size_t i = 0; i < weights.size(); ++i)
    MT_CHECK_AS(ValueError, std::isfinite(weights[i]) && weights[i] >= 0, loss, ": ", setting, "[",
                i, "] must be finite and >= 0 but is ", weights[i]);
}

const Tensor& cached_ones(Tensor& cache, const Shape& shape, DType dtype, Device device) {
  if (!cache.defined() || cache.shape() != shape || cache.dtype() != dtype ||
      cache.device() != device) {
    cache = Tensor::empty(shape, dtype, device);
    fill(cache, 1.0);
  }
  return cache;
}

const Tensor& cached_weights(Tensor& cache, const std::vector<double>& values, const Tensor& like) {
  if (values.empty()) {
    cache = Tensor();
    return cache;
  }
  if (!cache.defined() || cache.dtype() != like.dtype() || cache.device() != like.device()) {
    Tensor host = Tensor::from_vector(values, Shape{int64_t(values.size())}, Device::cpu());
    if (like.dtype() != DType::Float64) host = cast(host, like.dtype());
    cache = host.to(like.device());
  }
  return cache;
}

}  // namespace minitrain
