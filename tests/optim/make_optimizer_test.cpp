// make_optimizer: each name builds the right optimizer with the right defaults; unknown names and
// settings that belong to another optimizer are ValueErrors.

#include "optim/make_optimizer.h"

#include <gtest/gtest.h>

#include <string>

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

TEST(MakeOptimizer, UnknownNameListsTheValidOnes) {
  ParamSet ps(DType::Float32);
  OptimizerConfig c;
  c.name = "rmsprop";
  const std::string msg = error_message([&] { make_optimizer(c, ps.named()); });
  EXPECT_NE(msg.find("'rmsprop'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sgd, adam, adamw"), std::string::npos) << msg;
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
}

}  // namespace
}  // namespace minitrain
