#pragma once
// Learning-rate schedules as functions of the step (steps count from 1, the step about to be
// taken), so a resumed run computes the same rate without replaying scheduler calls.

#include <cstdint>
#include <memory>
#include <string>

namespace minitrain {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr_at(int64_t step) const = 0;
  virtual std::string describe() const = 0;
};

/// base_lr throughout.
std::unique_ptr<LRSchedule> constant_lr(double base_lr);
/// torch StepLR: base_lr * gamma^floor((step - 1) / step_size).
std::unique_ptr<LRSchedule> step_lr(double base_lr, int64_t step_size, double gamma);
/// torch CosineAnnealingLR (closed form): eta_min + (base_lr - eta_min)(1 + cos(pi (step-1) / t_max)) / 2,
/// held at eta_min after t_max.
std::unique_ptr<LRSchedule> cosine_lr(double base_lr, int64_t t_max, double eta_min = 0.0);
/// Linear warm-up from base_lr / warmup_steps to the wrapped schedule over warmup_steps steps:
/// lr = inner(step) * min(1, step / warmup_steps).
std::unique_ptr<LRSchedule> linear_warmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps);

}  // namespace minitrain
