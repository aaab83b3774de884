// torch.optim.Adam and AdamW: every variant against the double reference of optim_test_util.h
// over several steps on parameters of 1, 7 and 1000 elements; per-parameter steps, validation.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;
using optim_test::RefAdam;
using testing::error_message;

// lr 0.05, betas (0.8, 0.9) and eps 1e-3: far from the defaults so that the bias corrections,
// the eps placement and the decay terms each move the result well beyond the tolerance.
AdamOptions test_options(double weight_decay, bool amsgrad, double eps = 1e-3) {
  AdamOptions o;
  o.lr = 0.05;
  o.beta1 = 0.8;
  o.beta2 = 0.9;
  o.eps = eps;
  o.weight_decay = weight_decay;
  o.amsgrad = amsgrad;
  return o;
}

void run_case(const AdamOptions& o, bool decoupled, DType dtype, int steps = 6) {
  SCOPED_TRACE(::testing::Message() << (decoupled ? "adamw" : "adam") << " wd=" << *o.weight_decay
                                    << " amsgrad=" << o.amsgrad << " dtype=" << dtype);
  ParamSet ps(dtype);
  Adam opt(ps.named(), o, decoupled);
  EXPECT_EQ(opt.name(), decoupled ? "adamw" : "adam");
  std::vector<RefAdam> refs(ps.size());
  for (auto& r : refs) {
    r.lr = o.lr, r.beta1 = o.beta1, r.beta2 = o.beta2, r.eps = o.eps;
    r.weight_decay = *o.weight_decay, r.amsgrad = o.amsgrad, r.decoupled = decoupled;
  }
  optim_test::expect_matches_reference(opt, ps, refs, steps, dtype);
}

TEST(AdamOptimizer, MatchesTorchFormula) {
  run_case(test_options(0, false), false, DType::Float32);
}

TEST(AdamOptimizer, L2WeightDecayMatchesTorchFormula) {
  run_case(test_options(0.1, false), false, DType::Float32);
}

TEST(AdamOptimizer, AmsgradMatchesTorchFormula) {
  run_case(test_options(0, true), false, DType::Float32);
  run_case(test_options(0.1, true), false, DType::Float32);
}

TEST(AdamOptimizer, AdamWDecoupledDecayMatchesTorchFormula) {
  run_case(test_options(0.1, false), true, DType::Float32);
}

TEST(AdamOptimizer, AdamWAmsgradMatchesTorchFormula) {
  run_case(test_options(0.1, true), true, DType::Float32);
}

TEST(AdamOptimizer, DefaultHyperparametersMatchReference) {
  // torch's defaults (lr 1e-3, betas (0.9, 0.999), eps 1e-8): in float64, where eps's place
  // after sqrt(v_hat) / sqrt(1 - beta2^t) is visible at 1e-12.
  run_case(AdamOptions{}, false, DType::Float64);
  run_case(adamw_defaults(), true, DType::Float64);
  run_case(AdamOptions{}, false, DType::Float32);
}

TEST(AdamOptimizer, Float64MatchesReferenceToRoundingForEveryVariant) {
  for (bool decoupled : {false, true})
    for (double wd : {0.0, 0.1})
      for (bool amsgrad : {false, true})
        run_case(test_options(wd, amsgrad, 1e-8), decoupled, DType::Float64);
}

TEST(AdamOptimizer, AmsgradDiffersFromAdamWhenTheSecondMomentShrinks) {
  // Guards the test itself: with these gradients max(v_max, v) > v at some step, so the amsgrad
  // cases above really exercise the maximum.
  ParamSet a(DType::Float32), b(DType::Float32);
  Adam plain(a.named(), test_options(0, false));
  Adam ams(b.named(), test_options(0, true));
  for (int s = 0; s < 4; ++s) {
    a.set_grads(s), b.set_grads(s);
    plain.step(), ams.step();
  }
  const auto va = a.values()[2], vb = b.values()[2];
  double max_diff = 0;
  for (std::size_t k = 0; k < va.size(); ++k)
    max_diff = std::max(max_diff, std::fabs(va[k] - vb[k]));
  EXPECT_GT(max_diff, 1e-4);
}

TEST(AdamOptimizer, SkippedParameterKeepsItsOwnStepCount) {
  // torch keeps state['step'] per parameter: one without a gradient at step 1 takes its first
  // step (t = 1, full bias correction) at step 2.
  ParamSet ps(DType::Float32);
  Tensor saved_grad = ps[0].grad;
  ps[0].grad = Tensor();
  const AdamOptions o = test_options(0, false);
  Adam opt(ps.named(), o);
  std::vector<RefAdam> refs(ps.size());
  for (auto& r : refs) r.lr = o.lr, r.beta1 = o.beta1, r.beta2 = o.beta2, r.eps = o.eps;
  optim_test::expect_matches_reference(opt, ps, refs, 3, DType::Float32, [&](int step) {
    if (step == 1) ps[0].grad = saved_grad;
  });
  EXPECT_EQ(refs[0].t, 2);
  EXPECT_EQ(opt.state_scalars().at("0.weight.step"), "2");
  EXPECT_EQ(opt.state_scalars().at("0.bias.step"), "3");
}

TEST(AdamOptimizer, LrChangeMidRunAppliesFromTheNextStep) {
  ParamSet ps(DType::Float32);
  const AdamOptions o = test_options(0.1, false);
  Adam opt(ps.named(), o, /*decoupled_weight_decay=*/true);
  std::vector<RefAdam> refs(ps.size());
  for (auto& r : refs)
    r.lr = o.lr, r.beta1 = o.beta1, r.beta2 = o.beta2, r.eps = o.eps, r.weight_decay = 0.1,
    r.decoupled = true;
  optim_test::expect_matches_reference(opt, ps, refs, 4, DType::Float32, [&](int step) {
    if (step != 2) return;
    opt.set_lr(0.01);  // also changes AdamW's decay factor 1 - lr * wd
    for (auto& r : refs) r.lr = 0.01;
  });
}

TEST(AdamOptimizer, InvalidHyperparametersAreValueErrorsNamingTheValue) {
  ParamSet ps(DType::Float32);
  auto message = [&](auto edit, bool decoupled = false) {
    return error_message([&] {
      AdamOptions o;
      edit(o);
      Adam opt(ps.named(), o, decoupled);
    });
  };
  EXPECT_NE(
      message([](AdamOptions& o) { o.lr = -1; }).find("adam: lr must be finite and >= 0, got -1"),
      std::string::npos);
  EXPECT_NE(message([](AdamOptions& o) { o.beta1 = 1.0; }).find("beta1 must be in [0, 1), got 1"),
            std::string::npos);
  EXPECT_NE(
      message([](AdamOptions& o) { o.beta2 = -0.1; }).find("beta2 must be in [0, 1), got -0.1"),
      std::string::npos);
  EXPECT_NE(message([](AdamOptions& o) { o.eps = -1e-8; }).find("eps"), std::string::npos);
  EXPECT_NE(
      message([](AdamOptions& o) { o.weight_decay = -0.01; }, true).find("adamw: weight_decay"),
      std::string::npos);
  EXPECT_NE(message([](AdamOptions& o) { o.beta2 = std::nan(""); }).find("beta2"),
            std::string::npos);
  EXPECT_NE(message([](AdamOptions& o) { o.eps = INFINITY; }).find("eps"), std::string::npos);
  EXPECT_EQ(message([](AdamOptions& o) { o.beta1 = 0.0, o.eps = 0.0; }), "(no exception)");
}

}  // namespace
}  // namespace minitrain
