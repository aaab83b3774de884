// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2). The squared
// norms are summed on each gradient's device in float64, so a GPU run waits for the device once
// (one .item() per device), not once per parameter.

#include "optim/clip.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/option_error.h"
#include "core/strings.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace minitrain {

PendingGradNorm clip_grad_norm_deferred_(const NamedParameters& params, double max_norm) {
  // The one check of max_norm (--clip-grad-norm names it: train/settings.h).
  if (!(std::isfinite(max_norm) && max_norm >= 0.0))
    throw OptionError("clip_grad_norm_", "max_norm",
                      "must be finite and >= 0 (0: no clipping), got " + number_text(max_norm));

  // Per device: a 0-d float64 running sum of squares, on that device.
  std::vector<std::pair<Device, Tensor>> totals;
  std::vector<Tensor*> grads;
  for (const auto& [name, p] : params) {
    MT_CHECK_AS(ValueError, p != nullptr, "clip_grad_norm_: parameter '", name, "' is null");
    if (!p->grad.defined()) continue;  // torch skips grad=None
    Tensor& g = p->grad;
    grads.push_back(&g);
    Tensor sq = squared_norm(g);
    if (sq.dtype() != DType::Float64) sq = cast(sq, DType::Float64);
    auto it = totals.begin();
    while (it != totals.end() && it->first != g.device()) ++it;
    if (it == totals.end()) {
      totals.emplace_back(g.device(), sq);
    } else {
      add(it->second, it->second, sq);
    }
  }
  PendingGradNorm pending;
  for (const auto& [device, total] : totals) pending.sum_sq.push_back(total);
  if (grads.empty() || max_norm == 0.0) return pending;  // 0: the norm, no clipping

  if (totals.size() == 1) {
    // One device: the kernel reads the sum and decides (below 1 or NaN: scale; else leave).
    for (Tensor* g : grads) clip_scale_(*g, totals.front().second, max_norm);
    return pending;
  }
  // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1; multiplying by 1 changes
  // nothing, so only a coefficient below 1 (or NaN, from a non-finite norm, which torch also
  // spreads into the gradients) scales them.
  const double total_norm = pending.read();
  const double clip_coef = max_norm / (total_norm + 1e-6);
  if (!(clip_coef >= 1.0))
    for (Tensor* g : grads) scale(*g, *g, clip_coef);
  return pending;
}

double PendingGradNorm::read() const {
  double total = 0.0;
  for (const Tensor& t : sum_sq) total += t.item();
  return std::sqrt(total);
}

double clip_grad_norm_(const NamedParameters& params, double max_norm) {
  return clip_grad_norm_deferred_(params, max_norm).read();
}

}  // namespace minitrain
