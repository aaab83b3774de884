// The settings table (train/settings.h): each setting declared once, the library's options made
// from its columns, and the library's constructor as the one check of a value, reported under
// the flag that set it.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/option_error.h"
#include "nn/loss.h"
#include "optim/make_optimizer.h"
#include "tests/support/test_util.h"
#include "train/config.h"
#include "train/settings.h"

namespace minitrain {
namespace {

using testing::error_message;

std::string validate_message(const std::vector<std::pair<std::string, std::string>>& flags) {
  TrainConfig c;
  for (const auto& [key, text] : flags) set_config_value(c, key, text);
  return error_message([&] { validate(c); });
}

// Issue 33: an optimizer flag's row points into the optimizer's own options struct, which
// TrainConfig derives from (Note [one options struct] in optim/optimizer.h): one declaration, one
// default, no second holder, and the optimizer is built from that struct whole.
TEST(Settings, AnOptimizerFlagSetsTheOptimizersOwnOptions) {
  TrainConfig c;
  const OptimizerOptions& own = c;  // the base: the very struct the optimizer takes
  set_config_value(c, "lr", "0.25");
  set_config_value(c, "momentum", "0.5");
  set_config_value(c, "optimizer", "rmsprop");
  EXPECT_EQ(own.lr, 0.25);
  EXPECT_EQ(own.momentum, 0.5);
  const std::unique_ptr<Optimizer> opt = make_optimizer(optimizer_config(c), {});
  EXPECT_EQ(opt->base_lr(), 0.25);
  EXPECT_EQ(opt->lr(), 0.25);
  EXPECT_EQ(dynamic_cast<const RMSprop&>(*opt).options().momentum, 0.5);
  // One default: --lr's is the library's (make_optimizer's), 3e-3 as it always was.
  EXPECT_EQ(TrainConfig{}.lr, OptimizerOptions{}.lr);
  EXPECT_EQ(TrainConfig{}.lr, 3e-3);
  EXPECT_EQ(OptimizerConfig{}.lr, 3e-3);
}

TEST(Settings, OptimizerAndLossOptionsAreMadeFromTheTablesColumns) {
  TrainConfig c;
  set_config_value(c, "optimizer", "rmsprop");
  set_config_value(c, "lr", "0.25");
  set_config_value(c, "momentum", "0.5");
  set_config_value(c, "weight-decay", "0.125");
  set_config_value(c, "eps", "1e-6");
  set_config_value(c, "alpha", "0.75");
  set_config_value(c, "centered", "true");
  const OptimizerConfig o = optimizer_config(c);
  EXPECT_EQ(o.name, "rmsprop");
  EXPECT_EQ(o.lr, 0.25);
  EXPECT_EQ(o.momentum, 0.5);
  EXPECT_EQ(o.weight_decay, 0.125);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_EQ(o.alpha, 0.75);
  EXPECT_TRUE(o.centered);
  EXPECT_FALSE(optimizer_config(TrainConfig{}).weight_decay);  // not given: the optimizer's

  set_config_value(c, "betas", "0.5,0.25");
  EXPECT_EQ(optimizer_config(c).beta1, 0.5);
  EXPECT_EQ(optimizer_config(c).beta2, 0.25);

  TrainConfig l;
  set_config_value(l, "loss", "huber");
  set_config_value(l, "huber-delta", "2.5");
  set_config_value(l, "smooth-l1-beta", "0.5");
  set_config_value(l, "kl-log-target", "true");
  set_config_value(l, "label-smoothing", "0.1");
  set_config_value(l, "ignore-index", "3");
  const LossOptions lo = loss_options(l);
  EXPECT_EQ(lo.name, "huber");
  EXPECT_EQ(lo.delta, 2.5);
  EXPECT_EQ(lo.beta, 0.5);
  EXPECT_TRUE(lo.log_target);
  EXPECT_EQ(lo.label_smoothing, 0.1);
  EXPECT_EQ(lo.ignore_index, 3);
  EXPECT_TRUE(lo.class_weights.empty());
  set_config_value(l, "pos-weight", "w.npy");  // a file: one placeholder until the run reads it
  EXPECT_EQ(loss_options(l).pos_weight, std::vector<double>{1.0});
}

// Before the table, validate() had its own copy of these checks with its own wording, and
// --huber-delta 0 read "--huber-delta must be > 0, got 0". Now the constructor's check is the
// one, named by the flag.
TEST(Settings, TheConstructorIsTheOneCheckAndTheMessageNamesTheFlag) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> flags;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{{"loss", "huber"}, {"huber-delta", "0"}}, "--huber-delta must be finite and > 0 but is 0"},
      {{{"loss", "huber"}, {"huber-delta", "inf"}},
       "--huber-delta must be finite and > 0 but is inf"},
      {{{"loss", "smooth_l1"}, {"smooth-l1-beta", "-1"}},
       "--smooth-l1-beta must be finite and >= 0 but is -1"},
      {{{"loss", "cross_entropy"}, {"label-smoothing", "1.5"}},
       "--label-smoothing must be in [0, 1] but is 1.5"},
      {{{"lr", "inf"}}, "--lr must be finite and >= 0, got inf"},
      {{{"eps", "-1"}}, "--eps must be finite and >= 0, got -1"},
      {{{"weight-decay", "-0.5"}}, "--weight-decay must be finite and >= 0, got -0.5"},
      {{{"betas", "1,0.999"}}, "--betas (beta1) must be in [0, 1), got 1"},
      {{{"optimizer", "sgd"}, {"momentum", "-2"}}, "--momentum must be finite and >= 0, got -2"},
      {{{"optimizer", "sgd"}, {"nesterov", "true"}},
       "--nesterov requires momentum > 0 and dampening = 0"},
  };
  for (const Case& k : cases) {
    const std::string msg = validate_message(k.flags);
    EXPECT_NE(msg.find(k.message), std::string::npos) << k.message << ": got '" << msg << "'";
    EXPECT_EQ(msg.rfind("--", 0), 0u) << msg;  // the flag first, not the library's "adam: "
  }
}

TEST(Settings, BoundsAreAColumnOfTheRow) {
  EXPECT_NE(validate_message({{"topk", "0"}}).find("--topk must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(validate_message({{"threads", "5000"}}).find("--threads must be <= 4096, got 5000"),
            std::string::npos);
  EXPECT_NE(validate_message({{"log-every", "0"}}).find("--log-every must be >= 1, got 0"),
            std::string::npos);
}

// An OptionError about an option no row fills passes through as it was.
TEST(Settings, AnOptionNoRowNamesKeepsTheLibrarysMessage) {
  const std::string msg = error_message([] {
    config_detail::with_setting_flags([] { throw OptionError("sgd", "dampening", "must be 2"); });
  });
  EXPECT_EQ(msg, "sgd: dampening must be 2");
}

// Each flag is spelt once: the library's settings columns name it, and the table's rows take
// that name.
TEST(Settings, EveryLibrarySettingIsARowUnderTheLibrarysFlag) {
  for (LossSetting s :
       {LossSetting::ClassWeights, LossSetting::LabelSmoothing, LossSetting::IgnoreIndex,
        LossSetting::PosWeight, LossSetting::Beta, LossSetting::Delta, LossSetting::LogTarget}) {
    const config_detail::KeyEntry* row = config_detail::find_key(loss_setting_flag(s));
    ASSERT_NE(row, nullptr) << loss_setting_flag(s);
    EXPECT_TRUE(row->to_loss) << loss_setting_flag(s);
  }
  for (OptimizerSetting s :
       {OptimizerSetting::Momentum, OptimizerSetting::Nesterov, OptimizerSetting::Betas,
        OptimizerSetting::Eps, OptimizerSetting::Amsgrad, OptimizerSetting::Alpha,
        OptimizerSetting::Centered}) {
    const config_detail::KeyEntry* row = config_detail::find_key(optimizer_setting_flag(s));
    ASSERT_NE(row, nullptr) << optimizer_setting_flag(s);
    EXPECT_TRUE(row->to_optimizer) << optimizer_setting_flag(s);
  }
}

}  // namespace
}  // namespace minitrain
