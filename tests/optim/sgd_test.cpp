// torch.optim.SGD: every variant against the double reference of optim_test_util.h over several
// steps on parameters of 1, 7 and 1000 elements; skipping, zero_grad, lr changes, validation.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;
using optim_test::RefSGD;
using testing::error_message;

struct SgdCase {
  const char* name;
  SGDOptions options;
};

// lr 0.1 and large momentum / dampening / decay, so that a slip in any term moves the
// parameters far beyond the tolerance (Note [optimizer test tolerance]).
std::vector<SgdCase> sgd_cases() {
  auto o = [](double momentum, double dampening, double wd, bool nesterov) {
    SGDOptions s;
    s.lr = 0.1;
    s.momentum = momentum;
    s.dampening = dampening;
    s.weight_decay = wd;
    s.nesterov = nesterov;
    return s;
  };
  return {{"plain", o(0, 0, 0, false)},
          {"momentum", o(0.9, 0, 0, false)},
          {"dampening", o(0.9, 0.3, 0, false)},
          {"nesterov", o(0.9, 0, 0, true)},
          {"weight_decay", o(0, 0, 0.05, false)},
          {"momentum_weight_decay", o(0.8, 0.1, 0.05, false)},
          {"nesterov_weight_decay", o(0.7, 0, 0.05, true)}};
}

void run_case(const SgdCase& c, DType dtype) {
  SCOPED_TRACE(c.name);
  ParamSet ps(dtype);
  SGD opt(ps.named(), c.options);
  std::vector<RefSGD> refs(ps.size());
  for (auto& r : refs) {
    r.lr = c.options.lr;
    r.momentum = c.options.momentum;
    r.dampening = c.options.dampening;
    r.weight_decay = *c.options.weight_decay;
    r.nesterov = c.options.nesterov;
  }
  optim_test::expect_matches_reference(opt, ps, refs, 5, dtype);
}

TEST(SgdOptimizer, PlainMatchesTorchFormula) { run_case(sgd_cases()[0], DType::Float32); }
TEST(SgdOptimizer, MomentumMatchesTorchFormula) { run_case(sgd_cases()[1], DType::Float32); }
TEST(SgdOptimizer, DampeningMatchesTorchFormula) { run_case(sgd_cases()[2], DType::Float32); }
TEST(SgdOptimizer, NesterovMatchesTorchFormula) { run_case(sgd_cases()[3], DType::Float32); }
TEST(SgdOptimizer, WeightDecayMatchesTorchFormula) {
  run_case(sgd_cases()[4], DType::Float32);
  run_case(sgd_cases()[5], DType::Float32);
  run_case(sgd_cases()[6], DType::Float32);
}

TEST(SgdOptimizer, Float64MatchesReferenceToRoundingForEveryVariant) {
  for (const SgdCase& c : sgd_cases()) run_case(c, DType::Float64);
}

TEST(SgdOptimizer, FirstStepBufferIsTheGradientWithoutDampening) {
  ParamSet ps(DType::Float32);
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.dampening = 0.5;
  SGD opt(ps.named(), o);
  EXPECT_TRUE(opt.state_tensors().empty());  // lazily created, as in torch
  ps.set_grads(0);
  const auto g0 = ps.grads();
  opt.step();
  const auto state = opt.state_tensors();
  ASSERT_EQ(state.size(), ps.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(state[i].first, ps.named()[i].first + ".momentum_buffer");
    const auto buf = testing::host_values(state[i].second);
    for (std::size_t k = 0; k < buf.size(); ++k) {
      // buf = g exactly: not 0.5 g, as dampening would make it.
      ASSERT_EQ(buf[k], g0[i][k]) << ps.named()[i].first << "[" << k << "]";
    }
  }
}

TEST(SgdOptimizer, ParametersWithoutGradAreSkippedAndGetStateLater) {
  ParamSet ps(DType::Float32);
  ps[1].grad = Tensor();  // torch: grad is None
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  SGD opt(ps.named(), o);
  const auto before = ps.values();
  ps.set_grads(0);
  opt.step();
  EXPECT_EQ(ps.values()[1], before[1]);  // untouched
  EXPECT_NE(ps.values()[0], before[0]);
  for (const auto& [name, t] : opt.state_tensors()) EXPECT_NE(name, "0.bias.momentum_buffer");
  EXPECT_EQ(opt.state_tensors().size(), 2u);

  // Its buffer starts at its own first step (buf = g there), like torch's lazy state.
  ps[1].grad = Tensor::zeros(ps[1].value.shape());
  std::vector<RefSGD> refs(ps.size());
  for (auto& r : refs) r.lr = 0.1, r.momentum = 0.9;
  std::vector<std::vector<double>> want = ps.values();
  ps.set_grads(1);
  const auto g = ps.grads();
  opt.step();
  refs[1].step(want[1], g[1]);
  EXPECT_ALLCLOSE(ps.values()[1], want[1], optim_test::kF32Atol, optim_test::kF32Rtol);
  EXPECT_EQ(opt.state_tensors().size(), 3u);
}

TEST(SgdOptimizer, ZeroGradZeroesDefinedGradientsOnly) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[2].grad = Tensor();
  SGD opt(ps.named(), SGDOptions{});
  ASSERT_GT(testing::host_max_abs(ps[0].grad), 0.0);
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(testing::host_max_abs(ps[0].grad), 0.0);
  EXPECT_EQ(testing::host_max_abs(ps[1].grad), 0.0);
  EXPECT_FALSE(ps[2].grad.defined());
  const auto before = ps.values();
  opt.step();  // a zero gradient moves nothing without weight decay
  EXPECT_EQ(ps.values(), before);
}

// torch's default zero_grad(set_to_none=True): every gradient undefined, so the next step moves
// nothing even with weight decay and momentum (a zero gradient would move them), and the buffers
// are kept for the next backward (Note [released gradients] in nn/parameter.h).
TEST(SgdOptimizer, ZeroGradSetsGradientsToNoneAndTheStepSkipsThem) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  SGDOptions o;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  SGD opt(ps.named(), o);
  opt.step();  // momentum buffers exist now
  const void* storage = ps[0].grad.raw_data();
  opt.zero_grad();
  for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_FALSE(ps[i].grad.defined()) << i;
  EXPECT_EQ(ps[0].released.raw_data(), storage);
  const auto before = ps.values();
  opt.step();
  EXPECT_EQ(ps.values(), before);
}

TEST(SgdOptimizer, LrChangeMidRunAppliesFromTheNextStep) {
  ParamSet ps(DType::Float32);
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  SGD opt(ps.named(), o);
  std::vector<RefSGD> refs(ps.size());
  for (auto& r : refs) r.lr = 0.1, r.momentum = 0.9;
  optim_test::expect_matches_reference(opt, ps, refs, 4, DType::Float32, [&](int step) {
    if (step != 2) return;
    opt.set_lr(0.02);
    for (auto& r : refs) r.lr = 0.02;
  });
  EXPECT_EQ(opt.lr(), 0.02);
  EXPECT_EQ(opt.options().lr, 0.1);
}

TEST(SgdOptimizer, InvalidHyperparametersAreValueErrorsNamingTheValue) {
  ParamSet ps(DType::Float32);
  auto make = [&](auto edit) {
    return [&, edit] {
      SGDOptions o;
      edit(o);
      SGD opt(ps.named(), o);
    };
  };
  EXPECT_NE(error_message(make([](SGDOptions& o) {
              o.lr = -0.5;
            })).find("lr must be finite and >= 0, got -0.5"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) { o.momentum = -0.25; })).find("momentum"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) { o.momentum = -0.25; })).find("-0.25"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) { o.weight_decay = -1; })).find("weight_decay"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) {
              o.dampening = 1.5;
            })).find("dampening must be in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) { o.nesterov = true; })).find("nesterov"),
            std::string::npos);  // momentum 0
  EXPECT_NE(error_message(make([](SGDOptions& o) {
              o.nesterov = true, o.momentum = 0.9, o.dampening = 0.1;
            })).find("dampening = 0.1"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) { o.lr = std::nan(""); })).find("lr"),
            std::string::npos);
  EXPECT_NE(error_message(make([](SGDOptions& o) {
              o.momentum = std::numeric_limits<double>::infinity();
            })).find("momentum"),
            std::string::npos);
  EXPECT_THROW(make([](SGDOptions& o) { o.lr = -1; })(), ValueError);

  SGD opt(ps.named(), SGDOptions{});
  EXPECT_THROW(opt.set_lr(-1e-3), ValueError);
  EXPECT_NE(error_message([&] { opt.set_lr(-1e-3); }).find("-0.001"), std::string::npos);
  EXPECT_EQ(opt.lr(), 0.01);
}

TEST(SgdOptimizer, ABadGradientChangesNoParameter) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[2].grad = Tensor::zeros(Shape{1000});  // value is [20, 50]
  SGD opt(ps.named(), SGDOptions{});
  const auto before = ps.values();
  EXPECT_THROW(opt.step(), ShapeError);
  EXPECT_NE(error_message([&] { opt.step(); }).find("2.weight"), std::string::npos);
  EXPECT_EQ(ps.values(), before);  // also the parameters checked before the bad one
  EXPECT_EQ(opt.steps(), 0);
}

TEST(SgdOptimizer, DuplicateOrNullParametersAreRejected) {
  ParamSet ps(DType::Float32);
  NamedParameters twice = ps.named();
  twice.push_back({"again", twice[0].second});
  EXPECT_NE(error_message([&] { SGD opt(twice, SGDOptions{}); }).find("'again'"),
            std::string::npos);
  NamedParameters null_param = {{"x", nullptr}};
  EXPECT_THROW(SGD(null_param, SGDOptions{}), ValueError);
}

}  // namespace
}  // namespace minitrain
