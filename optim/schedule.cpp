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
  LRFactor factor_at(int64_t step) const override {
    check_step("constant_lr", step);
    return {};
  }
  std::string describe() const override { return "constant"; }
};

class StepLR final : public LRSchedule {
 public:
  StepLR(int64_t step_size, double gamma) : step_size_(step_size), gamma_(gamma) {}
  LRFactor factor_at(int64_t step) const override {
    check_step("step_lr", step);
    return {std::pow(gamma_, static_cast<double>((step - 1) / step_size_)), 1.0};
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "step(step_size=" << step_size_ << ", gamma=" << optim_detail::format_double(gamma_)
       << ")";
    return os.str();
  }

 private:
  int64_t step_size_;
  double gamma_;
};

class CosineLR final : public LRSchedule {
 public:
  CosineLR(int64_t t_max, double min_factor) : t_max_(t_max), min_factor_(min_factor) {}
  LRFactor factor_at(int64_t step) const override {
    check_step("cosine_lr", step);
    const int64_t t = step - 1;
    if (t >= t_max_) return {min_factor_, 1.0};
    // With min_factor 0, base * (1 + cos) / 2 rounds as torch's eta_min + (base - eta_min) *
    // (1 + cos) / 2 does (halving is exact).
    return {min_factor_ +
                (1.0 - min_factor_) *
                    (1.0 + std::cos(kPi * static_cast<double>(t) / static_cast<double>(t_max_))) /
                    2.0,
            1.0};
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "cosine(t_max=" << t_max_ << ", min_factor=" << optim_detail::format_double(min_factor_)
       << ")";
    return os.str();
  }

 private:
  int64_t t_max_;
  double min_factor_;
};

class LinearWarmup final : public LRSchedule {
 public:
  LinearWarmup(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps)
      : inner_(std::move(inner)), warmup_steps_(warmup_steps) {}
  LRFactor factor_at(int64_t step) const override {
    check_step("linear_warmup", step);
    LRFactor f = inner_->factor_at(step);
    if (step < warmup_steps_)
      f.warmup *= static_cast<double>(step) / static_cast<double>(warmup_steps_);
    return f;
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

std::unique_ptr<LRSchedule> constant_lr() { return std::make_unique<ConstantLR>(); }

std::unique_ptr<LRSchedule> step_lr(int64_t step_size, double gamma) {
  if (step_size < 1) MT_THROW(ValueError, "step_lr: step_size must be >= 1, got ", step_size);
  optim_detail::check_non_negative("step_lr", "gamma", gamma);
  return std::make_unique<StepLR>(step_size, gamma);
}

std::unique_ptr<LRSchedule> cosine_lr(int64_t t_max, double min_factor) {
  if (t_max < 1) MT_THROW(ValueError, "cosine_lr: t_max must be >= 1, got ", t_max);
  optim_detail::check_non_negative("cosine_lr", "min_factor", min_factor);
  return std::make_unique<CosineLR>(t_max, min_factor);
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
      {"none", [](const ScheduleSettings&) { return constant_lr(); }},
      {"step", [](const ScheduleSettings& s) { return step_lr(s.step_size, s.gamma); }},
      {"cosine", [](const ScheduleSettings& s) { return cosine_lr(s.total_steps); }},
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
