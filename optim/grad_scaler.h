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
//
// Kept on the device (keep_on_device, issue 35) nothing is read back inside a step: the scale and
// growth tracker live in device memory, the loss gradient is scaled by the scale read there,
// unscale_queued() leaves the inf flag there for the optimizer to skip on
// (Optimizer::set_found_inf), and update_queued() is torch's _amp_update_scale_ kernel:
//
//   scaler.keep_on_device(device);  optimizer.set_found_inf(scaler.found_inf());
//   scaler.scale_loss_gradient(grad, 1);  backward(grad);
//   scaler.unscale_queued(params);  optimizer.step();  scaler.update_queued(&record);

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

  /// What this step's loss is multiplied by, and the finite steps in a row (kept on the device:
  /// read back, a blocking copy).
  double scale() const;
  int64_t growth_tracker() const;
  const GradScalerOptions& options() const noexcept { return options_; }

  /// Divides every defined gradient of `params` by scale() (one fused pass per device,
  /// kernels/optim/amp_unscale.h); true when all of them were finite.
  bool unscale(const NamedParameters& params) const;
  /// After the step: found_inf backs off (scale * backoff_factor, the count restarts); otherwise
  /// the count grows, and at growth_interval the scale grows (unless that overflows float32).
  void update(bool found_inf);

  /// Moves the scale and tracker into device memory on `device` (float32, exact: the scale is a
  /// power of two times init_scale's float, the tracker < growth_interval); from then on
  /// scale_loss_gradient, unscale_queued and update_queued queue kernels and read nothing.
  void keep_on_device(Device device);
  bool kept_on_device() const noexcept { return state_.defined(); }
  /// The inf flag unscale_queued() sets: float32 [1] on the device (undefined until kept there).
  const Tensor& found_inf() const noexcept { return found_inf_; }
  /// grad *= scale / divisor, in float32 (a power of two over the batches; no launch when 1 on
  /// the host): the loss gradient before backward.
  void scale_loss_gradient(Tensor& grad, double divisor) const;
  /// unscale()'s pass, queued: the flag stays on the device (needs keep_on_device).
  void unscale_queued(const NamedParameters& params);
  /// update()'s rule on the device, reading the flag there. With `record` (float64 [4] on the
  /// device) it stores the scale used, the flag, the scale and tracker after, for the host to
  /// read with the step's loss (kernels/optim/amp_math.h, kAmpRecordSize).
  /// With `batch_count` (float64 [1]) holding 0 at that point of the queue (a classifier's step
  /// that counted nothing, issue 35) the state stays and the flag is set, so that the optimizer
  /// skips the step (kernels/optim/amp_unscale.h).
  void update_queued(Tensor* record = nullptr, const Tensor* batch_count = nullptr);

  /// For checkpoints: {"scale", "growth_tracker"} as exact strings, and back.
  /// load_state: ValueError naming a missing or malformed entry, nothing changed.
  std::map<std::string, std::string> state() const;
  void load_state(const std::map<std::string, std::string>& state);

 private:
  void write_state(Device device);  // state_ from scale_ and growth_tracker_
  GradScalerOptions options_;
  double scale_;  // on the host; kept on the device, the value when it moved there
  int64_t growth_tracker_ = 0;
  Tensor state_;      // kept on the device: float32 {scale, growth tracker}
  Tensor found_inf_;  // kept on the device: float32 [1]
};

}  // namespace minitrain
