#pragma once
// Dynamic loss scaling for float16 training, torch.amp.GradScaler's rule and defaults. float16's
// smallest normal is 6.1e-5, so small gradients underflow to zero: the loss (hence every
// gradient) is multiplied by `scale` before backward, and the float32 gradients divided by it
// before the optimizer step. When a gradient overflowed (inf or NaN) the step is skipped and the
// scale halved; after growth_interval finite steps in a row it doubles. bfloat16 has float32's
// range and needs none of this.
//
//   GradScaler scaler;                       // init 65536, growth 2, backoff 0.5, every 2000
//   grad = dL/dy * scaler.scale();  backward(grad);
//   const bool finite = scaler.unscale(params);   // grads /= scale, and the inf/NaN check
//   if (finite) optimizer.step();
//   scaler.update(!finite);

#include <cstdint>
#include <map>
#include <string>

#include "nn/parameter.h"

namespace minitrain {

struct GradScalerOptions {
  double init_scale = 65536.0;  ///< 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  ///< finite steps in a row before the scale grows
};

class GradScaler {
 public:
  /// ValueError naming the value for init_scale <= 0 or not finite, growth_factor <= 1,
  /// backoff_factor outside (0, 1), growth_interval < 1 (torch's constraints).
  explicit GradScaler(GradScalerOptions options = {});

  double scale() const noexcept { return scale_; }  ///< what this step's loss is multiplied by
  int64_t growth_tracker() const noexcept { return growth_tracker_; }  ///< finite steps in a row
  const GradScalerOptions& options() const noexcept { return options_; }

  /// Divides every defined gradient of `params` by scale() (one fused pass per device,
  /// kernels/optim/amp_unscale.h); true when all of them were finite.
  bool unscale(const NamedParameters& params) const;
  /// After the step: found_inf backs off (scale * backoff_factor, the count restarts); otherwise
  /// the count grows, and at growth_interval the scale grows (unless that overflows float32).
  void update(bool found_inf);

  /// For checkpoints: {"scale", "growth_tracker"} as exact strings, and back.
  /// load_state: ValueError naming a missing or malformed entry, nothing changed.
  std::map<std::string, std::string> state() const;
  void load_state(const std::map<std::string, std::string>& state);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace minitrain
