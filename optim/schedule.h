#pragma once
// Learning-rate schedules as functions of the step (steps count from 1, the step about to be
// taken), so a resumed run computes the same rate without replaying scheduler calls. A schedule
// is a factor on the optimizer's own base rate, as torch's LambdaLR (lr = base_lr * lambda(step)):
// it neither holds nor checks a rate (the optimizer's constructor checks its lr, the one check).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minitrain {

/// The factors on the base rate at one step: rate = (base_lr * decay) * warmup, in that order
/// (Optimizer::set_lr_factor), as torch's ChainedScheduler applies a decay, then a warm-up.
struct LRFactor {
  double decay = 1.0;   ///< the schedule's shape (1: the base rate)
  double warmup = 1.0;  ///< the linear warm-up's ramp (1 once it is over)
};

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual LRFactor factor_at(int64_t step) const = 0;
  virtual std::string describe() const = 0;
};

/// The base rate throughout (factor 1).
std::unique_ptr<LRSchedule> constant_lr();
/// torch StepLR: gamma^floor((step - 1) / step_size).
std::unique_ptr<LRSchedule> step_lr(int64_t step_size, double gamma);
/// torch CosineAnnealingLR (closed form) with eta_min = min_factor * base_lr:
/// min_factor + (1 - min_factor)(1 + cos(pi (step-1) / t_max)) / 2, held at min_factor after
/// t_max.
std::unique_ptr<LRSchedule> cosine_lr(int64_t t_max, double min_factor = 0.0);
/// Linear warm-up from 1 / warmup_steps of the wrapped schedule to all of it over warmup_steps
/// steps: warmup = min(1, step / warmup_steps), decay the wrapped schedule's.
std::unique_ptr<LRSchedule> linear_warmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps);

// Note [one table per list of choices]: schedule_table() is the only list of --schedule names;
// building a run's schedule, --schedule's help text and its "choose one of" message read it.
/// What a named schedule may use; each takes the settings it needs.
struct ScheduleSettings {
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
