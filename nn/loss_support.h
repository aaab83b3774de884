#pragma once
// What the Loss classes of nn/ share: the checks of their settings (make_loss's ValueErrors) and
// the small tensors they keep between steps (a grad_out of ones, per-class or per-column weights
// in the prediction's dtype and on its device).

#include <string>
#include <vector>

#include "core/tensor.h"

namespace minitrain {

/// ValueError "<loss>: <setting> must be <rule> but is <value>" unless ok.
void check_loss_setting(bool ok, const std::string& loss, const char* setting, const char* rule,
                        double value);
/// Every weight finite and >= 0; the ValueError names the setting, the index and the value.
void check_loss_weights(const std::string& loss, const char* setting,
                        const std::vector<double>& weights);

/// `cache` as a tensor of ones of `shape`, dtype and device, refilled only when one of them
/// changes.
const Tensor& cached_ones(Tensor& cache, const Shape& shape, DType dtype, Device device);
/// `values` as a 1-d tensor of `like`'s dtype on its device (undefined when values is empty),
/// kept in `cache` and copied again only when the dtype or device changes.
const Tensor& cached_weights(Tensor& cache, const std::vector<double>& values, const Tensor& like);

}  // namespace minitrain
