// Optimizer state: names "<param>.<slot>", scalars, and a save / load round trip after which a
// fresh optimizer continues bit-identically to one that never stopped; bad state is rejected
// without changing anything.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/make_optimizer.h"
#include "optim/optimizer.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;
using testing::error_message;

using StateTensors = std::vector<std::pair<std::string, Tensor>>;
using Factory = std::function<std::unique_ptr<Optimizer>(const NamedParameters&)>;

void copy_values(ParamSet& dst, ParamSet& src) {
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].value.copy_(src[i].value);
}

// Runs `a` for 3 steps, saves its state, copies parameters and state into a fresh optimizer `b`
// (built with different hyperparameters, which the state overrides), then runs both 3 more steps
// on the same gradients: parameters and state must be equal bit for bit.
void expect_round_trip_continues_identically(const Factory& make, const Factory& make_other) {
  ParamSet pa(DType::Float32), pb(DType::Float32);
  std::unique_ptr<Optimizer> a = make(pa.named());
  for (int s = 0; s < 3; ++s) {
    pa.set_grads(s);
    a->step();
  }
  a->set_lr(a->lr() * 0.5);  // a changed lr is part of the state too
  const StateTensors saved = a->state_tensors();
  const std::map<std::string, std::string> scalars = a->state_scalars();
  ASSERT_FALSE(saved.empty());
  std::vector<std::vector<double>> saved_values;
  for (const auto& [name, t] : saved) saved_values.push_back(testing::host_values(t));
  for (const auto& [name, t] : saved) EXPECT_TRUE(t.device().is_cpu()) << name;

  std::unique_ptr<Optimizer> b = make_other(pb.named());
  copy_values(pb, pa);
  b->load_state(saved, scalars);
  EXPECT_EQ(b->steps(), 3);
  EXPECT_EQ(b->lr(), a->lr());
  EXPECT_EQ(b->state_scalars(), scalars);

  for (int s = 3; s < 6; ++s) {
    pa.set_grads(s), pb.set_grads(s);
    a->step(), b->step();
  }
  EXPECT_EQ(pa.values(), pb.values());  // exact
  const StateTensors sa = a->state_tensors(), sb = b->state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_EQ(testing::host_values(sa[i].second), testing::host_values(sb[i].second))
        << sa[i].first;
  }
  // The saved tensors were copies: stepping on changed the live state (the first slot of each
  // parameter, momentum_buffer or exp_avg, always moves) but not them.
  for (std::size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(testing::host_values(saved[i].second), saved_values[i]) << saved[i].first;
    if (i == 0) {
      EXPECT_NE(testing::host_values(sa[i].second), saved_values[i]) << saved[i].first;
    }
  }
}

TEST(OptimizerState, SgdRoundTripContinuesBitIdentically) {
  expect_round_trip_continues_identically(
      [](const NamedParameters& p) {
        SGDOptions o;
        o.lr = 0.1, o.momentum = 0.9, o.nesterov = true, o.weight_decay = 0.01;
        return std::make_unique<SGD>(p, o);
      },
      [](const NamedParameters& p) { return std::make_unique<SGD>(p, SGDOptions{}); });
}

TEST(OptimizerState, AdamRoundTripContinuesBitIdentically) {
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "decoupled=" << decoupled << " amsgrad=" << amsgrad);
      expect_round_trip_continues_identically(
          [&](const NamedParameters& p) {
            AdamOptions o;
            o.lr = 0.05, o.beta1 = 0.8, o.beta2 = 0.9, o.weight_decay = 0.1, o.amsgrad = amsgrad;
            return std::make_unique<Adam>(p, o, decoupled);
          },
          [&](const NamedParameters& p) {
            AdamOptions o;
            o.amsgrad = amsgrad;
            return std::make_unique<Adam>(p, o, decoupled);
          });
    }
  }
}

TEST(OptimizerState, RMSpropRoundTripContinuesBitIdentically) {
  for (bool centered : {false, true}) {
    for (double momentum : {0.0, 0.9}) {
      SCOPED_TRACE(::testing::Message() << "centered=" << centered << " momentum=" << momentum);
      expect_round_trip_continues_identically(
          [&](const NamedParameters& p) {
            RMSpropOptions o;
            o.lr = 0.02, o.alpha = 0.9, o.eps = 1e-6, o.weight_decay = 0.01;
            o.momentum = momentum, o.centered = centered;
            return std::make_unique<RMSprop>(p, o);
          },
          [&](const NamedParameters& p) {
            RMSpropOptions o;  // other hyperparameters: the state's scalars override them
            o.momentum = momentum, o.centered = centered;
            return std::make_unique<RMSprop>(p, o);
          });
    }
  }
}

TEST(OptimizerState, RMSpropNamesSlotsAndRejectsStateOfOtherSettings) {
  ParamSet ps(DType::Float32);
  RMSpropOptions o;
  o.centered = true, o.momentum = 0.5;
  RMSprop opt(ps.named(), o);
  ps.set_grads(0);
  opt.step();
  std::vector<std::string> names;
  for (const auto& [name, t] : opt.state_tensors()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "0.weight.square_avg", "0.weight.grad_avg", "0.weight.momentum_buffer",
                       "0.bias.square_avg", "0.bias.grad_avg", "0.bias.momentum_buffer",
                       "2.weight.square_avg", "2.weight.grad_avg", "2.weight.momentum_buffer"}));
  const auto s = opt.state_scalars();
  EXPECT_EQ(s.at("optimizer"), "rmsprop");
  EXPECT_EQ(s.at("alpha"), "0.98999999999999999");  // 0.99, exact round trip
  EXPECT_EQ(s.at("centered"), "true");
  EXPECT_EQ(s.at("momentum"), "0.5");

  const auto state = opt.state_tensors();
  const auto before = testing::host_values(state[0].second);
  auto off = s;
  off["centered"] = "false";
  EXPECT_NE(error_message([&] { opt.load_state(state, off); }).find("centered is off"),
            std::string::npos);
  off = s;
  off["momentum"] = "0";
  EXPECT_NE(error_message([&] { opt.load_state(state, off); }).find("'0.weight.momentum_buffer'"),
            std::string::npos);
  off = s;
  off["alpha"] = "-1";
  EXPECT_NE(error_message([&] { opt.load_state(state, off); }).find("alpha"), std::string::npos);
  auto no_square = state;
  no_square.erase(no_square.begin());  // 0.weight.square_avg
  EXPECT_NE(error_message([&] { opt.load_state(no_square, s); }).find("no square_avg"),
            std::string::npos);
  EXPECT_EQ(testing::host_values(opt.state_tensors()[0].second), before);  // nothing changed
  EXPECT_EQ(opt.steps(), 1);
}

TEST(OptimizerState, NamesSlotsAndScalars) {
  ParamSet ps(DType::Float32);
  AdamOptions o;
  o.amsgrad = true;
  Adam adam(ps.named(), o, /*decoupled_weight_decay=*/true);
  ps.set_grads(0);
  adam.step();
  std::vector<std::string> names;
  for (const auto& [name, t] : adam.state_tensors()) {
    EXPECT_EQ(t.shape(), ps[names.size() / 3].value.shape()) << name;  // 3 slots a parameter
    names.push_back(name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "0.weight.exp_avg", "0.weight.exp_avg_sq", "0.weight.max_exp_avg_sq",
                       "0.bias.exp_avg", "0.bias.exp_avg_sq", "0.bias.max_exp_avg_sq",
                       "2.weight.exp_avg", "2.weight.exp_avg_sq", "2.weight.max_exp_avg_sq"}));
  const auto s = adam.state_scalars();
  EXPECT_EQ(s.at("optimizer"), "adamw");
  EXPECT_EQ(s.at("steps"), "1");
  EXPECT_EQ(s.at("lr"), "0.001");
  EXPECT_EQ(s.at("beta2"), "0.999");
  EXPECT_EQ(s.at("amsgrad"), "true");
  EXPECT_EQ(s.at("weight_decay"), "0");     // AdamOptions{} given, not adamw_defaults()
  EXPECT_EQ(std::stod(s.at("eps")), 1e-8);  // exact round trip of the double

  SGDOptions so;
  so.momentum = 0.5;
  SGD sgd(ps.named(), so);
  EXPECT_EQ(sgd.state_scalars().at("optimizer"), "sgd");
  EXPECT_EQ(sgd.state_scalars().at("nesterov"), "false");
  EXPECT_EQ(sgd.state_scalars().at("momentum"), "0.5");
}

TEST(OptimizerState, BadStateIsRejectedWithoutChangingAnything) {
  ParamSet ps(DType::Float32);
  SGDOptions o;
  o.momentum = 0.9;
  SGD sgd(ps.named(), o);
  ps.set_grads(0);
  sgd.step();
  const StateTensors good = sgd.state_tensors();
  const auto scalars = sgd.state_scalars();
  const auto before = testing::host_values(sgd.state_tensors()[0].second);

  auto expect_rejected = [&](const StateTensors& t, const std::map<std::string, std::string>& s,
                             const std::string& needle) {
    const std::string msg = error_message([&] { sgd.load_state(t, s); });
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(sgd.steps(), 1);
    EXPECT_EQ(testing::host_values(sgd.state_tensors()[0].second), before);
  };
  // Another optimizer's state.
  auto adam_scalars = scalars;
  adam_scalars["optimizer"] = "adam";
  expect_rejected(good, adam_scalars, "saved by 'adam'");
  // A parameter this model lacks, an unknown slot.
  StateTensors t = good;
  t.push_back({"4.weight.momentum_buffer", good[0].second});
  expect_rejected(t, scalars, "'4.weight.momentum_buffer'");
  t = good;
  t.push_back({"0.weight.exp_avg", good[0].second});
  expect_rejected(t, scalars, "unknown optimizer state '0.weight.exp_avg'");
  // A wrong shape (first zero the state so a partial load would show).
  t = good;
  t[0].second = Tensor::zeros(Shape{1});
  t[2].second = Tensor::zeros(Shape{1000});
  EXPECT_THROW(sgd.load_state(t, scalars), ShapeError);
  expect_rejected(t, scalars, "'2.weight.momentum_buffer' has shape [1000]");
  // A wrong dtype, bad scalars.
  t = good;
  t[1].second = Tensor::zeros(Shape{7}, DType::Float64);
  EXPECT_THROW(sgd.load_state(t, scalars), DTypeError);
  auto bad = scalars;
  bad["steps"] = "three";
  expect_rejected(good, bad, "'steps' = 'three'");
  bad = scalars;
  bad.erase("steps");
  expect_rejected(good, bad, "no 'steps'");
  bad = scalars;
  bad["momentum"] = "-1";
  expect_rejected(good, bad, "momentum");

  // Adam: amsgrad state must match the option.
  AdamOptions ao;
  ao.amsgrad = true;
  Adam adam(ps.named(), ao);
  adam.step();
  auto adam_state = adam.state_tensors();
  auto adam_s = adam.state_scalars();
  adam_s["amsgrad"] = "false";
  EXPECT_NE(error_message([&] { adam.load_state(adam_state, adam_s); }).find("amsgrad is off"),
            std::string::npos);
  adam_state.pop_back();  // 2.weight.max_exp_avg_sq
  EXPECT_NE(error_message([&] {
              adam.load_state(adam_state, adam.state_scalars());
            }).find("'2.weight.max_exp_avg_sq'"),
            std::string::npos);
  EXPECT_EQ(adam.state_tensors().size(), 9u);
}

// A state tensor named twice (a hand-edited file) is refused by every optimizer, naming it, and
// nothing changes (the one reading of state tensors, optim/detail.h's read_state_slots).
TEST(OptimizerState, AStateTensorNamedTwiceIsRefusedByEveryOptimizer) {
  for (const OptimizerInfo& row : optimizer_table()) {
    SCOPED_TRACE(row.name);
    ParamSet ps(DType::Float32);
    OptimizerConfig c;
    c.name = row.name;
    if (row.name == std::string("sgd") || row.name == std::string("rmsprop"))
      c.momentum = 0.9;  // SGD keeps no state without it
    std::unique_ptr<Optimizer> opt = make_optimizer(c, ps.named());
    ps.set_grads(0);
    opt->step();
    StateTensors t = opt->state_tensors();
    ASSERT_FALSE(t.empty());
    const auto before = testing::host_values(t.back().second);
    t.push_back(t.back());
    const std::string msg = error_message([&] { opt->load_state(t, opt->state_scalars()); });
    EXPECT_NE(msg.find("optimizer state '" + t.back().first + "' appears twice"), std::string::npos)
        << msg;
    EXPECT_EQ(testing::host_values(opt->state_tensors().back().second), before);
    t.pop_back();
    opt->load_state(t, opt->state_scalars());  // once is fine
    EXPECT_EQ(opt->steps(), 1);
  }
}

TEST(OptimizerState, EmptyStateRestartsLazilyAndRestoresSteps) {
  ParamSet ps(DType::Float32);
  std::unique_ptr<Optimizer> opt = make_optimizer(OptimizerConfig{}, ps.named());
  ps.set_grads(0);
  opt->step();
  ASSERT_EQ(opt->state_tensors().size(), 6u);
  std::map<std::string, std::string> s = {{"optimizer", "adam"}, {"steps", "41"}};
  opt->load_state({}, s);
  EXPECT_EQ(opt->steps(), 41);
  EXPECT_TRUE(opt->state_tensors().empty());
  EXPECT_EQ(opt->lr(), OptimizerConfig{}.lr);  // a state without "lr" keeps the rate
  opt->step();                                 // state created again at t = 1
  EXPECT_EQ(opt->state_scalars().at("0.bias.step"), "1");
  EXPECT_EQ(opt->steps(), 42);
}

}  // namespace
}  // namespace minitrain
