// make_optimizer: each name builds the right optimizer with the right defaults; unknown names and
// settings that belong to another optimizer are ValueErrors.

#include "optim/make_optimizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/option_error.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;
using testing::error_message;

TEST(MakeOptimizer, BuildsEachKindWithTorchDefaults) {
  ParamSet ps(DType::Float32);
  OptimizerConfig c;
  c.name = "sgd";
  c.lr = 0.2;
  c.momentum = 0.9;
  c.nesterov = true;
  auto sgd = make_optimizer(c, ps.named());
  ASSERT_EQ(sgd->name(), "sgd");
  const auto& so = dynamic_cast<SGD&>(*sgd).options();
  EXPECT_EQ(so.momentum, 0.9);
  EXPECT_TRUE(so.nesterov);
  EXPECT_EQ(so.weight_decay, 0.0);
  EXPECT_EQ(sgd->lr(), 0.2);

  c = OptimizerConfig{};
  c.name = "adamw";
  auto adamw = make_optimizer(c, ps.named());
  ASSERT_EQ(adamw->name(), "adamw");
  EXPECT_EQ(dynamic_cast<Adam&>(*adamw).options().weight_decay, 0.01);  // torch AdamW default
  c.name = "adam";
  auto adam = make_optimizer(c, ps.named());
  EXPECT_EQ(dynamic_cast<Adam&>(*adam).options().weight_decay, 0.0);
  c.weight_decay = 0.0;
  c.name = "adamw";
  EXPECT_EQ(dynamic_cast<Adam&>(*make_optimizer(c, ps.named())).options().weight_decay, 0.0);
  c.beta1 = 0.5, c.amsgrad = true;
  auto built = make_optimizer(c, ps.named());
  EXPECT_EQ(dynamic_cast<Adam&>(*built).options().beta1, 0.5);
  EXPECT_TRUE(dynamic_cast<Adam&>(*built).options().amsgrad);
}

TEST(MakeOptimizer, BuildsRMSpropWithTorchDefaultsAndItsSettings) {
  ParamSet ps(DType::Float32);
  OptimizerConfig c;
  c.name = "rmsprop";
  c.lr = 0.01;
  auto plain = make_optimizer(c, ps.named());
  ASSERT_EQ(plain->name(), "rmsprop");
  const OptimizerOptions& d = dynamic_cast<RMSprop&>(*plain).options();
  EXPECT_EQ(d.alpha, 0.99);  // torch.optim.RMSprop's defaults
  EXPECT_EQ(d.eps, 1e-8);
  EXPECT_EQ(d.weight_decay, 0.0);
  EXPECT_EQ(d.momentum, 0.0);
  EXPECT_FALSE(d.centered);
  c.momentum = 0.9, c.alpha = 0.9, c.eps = 1e-6, c.centered = true, c.weight_decay = 0.1;
  auto built = make_optimizer(c, ps.named());
  const OptimizerOptions& o = dynamic_cast<RMSprop&>(*built).options();
  EXPECT_EQ(o.momentum, 0.9);
  EXPECT_EQ(o.alpha, 0.9);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_TRUE(o.centered);
  EXPECT_EQ(o.weight_decay, 0.1);
  c.alpha = -0.5;
  EXPECT_NE(error_message([&] {
              make_optimizer(c, ps.named());
            }).find("rmsprop: alpha must be finite and >= 0, got -0.5"),
            std::string::npos);
}

// Note [settings as columns]: which optimizer takes a setting is its row's column, and the
// message is made from the column.
TEST(MakeOptimizer, SettingsApplyByTheTablesColumn) {
  EXPECT_EQ(optimizers_taking(OptimizerSetting::Momentum), "sgd, rmsprop");
  EXPECT_EQ(optimizers_taking(OptimizerSetting::Eps), "adam, adamw, rmsprop");
  EXPECT_EQ(optimizers_taking(OptimizerSetting::Nesterov), "sgd");
  EXPECT_EQ(optimizers_taking(OptimizerSetting::Centered), "rmsprop");
  OptimizerConfig c;
  EXPECT_TRUE(given_settings(c).empty());
  c.momentum = 0.9, c.centered = true;
  EXPECT_EQ(given_settings(c), (std::vector<OptimizerSetting>{OptimizerSetting::Momentum,
                                                              OptimizerSetting::Centered}));
  EXPECT_NO_THROW(check_settings_apply("rmsprop", given_settings(c)));
  EXPECT_EQ(error_message([&] { check_settings_apply("sgd", given_settings(c)); }),
            "--centered applies to --optimizer rmsprop, not to sgd");
  EXPECT_EQ(error_message([&] { check_settings_apply("adam", given_settings(c)); }),
            "--momentum applies to --optimizer sgd, rmsprop, not to adam");
  c = OptimizerConfig{};
  c.amsgrad = true;
  c.name = "rmsprop";
  ParamSet ps(DType::Float32);
  EXPECT_THROW(make_optimizer(c, ps.named()), ValueError);
}

TEST(MakeOptimizer, UnknownNameListsTheValidOnes) {
  ParamSet ps(DType::Float32);
  OptimizerConfig c;
  c.name = "lion";
  const std::string msg = error_message([&] { make_optimizer(c, ps.named()); });
  EXPECT_NE(msg.find("'lion'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sgd, adam, adamw, rmsprop"), std::string::npos) << msg;
  EXPECT_THROW(make_optimizer(c, ps.named()), ValueError);
}

TEST(MakeOptimizer, ImpossibleOrMisplacedSettingsAreValueErrors) {
  ParamSet ps(DType::Float32);
  OptimizerConfig c;
  c.name = "adam";
  c.momentum = 0.9;
  EXPECT_NE(error_message([&] { make_optimizer(c, ps.named()); }).find("momentum"),
            std::string::npos);
  c = OptimizerConfig{};
  c.name = "sgd";
  c.amsgrad = true;
  EXPECT_NE(error_message([&] { make_optimizer(c, ps.named()); }).find("amsgrad"),
            std::string::npos);
  c = OptimizerConfig{};
  c.beta2 = 1.0;
  EXPECT_NE(
      error_message([&] { make_optimizer(c, ps.named()); }).find("beta2 must be in [0, 1), got 1"),
      std::string::npos);
  c = OptimizerConfig{};
  c.name = "sgd";
  c.lr = -0.1;
  EXPECT_NE(error_message([&] { make_optimizer(c, ps.named()); }).find("got -0.1"),
            std::string::npos);
  // A negative weight decay is refused by every optimizer; it once meant "the default" here and
  // was dropped without a word. The error names the option, for the command line to name its
  // flag (train/settings.h).
  for (const char* name : {"sgd", "adam", "adamw", "rmsprop"}) {
    c = OptimizerConfig{};
    c.name = name;
    c.weight_decay = -0.5;
    try {
      make_optimizer(c, ps.named());
      ADD_FAILURE() << name << ": no error";
    } catch (const OptionError& e) {
      EXPECT_EQ(e.option(), "weight_decay") << name;
      EXPECT_EQ(e.detail(), "must be finite and >= 0, got -0.5") << name;
    }
  }
}

}  // namespace
}  // namespace minitrain
