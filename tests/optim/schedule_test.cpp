// Learning-rate schedules: closed-form values at chosen steps, against torch's schedulers
// (StepLR, CosineAnnealingLR) worked out by hand here, and their validation.

#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;

constexpr double kPi = 3.14159265358979323846;

double decay(const LRSchedule& s, int64_t step) { return s.factor_at(step).decay; }
double warmup(const LRSchedule& s, int64_t step) { return s.factor_at(step).warmup; }

TEST(LrSchedule, ConstantAndStepFactors) {
  EXPECT_EQ(decay(*constant_lr(), 1), 1.0);
  EXPECT_EQ(decay(*constant_lr(), 1000000), 1.0);
  EXPECT_EQ(warmup(*constant_lr(), 1), 1.0);
  // StepLR(step_size=3, gamma=0.5): steps 1-3 at 1, 4-6 at 0.5, 7 at 0.25.
  auto s = step_lr(3, 0.5);
  EXPECT_DOUBLE_EQ(decay(*s, 1), 1.0);
  EXPECT_DOUBLE_EQ(decay(*s, 3), 1.0);
  EXPECT_DOUBLE_EQ(decay(*s, 4), 0.5);
  EXPECT_DOUBLE_EQ(decay(*s, 6), 0.5);
  EXPECT_DOUBLE_EQ(decay(*s, 7), 0.25);
  EXPECT_DOUBLE_EQ(decay(*s, 31), std::pow(0.5, 10));
  EXPECT_NE(s->describe().find("step_size=3"), std::string::npos);
}

TEST(LrSchedule, CosineFactorsAndHeldAtTheFloorAfterTMax) {
  auto c = cosine_lr(10, 0.01);
  EXPECT_DOUBLE_EQ(decay(*c, 1), 1.0);                      // t = 0: the base rate
  EXPECT_DOUBLE_EQ(decay(*c, 6), 0.01 + (1 - 0.01) * 0.5);  // t = t_max / 2
  EXPECT_DOUBLE_EQ(decay(*c, 4), 0.01 + 0.99 * (1 + std::cos(kPi * 3 / 10)) / 2);
  EXPECT_DOUBLE_EQ(decay(*c, 11), 0.01);  // t = t_max
  EXPECT_DOUBLE_EQ(decay(*c, 12), 0.01);  // held, not rising
  EXPECT_DOUBLE_EQ(decay(*c, 500), 0.01);
  EXPECT_GT(decay(*c, 2), decay(*c, 3));           // decreasing
  EXPECT_DOUBLE_EQ(decay(*cosine_lr(4), 3), 0.5);  // the floor defaults to 0
}

TEST(LrSchedule, LinearWarmupRampsTheWrappedSchedule) {
  auto w = linear_warmup(constant_lr(), 4);
  EXPECT_DOUBLE_EQ(warmup(*w, 1), 0.25);  // 1 / warmup_steps
  EXPECT_DOUBLE_EQ(warmup(*w, 2), 0.5);
  EXPECT_DOUBLE_EQ(warmup(*w, 4), 1.0);
  EXPECT_DOUBLE_EQ(warmup(*w, 9), 1.0);
  auto wc = linear_warmup(cosine_lr(8), 2);
  EXPECT_DOUBLE_EQ(decay(*wc, 1), 1.0);
  EXPECT_DOUBLE_EQ(warmup(*wc, 1), 0.5);
  EXPECT_DOUBLE_EQ(decay(*wc, 5), 0.5);  // cosine at t = 4 of 8, past the warm-up
  EXPECT_DOUBLE_EQ(warmup(*wc, 5), 1.0);
  EXPECT_NE(wc->describe().find("cosine"), std::string::npos);
  EXPECT_DOUBLE_EQ(warmup(*linear_warmup(constant_lr(), 0), 1), 1.0);  // no warm-up
}

TEST(LrSchedule, InvalidArgumentsAreValueErrors) {
  EXPECT_NE(error_message([] { step_lr(0, 0.5); }).find("step_size must be >= 1, got 0"),
            std::string::npos);
  EXPECT_THROW(step_lr(2, -0.5), ValueError);
  EXPECT_NE(error_message([] { cosine_lr(0); }).find("t_max"), std::string::npos);
  EXPECT_THROW(cosine_lr(10, std::nan("")), ValueError);
  EXPECT_THROW(linear_warmup(constant_lr(), -1), ValueError);
  EXPECT_THROW(linear_warmup(nullptr, 3), ValueError);
  EXPECT_NE(error_message([] { step_lr(2, 0.5)->factor_at(0); }).find("steps count from 1"),
            std::string::npos);
}

TEST(LrSchedule, NamedSchedulesComeFromTheTable) {
  EXPECT_EQ(schedule_names(),
            (std::vector<std::string>{"none", "step", "cosine"}));  // --help's order
  ScheduleSettings s;
  s.total_steps = 10;
  s.step_size = 2;
  s.gamma = 0.1;
  EXPECT_EQ(make_named_schedule("none", s)->describe(), constant_lr()->describe());
  EXPECT_EQ(make_named_schedule("step", s)->describe(), step_lr(2, 0.1)->describe());
  EXPECT_EQ(make_named_schedule("cosine", s)->describe(), cosine_lr(10)->describe());
  EXPECT_DOUBLE_EQ(decay(*make_named_schedule("step", s), 3), decay(*step_lr(2, 0.1), 3));
  EXPECT_EQ(error_message([&] { make_named_schedule("linear", s); }),
            "unknown schedule 'linear'; valid names: none, step, cosine");
}

// Issue 33: the schedule is a factor on the optimizer's own base rate and holds no rate; the
// optimizer's rate is (base * decay) * warmup, bit for bit the rate the schedules computed when
// they held the base rate themselves (torch's closed forms with eta_min = 0).
TEST(LrSchedule, TheOptimizersRateIsItsBaseRateTimesTheFactors) {
  Parameter p;
  p.value = Tensor::zeros({2}, DType::Float32, Device::cpu());
  AdamOptions o;
  o.lr = 3e-3;
  Adam adam({{"w", &p}}, o);
  auto cosine = linear_warmup(cosine_lr(30), 7);
  auto step = linear_warmup(step_lr(4, 0.7), 10);
  for (int64_t t = 1; t <= 40; ++t) {
    const double ramp7 = t < 7 ? static_cast<double>(t) / 7.0 : 1.0;
    const double ramp10 = t < 10 ? static_cast<double>(t) / 10.0 : 1.0;
    adam.set_lr_factor(cosine->factor_at(t));
    const double c = t - 1 >= 30
                         ? 0.0
                         : (o.lr * (1.0 + std::cos(kPi * static_cast<double>(t - 1) / 30.0))) / 2.0;
    EXPECT_EQ(adam.lr(), c * ramp7) << "cosine, step " << t;
    adam.set_lr_factor(step->factor_at(t));
    EXPECT_EQ(adam.lr(), o.lr * std::pow(0.7, static_cast<double>((t - 1) / 4)) * ramp10)
        << "step, step " << t;
  }
  EXPECT_EQ(adam.base_lr(), 3e-3);  // the factors never change the base rate
  EXPECT_EQ(adam.options().lr, 3e-3);
  adam.set_lr_factor({});
  EXPECT_EQ(adam.lr(), 3e-3);
  EXPECT_NE(error_message([&] {
              adam.set_lr_factor({-0.5, 1.0});
            }).find("a learning-rate factor must be finite and >= 0, got decay -0.5"),
            std::string::npos);
}

// A checkpoint keeps the base rate ("initial_lr") beside the current one, so a resumed run's
// schedule scales the base rate, not the rate it had reached.
TEST(LrSchedule, SavedStateKeepsTheBaseRateAndTheCurrentRate) {
  Parameter p;
  p.value = Tensor::zeros({2}, DType::Float32, Device::cpu());
  SGDOptions o;
  o.lr = 0.2;
  SGD a({{"w", &p}}, o);
  a.set_lr_factor({0.25, 0.5});
  const auto scalars = a.state_scalars();
  EXPECT_EQ(scalars.at("initial_lr"), "0.20000000000000001");
  SGDOptions other;
  other.lr = 0.9;
  SGD b({{"w", &p}}, other);
  b.load_state({}, scalars);
  EXPECT_EQ(b.lr(), a.lr());  // continues at the saved rate
  EXPECT_EQ(b.base_lr(), 0.2);
  b.set_lr_factor({1.0, 1.0});
  EXPECT_EQ(b.lr(), 0.2);
  auto older = scalars;  // a state saved before "initial_lr": its rate was its base
  older.erase("initial_lr");
  b.load_state({}, older);
  EXPECT_EQ(b.base_lr(), a.lr());
}

}  // namespace
}  // namespace minitrain
