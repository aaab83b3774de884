// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2). The squared
// norms are summed on each gradient's device in float64, so a GPU run waits for the device once
// (one .item() per device), not once per parameter; with `foreach` (the default) a device's
// gradients are reduced and scaled as one list (kernels/multi_tensor_norm.h).

#include "optim/clip.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/option_error.h"
#include "core/strings.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/multi_tensor_norm.h"
#include "kernels/reduce.h"

namespace minitrain {

namespace {

// A device's gradients, in parameter order; devices in order of their first gradient.
using DeviceGrads = std::vector<std::pair<Device, std::vector<Tensor>>>;

DeviceGrads gradient_lists_by_device(const NamedParameters& params) {
  DeviceGrads groups;
  for (const auto& [name, p] : params) {
    MT_CHECK_AS(ValueError, p != nullptr, "clip_grad_norm_: parameter '", name, "' is null");
    if (!p->grad.defined()) continue;  // torch skips grad=None
    const Tensor& g = p->grad;
    auto it = groups.begin();
    while (it != groups.end() && it->first != g.device()) ++it;
    if (it == groups.end()) {
      groups.emplace_back(g.device(), std::vector<Tensor>{g});
    } else {
      it->second.push_back(g);
    }
  }
  return groups;
}

// The per-tensor path (foreach = false): per gradient a 0-d squared_norm in its own type, widened
// to float64 and added to the device's running sum. The reference the list kernels reproduce.
Tensor sum_of_squares_per_tensor(const std::vector<Tensor>& grads) {
  Tensor total;
  for (const Tensor& g : grads) {
    Tensor sq = squared_norm(g);
    if (sq.dtype() != DType::Float64) sq = cast(sq, DType::Float64);
    if (!total.defined()) {
      total = sq;
    } else {
      add(total, total, sq);
    }
  }
  return total;
}

}  // namespace

ClipWorkspace::OnDevice& ClipWorkspace::on(Device device) {
  for (const auto& d : devices_)
    if (d->device == device) return *d;
  devices_.push_back(std::make_unique<OnDevice>(device));
  return *devices_.back();
}

PendingGradNorm clip_grad_norm_deferred_(const NamedParameters& params, double max_norm,
                                         bool foreach, ClipWorkspace* workspace) {
  // The one check of max_norm (--clip-grad-norm names it: train/settings.h).
  if (!(std::isfinite(max_norm) && max_norm >= 0.0))
    throw OptionError("clip_grad_norm_", "max_norm",
                      "must be finite and >= 0 (0: no clipping), got " + number_text(max_norm));

  DeviceGrads groups = gradient_lists_by_device(params);
  PendingGradNorm pending;
  for (const auto& [device, grads] : groups) {
    if (foreach && workspace != nullptr) {
      // Kept across calls: the caller's last PendingGradNorm, dropped, frees this step's total.
      Tensor total = workspace->sum_sq(device).get(Shape{}, DType::Float64, device);
      squared_norm_multi(total, grads, workspace->partials(device));
      pending.sum_sq.push_back(total);
    } else if (foreach) {
      Tensor total = Tensor::empty(Shape{}, DType::Float64, device);
      squared_norm_multi(total, grads);
      pending.sum_sq.push_back(total);
    } else {
      pending.sum_sq.push_back(sum_of_squares_per_tensor(grads));
    }
  }
  if (groups.empty() || max_norm == 0.0) return pending;  // 0: the norm, no clipping

  if (groups.size() == 1) {
    // One device: the kernel reads the sum and decides (below 1 or NaN: scale; else leave).
    std::vector<Tensor>& grads = groups.front().second;
    if (foreach) {
      clip_scale_multi_(grads, pending.sum_sq.front(), max_norm);
    } else {
      for (Tensor& g : grads) clip_scale_(g, pending.sum_sq.front(), max_norm);
    }
    return pending;
  }
  // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1; multiplying by 1 changes
  // nothing, so only a coefficient below 1 (or NaN, from a non-finite norm, which torch also
  // spreads into the gradients) scales them.
  const double total_norm = pending.read();
  const double clip_coef = max_norm / (total_norm + 1e-6);
  if (!(clip_coef >= 1.0))
    for (auto& [device, grads] : groups)
      for (Tensor& g : grads) scale(g, g, clip_coef);
  return pending;
}

double PendingGradNorm::read() const {
  double total = 0.0;
  for (const Tensor& t : sum_sq) total += t.item();
  return std::sqrt(total);
}

double clip_grad_norm_(const NamedParameters& params, double max_norm, bool foreach) {
  return clip_grad_norm_deferred_(params, max_norm, foreach).read();
}

}  // namespace minitrain
