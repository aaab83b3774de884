// Finite-difference gradient checks, in float64 on the CPU, for every layer and the loss.
// The objective is L = sum(y * r) for a fixed random r, so dL/dy = r is what backward gets; each
// analytic gradient (dx and every parameter's grad) is compared with central differences
// (L(v + h) - L(v - h)) / 2h. With h = 1e-5 the truncation error (~h^2) and the rounding error
// (~1e-16 / h) are both near 1e-11, far inside the 1e-6 relative tolerance.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "kernels/activation.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/mse_loss.h"
#include "nn/sequential.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

constexpr double kStep = 1e-5;
constexpr double kAtol = 1e-8, kRtol = 1e-6;
// Odd sizes, so that no transposition or row/column mix-up goes unnoticed.
constexpr int64_t kBatch = 5, kIn = 7, kOut = 3;

double dot(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = host_values(a), y = host_values(b);
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// Central differences of `objective` with respect to every element of `v` (a float64 CPU tensor,
// perturbed in place and restored).
template <typename F>
Tensor numeric_gradient(Tensor& v, F&& objective) {
  Tensor g = Tensor::empty(v.shape(), DType::Float64);
  double* p = v.data<double>();
  double* out = g.data<double>();
  for (int64_t i = 0; i < v.numel(); ++i) {
    const double saved = p[i];
    p[i] = saved + kStep;
    const double plus = objective();
    p[i] = saved - kStep;
    const double minus = objective();
    p[i] = saved;
    out[i] = (plus - minus) / (2 * kStep);
  }
  return g;
}

// Checks dL/dx and dL/dparam of `m` at `x` against central differences.
void expect_gradients_match(Module& m, Tensor x, uint32_t seed) {
  m.train();
  m.zero_grad();
  const Tensor y = m.forward(x);
  const Tensor r = random_tensor(y.shape(), seed, Device::cpu(), DType::Float64);
  const Tensor dx = m.backward(r);
  auto objective = [&] { return dot(m.forward(x), r); };

  ASSERT_TRUE(dx.defined());
  ASSERT_GT(host_max_abs(dx), 0.0) << "dx is all zeros";
  EXPECT_ALLCLOSE(dx, numeric_gradient(x, objective), kAtol, kRtol) << "dL/dx";
  for (auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p->grad.defined()) << name;
    ASSERT_GT(host_max_abs(p->grad), 0.0) << name << " gradient is all zeros";
    EXPECT_ALLCLOSE(p->grad, numeric_gradient(p->value, objective), kAtol, kRtol) << "dL/d" << name;
  }
}

Tensor input(int64_t rows, int64_t cols, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  return random_tensor(Shape{rows, cols}, seed, Device::cpu(), DType::Float64, lo, hi);
}

TEST(LinearGradCheck, WithBias) {
  Generator gen(11);
  Linear layer(kIn, kOut, gen, /*bias=*/true, Device::cpu(), DType::Float64);
  expect_gradients_match(layer, input(kBatch, kIn, 1), 2);
  EXPECT_EQ(layer.named_parameters().size(), 2u);
}

TEST(LinearGradCheck, WithoutBias) {
  Generator gen(12);
  Linear layer(kIn, kOut, gen, /*bias=*/false, Device::cpu(), DType::Float64);
  ASSERT_EQ(layer.named_parameters().size(), 1u);
  expect_gradients_match(layer, input(kBatch, kIn, 3), 4);
}

class ActivationGradCheck : public ::testing::TestWithParam<Activation> {};

TEST_P(ActivationGradCheck, MatchesCentralDifferences) {
  ActivationLayer layer(GetParam());
  // 5 x 7 values in [-3, 3]: both sides of ReLU's kink (never within h of it for these seeds),
  // the saturating tails of tanh and sigmoid, GELU's negative lobe.
  expect_gradients_match(layer, input(kBatch, kIn, 5, -3.0, 3.0), 6);
}

INSTANTIATE_TEST_SUITE_P(All, ActivationGradCheck,
                         ::testing::Values(Activation::ReLU, Activation::GELU, Activation::GELUTanh,
                                           Activation::Tanh, Activation::Sigmoid),
                         [](const ::testing::TestParamInfo<Activation>& info) {
                           return std::string(activation_name(info.param));
                         });

TEST(SequentialGradCheck, ThreeLayerMlpWithMixedActivations) {
  Generator gen(13);
  Sequential model;
  model.add(std::make_unique<Linear>(kIn, 6, gen, true, Device::cpu(), DType::Float64))
      .add(std::make_unique<ActivationLayer>(Activation::Tanh))
      .add(std::make_unique<Linear>(6, 5, gen, false, Device::cpu(), DType::Float64))
      .add(std::make_unique<ActivationLayer>(Activation::GELU))
      .add(std::make_unique<Linear>(5, kOut, gen, true, Device::cpu(), DType::Float64));
  ASSERT_EQ(model.named_parameters().size(), 5u);  // 0.weight 0.bias 2.weight 4.weight 4.bias
  expect_gradients_match(model, input(kBatch, kIn, 7), 8);
}

class MseLossGradCheck : public ::testing::TestWithParam<Reduction> {};

TEST_P(MseLossGradCheck, MatchesCentralDifferences) {
  MSELoss loss(GetParam());
  Tensor pred = input(kBatch, kOut, 9);
  const Tensor target = input(kBatch, kOut, 10);
  // Objective: the loss itself (mean/sum), or the sum of the per-element losses (none), which
  // is what backward's dL/dloss = 1 means in each case.
  auto objective = [&] {
    const std::vector<double> v = host_values(loss.forward(pred, target));
    double s = 0;
    for (double e : v) s += e;
    return s;
  };
  objective();
  const Tensor grad = loss.backward();
  ASSERT_EQ(grad.shape(), pred.shape());
  ASSERT_GT(host_max_abs(grad), 0.0);
  EXPECT_ALLCLOSE(grad, numeric_gradient(pred, objective), kAtol, kRtol);
}

INSTANTIATE_TEST_SUITE_P(All, MseLossGradCheck,
                         ::testing::Values(Reduction::Mean, Reduction::Sum, Reduction::None),
                         [](const ::testing::TestParamInfo<Reduction>& info) {
                           return std::string(reduction_name(info.param));
                         });

}  // namespace
}  // namespace minitrain
