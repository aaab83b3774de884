#pragma once
// Learning-rate schedules as functions of the step (steps count from 1, the step about to be
// taken), so a resumed run computes the same rate without replaying scheduler calls.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
/// torch CosineAnnealingLR (closed form): eta_min + (base_lr - eta_min)(1 + cos(pi (step-1) /
/// t_max)) / 2, held at eta_min after t_max.
std::unique_ptr<LRSchedule> cosine_lr(double base_lr, int64_t t_max, double eta_min = 0.0);
/// Linear warm-up from base_lr / warmup_steps to the wrapped schedule over warmup_steps steps:
/// lr = inner(step) * min(1, step / warmup_steps).
std::unique_ptr<LRSchedule> linear_warmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps);

// Note [one table per list of choices]: schedule_table() is the only list of --schedule names;
// building a run's schedule, --schedule's help text and its "choose one of" message read it.
/// What a named schedule may use; each takes the settings it needs.
struct ScheduleSettings {
  double lr = 0.0;          ///< the base rate
  int64_t total_steps = 0;  ///< the run's optimizer steps (cosine: t_max)
  int64_t step_size = 0;    ///< step: decay every step_size steps
  double gamma = 0.0;       ///< step: the decay factor
};
struct ScheduleInfo {
  const char* name;  ///< "none" | "step" | "cosine"
  std::unique_ptr<LRSchedule> (*make)(const ScheduleSettings& settings);
};
/// Every named schedule, in the order --help and error messages list them.
const std::vector<ScheduleInfo>& schedule_table();
std::vector<std::string> schedule_names();
/// The schedule called `name`; ValueError naming the valid names for any other.
std::unique_ptr<LRSchedule> make_named_schedule(const std::string& name,
                                                const ScheduleSettings& settings);

}  // namespace minitrain
