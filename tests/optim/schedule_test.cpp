// Learning-rate schedules: closed-form values at chosen steps, against torch's schedulers
// (StepLR, CosineAnnealingLR) worked out by hand here, and their validation.

#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;

constexpr double kPi = 3.14159265358979323846;

TEST(LrSchedule, ConstantAndStepValues) {
  EXPECT_EQ(constant_lr(0.1)->lr_at(1), 0.1);
  EXPECT_EQ(constant_lr(0.1)->lr_at(1000000), 0.1);
  // StepLR(step_size=3, gamma=0.5): steps 1-3 at 0.1, 4-6 at 0.05, 7 at 0.025.
  auto s = step_lr(0.1, 3, 0.5);
  EXPECT_DOUBLE_EQ(s->lr_at(1), 0.1);
  EXPECT_DOUBLE_EQ(s->lr_at(3), 0.1);
  EXPECT_DOUBLE_EQ(s->lr_at(4), 0.05);
  EXPECT_DOUBLE_EQ(s->lr_at(6), 0.05);
  EXPECT_DOUBLE_EQ(s->lr_at(7), 0.025);
  EXPECT_DOUBLE_EQ(s->lr_at(31), 0.1 * std::pow(0.5, 10));
  EXPECT_NE(s->describe().find("step_size=3"), std::string::npos);
}

TEST(LrSchedule, CosineValuesAndHeldAtEtaMinAfterTMax) {
  auto c = cosine_lr(0.1, 10, 0.001);
  EXPECT_DOUBLE_EQ(c->lr_at(1), 0.1);                          // t = 0: base
  EXPECT_DOUBLE_EQ(c->lr_at(6), 0.001 + (0.1 - 0.001) * 0.5);  // t = t_max / 2
  EXPECT_DOUBLE_EQ(c->lr_at(4), 0.001 + 0.099 * (1 + std::cos(kPi * 3 / 10)) / 2);
  EXPECT_DOUBLE_EQ(c->lr_at(11), 0.001);  // t = t_max
  EXPECT_DOUBLE_EQ(c->lr_at(12), 0.001);  // held, not rising
  EXPECT_DOUBLE_EQ(c->lr_at(500), 0.001);
  EXPECT_GT(c->lr_at(2), c->lr_at(3));                 // decreasing
  EXPECT_DOUBLE_EQ(cosine_lr(1.0, 4)->lr_at(3), 0.5);  // eta_min defaults to 0
}

TEST(LrSchedule, LinearWarmupScalesTheWrappedSchedule) {
  auto w = linear_warmup(constant_lr(0.4), 4);
  EXPECT_DOUBLE_EQ(w->lr_at(1), 0.1);  // base / warmup_steps
  EXPECT_DOUBLE_EQ(w->lr_at(2), 0.2);
  EXPECT_DOUBLE_EQ(w->lr_at(4), 0.4);
  EXPECT_DOUBLE_EQ(w->lr_at(9), 0.4);
  auto wc = linear_warmup(cosine_lr(1.0, 8), 2);
  EXPECT_DOUBLE_EQ(wc->lr_at(1), 0.5 * 1.0);
  EXPECT_DOUBLE_EQ(wc->lr_at(5), 0.5);  // cosine at t = 4 of 8, past the warm-up
  EXPECT_NE(wc->describe().find("cosine"), std::string::npos);
  EXPECT_DOUBLE_EQ(linear_warmup(constant_lr(0.3), 0)->lr_at(1), 0.3);  // no warm-up
}

TEST(LrSchedule, InvalidArgumentsAreValueErrors) {
  EXPECT_THROW(constant_lr(-1), ValueError);
  EXPECT_NE(error_message([] { step_lr(0.1, 0, 0.5); }).find("step_size must be >= 1, got 0"),
            std::string::npos);
  EXPECT_THROW(step_lr(0.1, 2, -0.5), ValueError);
  EXPECT_NE(error_message([] { cosine_lr(0.1, 0); }).find("t_max"), std::string::npos);
  EXPECT_THROW(cosine_lr(std::nan(""), 10), ValueError);
  EXPECT_THROW(linear_warmup(constant_lr(0.1), -1), ValueError);
  EXPECT_THROW(linear_warmup(nullptr, 3), ValueError);
  EXPECT_NE(error_message([] { step_lr(0.1, 2, 0.5)->lr_at(0); }).find("steps count from 1"),
            std::string::npos);
}

TEST(LrSchedule, NamedSchedulesComeFromTheTable) {
  EXPECT_EQ(schedule_names(),
            (std::vector<std::string>{"none", "step", "cosine"}));  // --help's order
  ScheduleSettings s;
  s.lr = 0.5;
  s.total_steps = 10;
  s.step_size = 2;
  s.gamma = 0.1;
  EXPECT_EQ(make_named_schedule("none", s)->describe(), constant_lr(0.5)->describe());
  EXPECT_EQ(make_named_schedule("step", s)->describe(), step_lr(0.5, 2, 0.1)->describe());
  EXPECT_EQ(make_named_schedule("cosine", s)->describe(), cosine_lr(0.5, 10)->describe());
  EXPECT_DOUBLE_EQ(make_named_schedule("step", s)->lr_at(3), step_lr(0.5, 2, 0.1)->lr_at(3));
  EXPECT_EQ(error_message([&] { make_named_schedule("linear", s); }),
            "unknown schedule 'linear'; valid names: none, step, cosine");
}

}  // namespace
}  // namespace minitrain
