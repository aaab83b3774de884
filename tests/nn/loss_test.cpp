// The losses behind nn/loss.h: make_loss's table and its checks of the settings, values worked
// by hand for each loss (independent of torch, which these tests cannot run; see
// tests/fixtures/torch_reference/make_loss_reference.py), forward_backward against forward then
// backward, and the errors a user meets.

#include "nn/loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/cross_entropy_loss.h"
#include "nn/mse_loss.h"
#include "nn/pointwise_loss.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::ElementsAre;
using testing::error_message;
using ::testing::HasSubstr;
using testing::host_values;

LossOptions named(const char* name, Reduction r = Reduction::Mean) {
  LossOptions o;
  o.name = name;
  o.reduction = r;
  return o;
}

TEST(LossTable, NamesKindsAndClasses) {
  EXPECT_THAT(loss_names(), ElementsAre("mse", "l1", "smooth_l1", "huber", "bce_with_logits",
                                        "kl_div", "poisson_nll", "cross_entropy"));
  for (const std::string& n : loss_names()) {
    auto loss = make_loss(named(n.c_str()));
    EXPECT_EQ(loss->name(), n);
    EXPECT_EQ(loss->target_kind(), loss_target_kind(n)) << n;
  }
  EXPECT_EQ(loss_target_kind("cross_entropy"), TargetKind::ClassIndices);
  EXPECT_EQ(loss_target_kind("bce_with_logits"), TargetKind::Values);
  EXPECT_NE(dynamic_cast<HuberLoss*>(make_loss(named("huber")).get()), nullptr);
  EXPECT_NE(dynamic_cast<PoissonNLLLoss*>(make_loss(named("poisson_nll")).get()), nullptr);
  EXPECT_NE(dynamic_cast<CrossEntropyLoss*>(make_loss(named("cross_entropy")).get()), nullptr);
  // MSE is a Loss like the others, not an adapter around one
  EXPECT_NE(dynamic_cast<MSELoss*>(make_loss(named("mse")).get()), nullptr);
  EXPECT_THAT(error_message([] { make_loss(named("hinge")); }),
              HasSubstr("unknown loss 'hinge'; valid names: mse, l1, smooth_l1"));
}

// Note [settings as columns], for losses: loss_table() is the one list of names, and its settings
// column decides which loss takes which setting (the command line's messages come from it).
TEST(LossTable, OneTableWithASettingsColumn) {
  std::vector<std::string> names;
  for (const LossInfo& l : loss_table()) {
    names.emplace_back(l.name);
    EXPECT_EQ(l.kind, loss_target_kind(l.name)) << l.name;
    for (LossSetting s : l.settings)
      EXPECT_THAT(losses_taking(s), HasSubstr(l.name)) << loss_setting_flag(s);
  }
  EXPECT_EQ(names, loss_names());
  EXPECT_EQ(losses_taking(LossSetting::LogTarget), "kl_div");
  EXPECT_EQ(losses_taking(LossSetting::LogInput), "poisson_nll");
  EXPECT_STREQ(loss_setting_option(LossSetting::LogTarget), "log_target");
  EXPECT_EQ(losses_taking(LossSetting::LabelSmoothing), "cross_entropy");
  EXPECT_STREQ(loss_setting_flag(LossSetting::Delta), "huber-delta");

  LossOptions o;
  EXPECT_TRUE(given_loss_settings(o).empty());
  o.delta = 2;
  o.log_target = true;
  EXPECT_THAT(given_loss_settings(o), ElementsAre(LossSetting::Delta, LossSetting::LogTarget));
  check_loss_settings_apply("huber", {LossSetting::Delta});
  check_loss_settings_apply("hinge", {LossSetting::Delta});  // make_loss names unknown losses
  EXPECT_THAT(error_message([] { check_loss_settings_apply("mse", {LossSetting::Delta}); }),
              HasSubstr("--huber-delta applies to --loss huber, not to --loss mse"));
  EXPECT_THAT(error_message([] { check_loss_settings_apply("l1", {LossSetting::IgnoreIndex}); }),
              HasSubstr("--ignore-index applies to --loss cross_entropy, not to --loss l1"));
}

TEST(LossTable, SettingsOutOfRangeAreValueErrorsNamingThem) {
  LossOptions o = named("smooth_l1");
  o.beta = -1;
  EXPECT_THROW(make_loss(o), ValueError);
  EXPECT_THAT(error_message([&] { make_loss(o); }),
              HasSubstr("smooth_l1: beta must be finite and >= 0 but is -1"));
  o.beta = NAN;
  EXPECT_THROW(make_loss(o), ValueError);
  o.beta = 0;  // allowed: exactly l1
  EXPECT_NO_THROW(make_loss(o));

  o = named("huber");
  for (double bad : {0.0, -2.0, double(NAN)}) {
    o.delta = bad;
    EXPECT_THROW(make_loss(o), ValueError) << bad;
  }
  o.delta = 0;
  EXPECT_THAT(error_message([&] { make_loss(o); }),
              HasSubstr("huber: delta must be finite and > 0 but is 0"));

  o = named("cross_entropy");
  for (double bad : {-0.1, 1.5, double(NAN)}) {
    o.label_smoothing = bad;
    EXPECT_THROW(make_loss(o), ValueError) << bad;
  }
  o.label_smoothing = 1.5;
  EXPECT_THAT(error_message([&] { make_loss(o); }),
              HasSubstr("cross_entropy: label_smoothing must be in [0, 1] but is 1.5"));
  o.label_smoothing = 1.0;
  EXPECT_NO_THROW(make_loss(o));
  o.class_weights = {1, -2, 1};
  EXPECT_THAT(error_message([&] { make_loss(o); }),
              HasSubstr("class_weights[1] must be finite and >= 0 but is -2"));
  o.class_weights = {1, NAN};
  EXPECT_THROW(make_loss(o), ValueError);

  o = named("bce_with_logits");
  o.pos_weight = {1, -0.5};
  EXPECT_THAT(error_message([&] { make_loss(o); }),
              HasSubstr("bce_with_logits: pos_weight[1] must be finite and >= 0 but is -0.5"));
}

class LossOnDevice : public testing::DeviceTest {
 protected:
  Tensor f32(const std::vector<float>& v, const Shape& s) const {
    return Tensor::from_vector(v, s, device());
  }
  Tensor f64(const std::vector<double>& v, const Shape& s) const {
    return Tensor::from_vector(v, s, device());
  }
};

// pred [1, 2, 3, 4.5], target [0, 2, 5, 4]: d = p - t = [1, 0, -2, 0.5], every value below exact
// in float.
TEST_P(LossOnDevice, ElementwiseLossesWorkedByHand) {
  const Tensor pred = f32({1, 2, 3, 4.5f}, {2, 2}), target = f32({0, 2, 5, 4}, {2, 2});
  // l1: |d| = [1, 0, 2, 0.5], mean 3.5 / 4; gradient sign(d) / 4, sign(0) = 0
  auto l1 = make_loss(named("l1"));
  EXPECT_EQ(l1->forward(pred, target).item(), 0.875);
  EXPECT_EQ(host_values(l1->backward()), (std::vector<double>{0.25, 0, -0.25, 0.25}));
  // smooth_l1, beta 1: |d| < 1 -> d^2 / 2 (0, 0.125), else |d| - 1/2 (0.5, 1.5); sum 2.125;
  // gradient d / beta inside, sign(d) outside: [1, 0, -1, 0.5]
  auto smooth = make_loss(named("smooth_l1", Reduction::Sum));
  EXPECT_EQ(smooth->forward(pred, target).item(), 2.125);
  EXPECT_EQ(host_values(smooth->backward()), (std::vector<double>{1, 0, -1, 0.5}));
  // huber, delta 1.5: |d| < 1.5 -> d^2 / 2 (0.5, 0, 0.125), else 1.5 (2 - 0.75) = 1.875; none;
  // gradient d inside, delta sign(d) outside: [1, 0, -1.5, 0.5]
  LossOptions h = named("huber", Reduction::None);
  h.delta = 1.5;
  auto huber = make_loss(h);
  EXPECT_EQ(host_values(huber->forward(pred, target)), (std::vector<double>{0.5, 0, 1.875, 0.125}));
  EXPECT_EQ(host_values(huber->backward()), (std::vector<double>{1, 0, -1.5, 0.5}));
  // smooth_l1 with beta 0 is l1, gradient 0 at d == 0 included
  LossOptions b0 = named("smooth_l1");
  b0.beta = 0;
  auto smooth0 = make_loss(b0);
  EXPECT_EQ(smooth0->forward(pred, target).item(), 0.875);
  EXPECT_EQ(host_values(smooth0->backward()), (std::vector<double>{0.25, 0, -0.25, 0.25}));
}

// x = [[0, ln 3], [0, ln 3]], t = [[1, 0], [0, 1]], pos_weight [2, 5] (one per column):
// loss = (1 - t) x - (1 + (pw - 1) t) log sigmoid(x), with sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4
//   (0,0) t=1, pw 2: -2 log(1/2) = 2 ln 2      gradient (1 - t) - lw sigmoid(-x) = -2 * 1/2 = -1
//   (0,1) t=0:        ln 3 - ln(3/4) = ln 4     gradient 1 - 1/4 = 3/4
//   (1,0) t=0:        0 - ln(1/2) = ln 2        gradient 1 - 1/2 = 1/2
//   (1,1) t=1, pw 5: -5 ln(3/4) = 5 ln(4/3)    gradient -5 * 1/4 = -5/4
// sum = 5 ln 2 + 5 ln(4/3) = 5 ln(8/3)
TEST_P(LossOnDevice, BceWithLogitsWorkedByHand) {
  LossOptions o = named("bce_with_logits", Reduction::Sum);
  o.pos_weight = {2, 5};
  auto bce = make_loss(o);
  const Tensor x = f64({0, std::log(3.0), 0, std::log(3.0)}, {2, 2});
  const Tensor t = f64({1, 0, 0, 1}, {2, 2});
  EXPECT_NEAR(bce->forward(x, t).item(), 5 * std::log(8.0 / 3.0), 1e-14);
  EXPECT_ALLCLOSE(host_values(bce->backward()), (std::vector<double>{-1, 0.75, 0.5, -1.25}), 1e-15,
                  1e-15);
  // a pos_weight of the wrong length names both
  o.pos_weight = {2, 5, 1};
  auto wrong = make_loss(o);
  EXPECT_THROW(wrong->forward(x, t), ShapeError);
  EXPECT_THAT(error_message([&] { wrong->forward(x, t); }),
              HasSubstr("pos_weight has 3 entries but pred [2, 2] has 2 columns"));
}

// logits row 0 = [0, ln 2, ln 5] (exp: 1, 2, 5; softmax 1/8, 2/8, 5/8), row 1 = [0, 0, 0]
// (softmax 1/3 each); classes [2, 0].
//   none: [-log(5/8), -log(1/3)] = [ln 1.6, ln 3]; mean ln(4.8) / 2
//   mean gradient (softmax - one-hot) / 2: [1/16, 2/16, -3/16], [-1/3, 1/6, 1/6]
//   weights [1, 2, 3], mean: (3 ln 1.6 + 1 ln 3) / (3 + 1)
//   label smoothing 0.3, sum: 0.7 (ln 1.6 + ln 3) + 0.1 (sum_c -log p_c over both rows)
//     row 0: ln 8 + ln 4 + ln 1.6 = ln 51.2; row 1: 3 ln 3 = ln 27
//   ignore_index 0 (row 1 ignored), mean: ln 1.6 / 1; row 1's gradient is 0
TEST_P(LossOnDevice, CrossEntropyWorkedByHand) {
  const Tensor logits = f64({0, std::log(2.0), std::log(5.0), 0, 0, 0}, {2, 3});
  const Tensor classes = f64({2, 0}, {2});
  auto ce = make_loss(named("cross_entropy"));
  EXPECT_EQ(ce->target_kind(), TargetKind::ClassIndices);
  EXPECT_NEAR(ce->forward(logits, classes).item(), std::log(4.8) / 2, 1e-15);
  EXPECT_ALLCLOSE(host_values(ce->backward()),
                  (std::vector<double>{1.0 / 16, 2.0 / 16, -3.0 / 16, -1.0 / 3, 1.0 / 6, 1.0 / 6}),
                  1e-15, 1e-15);
  auto none = make_loss(named("cross_entropy", Reduction::None));
  EXPECT_ALLCLOSE(host_values(none->forward(logits, classes)),
                  (std::vector<double>{std::log(1.6), std::log(3.0)}), 1e-15, 1e-15);

  LossOptions w = named("cross_entropy");
  w.class_weights = {1, 2, 3};
  EXPECT_NEAR(make_loss(w)->forward(logits, classes).item(),
              (3 * std::log(1.6) + std::log(3.0)) / 4, 1e-15);

  LossOptions s = named("cross_entropy", Reduction::Sum);
  s.label_smoothing = 0.3;
  EXPECT_NEAR(make_loss(s)->forward(logits, classes).item(),
              0.7 * (std::log(1.6) + std::log(3.0)) + 0.1 * (std::log(51.2) + std::log(27.0)),
              1e-14);

  LossOptions ig = named("cross_entropy");
  ig.ignore_index = 0;
  auto ignoring = make_loss(ig);
  EXPECT_NEAR(ignoring->forward(logits, classes).item(), std::log(1.6), 1e-15);
  const std::vector<double> g = host_values(ignoring->backward());
  EXPECT_EQ(std::vector<double>(g.begin() + 3, g.end()), (std::vector<double>{0, 0, 0}));
}

TEST_P(LossOnDevice, ForwardBackwardEqualsForwardThenBackward) {
  const Tensor pred = testing::random_tensor({6, 4}, 5, device(), DType::Float32, -2, 2);
  const Tensor target = testing::random_tensor({6, 4}, 6, device(), DType::Float32, 0, 1);
  const Tensor classes =
      Tensor::from_vector(std::vector<float>{0, 3, -100, 1, 2, 3}, {6, 1}, device());
  for (const std::string& n : loss_names())
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      LossOptions o = named(n.c_str(), r);
      o.class_weights = {1, 0.5, 2, 1};
      o.label_smoothing = 0.1;
      o.pos_weight = {1, 2, 3, 0.5};
      auto a = make_loss(o), b = make_loss(o);
      const Tensor& t = a->target_kind() == TargetKind::ClassIndices ? classes : target;
      Tensor grad;
      const Tensor fused = a->forward_backward(pred, t, grad);
      EXPECT_EQ(host_values(fused), host_values(b->forward(pred, t))) << n;
      EXPECT_EQ(host_values(grad), host_values(b->backward())) << n << " " << reduction_name(r);
      EXPECT_EQ(host_values(a->backward()), host_values(grad)) << n;  // backward after fused
    }
}

// kl_div by hand: pred x = log q, target p. Row 0: p = (0.5, 0.5), x = (log 0.25, log 0.75):
// 0.5 (log 0.5 - log 0.25) + 0.5 (log 0.5 - log 0.75) = 0.5 log 2 + 0.5 log(2/3); row 1:
// p = (1, 0), x = (log 0.5, log 0.5): 1 (0 - log 0.5) + 0 (xlogy(0, 0) = 0) = log 2. batchmean
// divides by the 2 rows, mean by the 4 elements; the gradient is -p / 2 resp. -p / 4.
TEST_P(LossOnDevice, KlDivByHandForEachReductionAndLogTarget) {
  const Tensor pred =
      testing::tensor_of({std::log(0.25), std::log(0.75), std::log(0.5), std::log(0.5)}, {2, 2},
                         device(), DType::Float64);
  const Tensor target = testing::tensor_of({0.5, 0.5, 1.0, 0.0}, {2, 2}, device(), DType::Float64);
  const double kl0 = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), kl1 = std::log(2.0);
  auto batchmean = make_loss(named("kl_div", Reduction::BatchMean));
  EXPECT_NE(dynamic_cast<KLDivLoss*>(batchmean.get()), nullptr);
  EXPECT_NEAR(batchmean->forward(pred, target).item(), (kl0 + kl1) / 2, 1e-14);
  EXPECT_EQ(host_values(batchmean->backward()), (std::vector<double>{-0.25, -0.25, -0.5, -0.0}));
  auto mean = make_loss(named("kl_div"));
  EXPECT_NEAR(mean->forward(pred, target).item(), (kl0 + kl1) / 4, 1e-14);
  EXPECT_EQ(host_values(mean->backward()), (std::vector<double>{-0.125, -0.125, -0.25, -0.0}));
  auto none = make_loss(named("kl_div", Reduction::None));
  const std::vector<double> each = host_values(none->forward(pred, target));
  EXPECT_EQ(each[3], 0.0);  // target 0: nothing, whatever pred is
  // log_target: the same numbers with the target given as log p (log 0 = -inf: exp(-inf) = 0
  // would give 0 * (-inf - x) = NaN, as in torch, so row 1 is (0.9, 0.1) there)
  LossOptions lt = named("kl_div", Reduction::Sum);
  lt.log_target = true;
  auto logt = make_loss(lt);
  const Tensor log_p =
      testing::tensor_of({std::log(0.5), std::log(0.5), std::log(0.9), std::log(0.1)}, {2, 2},
                         device(), DType::Float64);
  const double want =
      kl0 + 0.9 * (std::log(0.9) - std::log(0.5)) + 0.1 * (std::log(0.1) - std::log(0.5));
  EXPECT_NEAR(logt->forward(pred, log_p).item(), want, 1e-14);
  const std::vector<double> g = host_values(logt->backward());
  EXPECT_NEAR(g[2], -0.9, 1e-14);
  EXPECT_NEAR(g[3], -0.1, 1e-14);
  // batchmean is a Reduction of its own: mse and l1 take it (the sum over the 2 rows);
  // cross_entropy, whose mean is per row already, refuses it, naming it
  for (const char* other : {"mse", "l1"}) {
    auto l = make_loss(named(other, Reduction::BatchMean));
    auto s = make_loss(named(other, Reduction::Sum));
    EXPECT_EQ(l->forward(pred, target).item(), s->forward(pred, target).item() / 2) << other;
  }
  auto ce = make_loss(named("cross_entropy", Reduction::BatchMean));
  const Tensor classes = testing::tensor_of({0, 1}, {2}, device(), DType::Float64);
  EXPECT_THROW(ce->forward(pred, classes), ValueError);
  EXPECT_THAT(error_message([&] { ce->forward(pred, classes); }),
              HasSubstr("reduction 'batchmean' (the sum over the first extent) is for elementwise "
                        "losses"));
  EXPECT_EQ(parse_reduction("batchmean"), Reduction::BatchMean);
  EXPECT_STREQ(reduction_name(Reduction::BatchMean), "batchmean");
}

TEST_P(LossOnDevice, CrossEntropyErrorsNameTheirValues) {
  LossOptions o = named("cross_entropy");
  o.class_weights = {1, 1, 1};
  auto ce = make_loss(o);
  const Tensor logits = Tensor::zeros({2, 4}, DType::Float32, device());
  const Tensor classes = f32({0, 1}, {2});
  EXPECT_THROW(ce->forward(logits, classes), ShapeError);
  const std::string msg = error_message([&] { ce->forward(logits, classes); });
  EXPECT_THAT(msg, HasSubstr("class_weights [3]"));
  EXPECT_THAT(msg, HasSubstr("logits [2, 4]"));
  auto plain = make_loss(named("cross_entropy"));
  EXPECT_THAT(error_message([&] {
                plain->forward(logits, f32({0, 4}, {2}));
              }),
              HasSubstr("row 1 has target 4"));
  EXPECT_THROW(plain->forward(logits, f32({0, 1, 2}, {3})), ShapeError);
  EXPECT_THAT(error_message([&] { make_loss(named("l1"))->backward(); }),
              HasSubstr("l1: backward called before forward"));
  EXPECT_THAT(error_message([&] { make_loss(named("l1"))->forward(logits, classes); }),
              HasSubstr("l1: pred [2, 4] and target [2] differ in shape"));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(LossOnDevice);

}  // namespace
}  // namespace minitrain
