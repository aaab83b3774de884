// Learning-rate schedules in closed form (see optim/schedule.h).

#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "optim/detail.h"

namespace minitrain {

namespace {

constexpr double kPi = 3.14159265358979323846;

void check_step(const char* who, int64_t step) {
  if (step < 1)
    MT_THROW(ValueError, who, ": lr_at(", step,
             "): steps count from 1 (the step about to be taken)");
}

class ConstantLR final : public LRSchedule {
 public:
  explicit ConstantLR(double base_lr) : base_lr_(base_lr) {}
  double lr_at(int64_t step) const override {
    check_step("constant_lr", step);
    return base_lr_;
  }
  std::string describe() const override {
    return "constant(lr=" + optim_detail::format_double(base_lr_) + ")";
  }

 private:
  double base_lr_;
};

class StepLR final : public LRSchedule {
 public:
  StepLR(double base_lr, int64_t step_size, double gamma)
      : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {}
  double lr_at(int64_t step) const override {
    check_step("step_lr", step);
    return base_lr_ * std::pow(gamma_, static_cast<double>((step - 1) / step_size_));
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "step(lr=" << optim_detail::format_double(base_lr_) << ", step_size=" << step_size_
       << ", gamma=" << optim_detail::format_double(gamma_) << ")";
    return os.str();
  }

 private:
  double base_lr_;
  int64_t step_size_;
  double gamma_;
};

class CosineLR final : public LRSchedule {
 public:
  CosineLR(double base_lr, int64_t t_max, double eta_min)
      : base_lr_(base_lr), t_max_(t_max), eta_min_(eta_min) {}
  double lr_at(int64_t step) const override {
    check_step("cosine_lr", step);
    const int64_t t = step - 1;
    if (t >= t_max_) return eta_min_;
    return eta_min_ +
           (base_lr_ - eta_min_) *
               (1.0 + std::cos(kPi * static_cast<double>(t) / static_cast<double>(t_max_))) / 2.0;
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "cosine(lr=" << optim_detail::format_double(base_lr_) << ", t_max=" << t_max_
       << ", eta_min=" << optim_detail::format_double(eta_min_) << ")";
    return os.str();
  }

 private:
  double base_lr_;
  int64_t t_max_;
  double eta_min_;
};

class LinearWarmup final : public LRSchedule {
 public:
  LinearWarmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps)
      : inner_(std::move(inner)), warmup_steps_(warmup_steps) {}
  double lr_at(int64_t step) const override {
    check_step("linear_warmup", step);
    const double lr = inner_->lr_at(step);
    if (step >= warmup_steps_) return lr;
    return lr * (static_cast<double>(step) / static_cast<double>(warmup_steps_));
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "warmup(steps=" << warmup_steps_ << ", then " << inner_->describe() << ")";
    return os.str();
  }

 private:
  std::unique_ptr<LRSchedule> inner_;
  int64_t warmup_steps_;
};

}  // namespace

std::unique_ptr<LRSchedule> constant_lr(double base_lr) {
  optim_detail::check_non_negative("constant_lr", "base_lr", base_lr);
  return std::make_unique<ConstantLR>(base_lr);
}

std::unique_ptr<LRSchedule> step_lr(double base_lr, int64_t step_size, double gamma) {
  optim_detail::check_non_negative("step_lr", "base_lr", base_lr);
  if (step_size < 1) MT_THROW(ValueError, "step_lr: step_size must be >= 1, got ", step_size);
  optim_detail::check_non_negative("step_lr", "gamma", gamma);
  return std::make_unique<StepLR>(base_lr, step_size, gamma);
}

std::unique_ptr<LRSchedule> cosine_lr(double base_lr, int64_t t_max, double eta_min) {
  optim_detail::check_non_negative("cosine_lr", "base_lr", base_lr);
  if (t_max < 1) MT_THROW(ValueError, "cosine_lr: t_max must be >= 1, got ", t_max);
  optim_detail::check_non_negative("cosine_lr", "eta_min", eta_min);
  return std::make_unique<CosineLR>(base_lr, t_max, eta_min);
}

std::unique_ptr<LRSchedule> linear_warmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps) {
  MT_CHECK_AS(ValueError, inner != nullptr, "linear_warmup: the wrapped schedule is null");
  if (warmup_steps < 0)
    MT_THROW(ValueError, "linear_warmup: warmup_steps must be >= 0, got ", warmup_steps);
  if (warmup_steps == 0) return inner;  // min(1, step / 0): no warm-up at all
  return std::make_unique<LinearWarmup>(std::move(inner), warmup_steps);
}

const std::vector<ScheduleInfo>& schedule_table() {
  static const std::vector<ScheduleInfo> table = {
      {"none", [](const ScheduleSettings& s) { return constant_lr(s.lr); }},
      {"step", [](const ScheduleSettings& s) { return step_lr(s.lr, s.step_size, s.gamma); }},
      {"cosine", [](const ScheduleSettings& s) { return cosine_lr(s.lr, s.total_steps); }},
  };
  return table;
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> names;
  for (const ScheduleInfo& s : schedule_table()) names.push_back(s.name);
  return names;
}

std::unique_ptr<LRSchedule> make_named_schedule(const std::string& name,
                                                const ScheduleSettings& settings) {
  for (const ScheduleInfo& s : schedule_table())
    if (name == s.name) return s.make(settings);
  MT_THROW(ValueError, "unknown schedule '", name,
           "'; valid names: ", join(schedule_names(), ", "));
}

}  // namespace minitrain
