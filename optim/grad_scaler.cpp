// GradScaler: the scale's arithmetic is torch's _amp_update_scale_ (in float32 there: every scale
// it reaches from a power of two is a power of two, so float64 here gives the same values).

#include "optim/grad_scaler.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"
#include "kernels/optim/amp_math.h"
#include "kernels/optim/amp_unscale.h"
#include "optim/detail.h"

namespace minitrain {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  MT_CHECK_AS(ValueError, std::isfinite(options.init_scale) && options.init_scale > 0,
              "GradScaler: init_scale must be a finite value > 0, got ", options.init_scale);
  MT_CHECK_AS(ValueError, std::isfinite(options.growth_factor) && options.growth_factor > 1.0,
              "GradScaler: growth_factor must be > 1, got ", options.growth_factor);
  MT_CHECK_AS(ValueError, options.backoff_factor > 0.0 && options.backoff_factor < 1.0,
              "GradScaler: backoff_factor must be in (0, 1), got ", options.backoff_factor);
  MT_CHECK_AS(ValueError, options.growth_interval >= 1,
              "GradScaler: growth_interval must be >= 1, got ", options.growth_interval);
}

namespace {
// One list per device: a model-parallel model's parameters live on several.
std::vector<std::vector<Tensor>> gradients_by_device(const NamedParameters& params) {
  std::vector<std::vector<Tensor>> by_device;
  for (const auto& [name, p] : params) {
    if (!p->grad.defined()) continue;
    bool placed = false;
    for (auto& group : by_device)
      if (group.front().device() == p->grad.device()) {
        group.push_back(p->grad);
        placed = true;
        break;
      }
    if (!placed) by_device.push_back({p->grad});
  }
  return by_device;
}
}  // namespace

double GradScaler::scale() const {
  if (!kept_on_device()) return scale_;
  return static_cast<double>(state_.to(Device::cpu()).data<float>()[0]);
}

int64_t GradScaler::growth_tracker() const {
  if (!kept_on_device()) return growth_tracker_;
  return static_cast<int64_t>(state_.to(Device::cpu()).data<float>()[1]);
}

void GradScaler::keep_on_device(Device device) {
  if (kept_on_device()) {
    if (state_.device() == device) return;
    scale_ = scale();
    growth_tracker_ = growth_tracker();
  }
  write_state(device);
}

void GradScaler::write_state(Device device) {
  MT_CHECK_AS(ValueError, static_cast<double>(static_cast<float>(scale_)) == scale_,
              "GradScaler: the scale ", scale_,
              " is not a float32 value; the device keeps it in float32");
  Tensor values = Tensor::from_vector(
      std::vector<float>{static_cast<float>(scale_), static_cast<float>(growth_tracker_)},
      Shape{kAmpStateSize}, device);
  // Written in place once it exists: a captured step (docs/cuda_graph.md) reads it at its address.
  if (state_.defined() && state_.device() == device)
    copy(state_, values);
  else
    state_ = values;
  // The flag stays the same tensor: an optimizer holds it (Optimizer::set_found_inf).
  if (!found_inf_.defined() || found_inf_.device() != device)
    found_inf_ = Tensor::zeros(Shape{1}, DType::Float32, device);
}

void GradScaler::scale_loss_gradient(Tensor& grad, double divisor) const {
  if (kept_on_device()) {
    scale_by_loss_scale(grad, state_, divisor);
    return;
  }
  const double factor = scale_ / divisor;
  if (factor != 1.0) minitrain::scale(grad, grad, factor);
}

void GradScaler::unscale_queued(const NamedParameters& params) {
  MT_CHECK_AS(ValueError, kept_on_device(),
              "GradScaler::unscale_queued: keep the scaler on the device first (keep_on_device)");
  std::vector<std::vector<Tensor>> by_device = gradients_by_device(params);
  MT_CHECK_AS(ValueError, by_device.size() <= 1,
              "GradScaler::unscale_queued: the gradients are on ", by_device.size(),
              " devices; one flag serves one device (use unscale())");
  std::vector<Tensor> none;
  unscale_on_device(by_device.empty() ? none : by_device.front(), state_, found_inf_);
}

void GradScaler::update_queued(Tensor* record, const Tensor* batch_count) {
  MT_CHECK_AS(ValueError, kept_on_device(),
              "GradScaler::update_queued: keep the scaler on the device first (keep_on_device)");
  amp_update_scale(state_, found_inf_, options_.growth_factor, options_.backoff_factor,
                   options_.growth_interval, record, batch_count);
}

bool GradScaler::unscale(const NamedParameters& params) const {
  MT_CHECK_AS(ValueError, !kept_on_device(),
              "GradScaler::unscale: the scaler is kept on the device; use unscale_queued");
  std::vector<std::vector<Tensor>> by_device = gradients_by_device(params);
  // torch: inv_scale = scale.double().reciprocal().float(), exact for a power of two.
  const double inv = static_cast<double>(static_cast<float>(1.0 / scale_));
  bool finite = true;
  for (auto& group : by_device) finite = !unscale_and_check_finite(group, inv) && finite;
  return finite;
}

void GradScaler::update(bool found_inf) {
  MT_CHECK_AS(ValueError, !kept_on_device(),
              "GradScaler::update: the scaler is kept on the device; use update_queued");
  if (found_inf) {
    scale_ = static_cast<double>(static_cast<float>(scale_ * options_.backoff_factor));
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    const float grown = static_cast<float>(scale_ * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;  // torch keeps the old scale rather than inf
    growth_tracker_ = 0;
  }
}

std::map<std::string, std::string> GradScaler::state() const {
  return {{"scale", optim_detail::format_double(scale())},
          {"growth_tracker", optim_detail::format_int(growth_tracker())}};
}

void GradScaler::load_state(const std::map<std::string, std::string>& state) {
  double scale = 0;
  int64_t tracker = 0;
  const bool found = optim_detail::read_double("GradScaler", state, "scale", &scale) &&
                     optim_detail::read_int("GradScaler", state, "growth_tracker", &tracker);
  MT_CHECK_AS(ValueError, found, "GradScaler: the saved state lacks 'scale' or 'growth_tracker'");
  MT_CHECK_AS(ValueError, std::isfinite(scale) && scale > 0 && tracker >= 0,
              "GradScaler: the saved scale ", scale, " and growth_tracker ", tracker,
              " must be > 0 and >= 0");
  scale_ = scale;
  growth_tracker_ = tracker;
  if (kept_on_device()) write_state(state_.device());
}

}  // namespace minitrain
