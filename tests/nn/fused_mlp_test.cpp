// The fully fused small MLP (Note [fused MLP] in nn/sequential.cpp, kernels/fused_mlp/): the
// whole forward in one launch and the backward in two give the bits of the layers run one by one
// with the GEMM backend whose sums run in the same order ("naive" on a GPU, "reference" on the
// CPU), on odd batch sizes and widths, with live and released gradients; the CUDA kernels give
// the CPU twin's bits; a finite-difference check; the refusals; and the launches, counted.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/fill.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::host_values;
using testing::random_tensor;

struct Pass {
  std::vector<double> y, dx;
  std::vector<std::string> names;
  std::vector<std::vector<double>> grads;
};

// Two forward + backward passes from zero_grad: the first stores into released gradients, the
// second adds into live ones (both of Linear's ways of writing a gradient).
Pass run(Sequential& model, const Tensor& x, const Tensor& dy) {
  Pass p;
  // zero_grad keeps the buffers for the next backward to store into: NaN there first, so that a
  // gradient the next backward fails to write shows, instead of an earlier run's value.
  for (auto& [name, param] : model.named_parameters())
    if (param->grad.defined()) fill(param->grad, std::nan(""));
  model.zero_grad();
  for (int rep = 0; rep < 2; ++rep) {
    const Tensor y = model.forward(x);
    const Tensor dx = model.backward(dy);
    p.y = host_values(y);
    p.dx = dx.defined() ? host_values(dx) : std::vector<double>();
  }
  for (auto& [name, param] : model.named_parameters()) {
    p.names.push_back(name);
    p.grads.push_back(host_values(param->grad));
  }
  return p;
}

// The layers one by one with `backend` on every Linear, then the fused kernels, on one model.
Pass run_with(Sequential& model, const Tensor& x, const Tensor& dy, const std::string& kernel,
              const std::string& backend = "auto") {
  for (std::size_t i = 0; i < model.size(); ++i)
    if (auto* linear = dynamic_cast<Linear*>(&model[i])) linear->set_gemm_backend(backend);
  model.set_mlp_kernel(kernel);
  return run(model, x, dy);
}

bool is_bias(const std::string& name) {
  return name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
}

// Bit for bit, except where `bias_bound`: the CPU's sum_rows adds a column's rows in order in
// double, the fused kernels (as the GPU's sum_rows) in 16 row slices; two double sums of the
// same floats then round to the same float or to neighbours, so they may differ by one float
// ulp of the result (a double sum of n floats errs by at most n 2^-53 sum|x|, far below that
// ulp at these sizes unless the sum cancels to near zero: the 1e-12 absolute term).
void expect_same(const Pass& got, const Pass& want, const std::string& what, bool bias_bound) {
  ASSERT_FALSE(got.y.empty());
  double largest = 0;
  for (double v : got.y) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 0.0) << what << ": not silently zero";
  EXPECT_EQ(got.y, want.y) << what;
  EXPECT_EQ(got.dx, want.dx) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (std::size_t i = 0; i < got.grads.size(); ++i) {
    if (!bias_bound || !is_bias(got.names[i])) {
      EXPECT_EQ(got.grads[i], want.grads[i]) << what << " " << got.names[i];
      continue;
    }
    ASSERT_EQ(got.grads[i].size(), want.grads[i].size());
    for (std::size_t j = 0; j < got.grads[i].size(); ++j)
      EXPECT_LE(std::abs(got.grads[i][j] - want.grads[i][j]),
                std::ldexp(std::abs(want.grads[i][j]), -23) + 1e-12)
          << what << " " << got.names[i] << "[" << j << "]";
  }
}

struct Case {
  std::vector<int64_t> sizes;
  int64_t batch;
};
// Odd batch sizes (a partial tile of 16 rows; 65 = four full tiles and one row) and odd widths
// (127: every thread but one of the block busy; 3 and 17: a partial slice of 32).
const std::vector<Case> kCases = {{{3, 17, 127, 5}, 1}, {{127, 17, 3, 1}, 7}, {{17, 3, 17, 3}, 65}};

TEST(FusedMlp, CpuTwinHasTheBitsOfTheLayersWithTheReferenceGemm) {
  for (const ActivationInfo& info : kActivations)
    for (const Case& c : kCases) {
      Generator gen(3);
      auto model = make_mlp(c.sizes, info.kind, gen);
      const Tensor x = random_tensor(Shape{c.batch, c.sizes.front()}, 11);
      const Tensor dy = random_tensor(Shape{c.batch, c.sizes.back()}, 12);
      const std::string what = std::string(info.name) + " batch " + std::to_string(c.batch);
      for (bool input_grad : {true, false}) {
        model->set_needs_input_grad(input_grad);
        const Pass layers = run_with(*model, x, dy, "layers", "reference");
        const Pass fused = run_with(*model, x, dy, "fused");
        expect_same(fused, layers, what, /*bias_bound=*/true);
        EXPECT_EQ(fused.dx.empty(), !input_grad);
      }
    }
}

// A Linear without bias, an activation after the last Linear, the first layer's input gradient.
std::unique_ptr<Sequential> irregular_model(Device device) {
  Generator gen(4);
  auto model = std::make_unique<Sequential>();
  model->add(std::make_unique<Linear>(5, 9, gen, /*bias=*/false, device));
  model->add(std::make_unique<ActivationLayer>(Activation::Tanh));
  model->add(std::make_unique<Linear>(9, 4, gen, /*bias=*/true, device));
  model->add(std::make_unique<Linear>(4, 3, gen, /*bias=*/true, device));
  model->add(std::make_unique<ActivationLayer>(Activation::Sigmoid));
  return model;
}

TEST(FusedMlp, CpuTwinTakesLayersWithoutBiasOrActivationAndATrailingActivation) {
  auto model = irregular_model(Device::cpu());
  const Tensor x = random_tensor(Shape{6, 5}, 13);
  const Tensor dy = random_tensor(Shape{6, 3}, 14);
  const Pass layers = run_with(*model, x, dy, "layers", "reference");
  const Pass fused = run_with(*model, x, dy, "fused");
  expect_same(fused, layers, "irregular", /*bias_bound=*/true);
}

// Central differences of L = sum(y * r) against the fused backward's gradients, in float32: the
// step 1e-2 leaves a truncation error of about 1e-4 and float rounding of about 1e-5.
TEST(FusedMlp, GradientsMatchFiniteDifferences) {
  Generator gen(5);
  auto model = make_mlp({3, 6, 4, 2}, Activation::Tanh, gen);
  model->set_mlp_kernel("fused");
  model->set_needs_input_grad(true);
  const Tensor x = random_tensor(Shape{5, 3}, 15);
  const Tensor r = random_tensor(Shape{5, 2}, 16);
  const auto loss = [&] {
    const std::vector<double> y = host_values(model->forward(x));
    const std::vector<double> w = host_values(r);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * w[i];
    return l;
  };
  model->zero_grad();
  model->forward(x);
  const std::vector<double> dx = host_values(model->backward(r));
  const double eps = 1e-2, tol = 2e-3;
  for (auto& [name, param] : model->named_parameters()) {
    const std::vector<double> grad = host_values(param->grad);
    float* v = param->value.data<float>();
    for (int64_t i = 0; i < param->value.numel(); ++i) {
      const float saved = v[i];
      v[i] = saved + static_cast<float>(eps);
      const double up = loss();
      v[i] = saved - static_cast<float>(eps);
      const double down = loss();
      v[i] = saved;
      EXPECT_NEAR(grad[static_cast<std::size_t>(i)], (up - down) / (2 * eps), tol)
          << name << "[" << i << "]";
    }
  }
  Tensor xm = x;
  float* xv = xm.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float saved = xv[i];
    xv[i] = saved + static_cast<float>(eps);
    const double up = loss();
    xv[i] = saved - static_cast<float>(eps);
    const double down = loss();
    xv[i] = saved;
    EXPECT_NEAR(dx[static_cast<std::size_t>(i)], (up - down) / (2 * eps), tol) << "x[" << i << "]";
  }
}

void expect_refusal(Sequential& model, const Tensor& x, const std::string& part) {
  model.set_mlp_kernel("fused");
  try {
    model.forward(x);
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_NE(msg.find("--mlp-kernel layers"), std::string::npos) << msg;
  }
}

TEST(FusedMlp, RefusesWhatItCannotRunAndSaysWhy) {
  Generator gen(6);
  auto wide = make_mlp({4, 129, 1}, Activation::ReLU, gen);
  expect_refusal(*wide, random_tensor(Shape{2, 4}, 1), "up to 128");
  auto dbl = make_mlp({4, 8, 1}, Activation::ReLU, gen, Device::cpu(), DType::Float64);
  expect_refusal(*dbl, cast(random_tensor(Shape{2, 4}, 1), DType::Float64), "float32");
  Sequential two_acts;  // two activations in a row: not a Linear + activation stack
  two_acts.add(std::make_unique<Linear>(4, 4, gen));
  two_acts.add(std::make_unique<ActivationLayer>(Activation::ReLU));
  two_acts.add(std::make_unique<ActivationLayer>(Activation::Tanh));
  expect_refusal(two_acts, random_tensor(Shape{2, 4}, 1), "relu, gelu, gelu_tanh, tanh, sigmoid");
  auto deep = make_mlp({2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, Activation::ReLU, gen);  // 9 Linear
  expect_refusal(*deep, random_tensor(Shape{2, 2}, 1), "at most 8");
  auto mixed = make_mlp({4, 8, 1}, Activation::ReLU, gen);
  mixed->set_precision(DType::BFloat16);
  expect_refusal(*mixed, random_tensor(Shape{2, 4}, 1), "mixed precision");
  Sequential s;
  try {
    s.set_mlp_kernel("fast");
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("layers, fused"), std::string::npos) << e.what();
  }
}

TEST(FusedMlp, EvalModeKeepsNothingForBackward) {
  Generator gen(7);
  auto model = make_mlp({3, 4, 1}, Activation::ReLU, gen);
  model->set_mlp_kernel("fused");
  model->train(false);
  model->forward(random_tensor(Shape{2, 3}, 1));
  EXPECT_THROW(model->backward(random_tensor(Shape{2, 1}, 2)), Error);
}

// ---- on a GPU ----

TEST(FusedMlpCuda, SameBitsAsTheLayersWithTheNaiveGemmAndAsTheCpuTwin) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
  for (const ActivationInfo& info : kActivations)
    for (const Case& c : kCases) {
      Generator gen(3);
      auto model = make_mlp(c.sizes, info.kind, gen, Device::cuda(0));
      Generator gen2(3);
      auto cpu = make_mlp(c.sizes, info.kind, gen2);
      const Tensor x = random_tensor(Shape{c.batch, c.sizes.front()}, 11, Device::cuda(0));
      const Tensor dy = random_tensor(Shape{c.batch, c.sizes.back()}, 12, Device::cuda(0));
      const std::string what = std::string(info.name) + " batch " + std::to_string(c.batch);
      model->set_needs_input_grad(true);
      const Pass layers = run_with(*model, x, dy, "layers", "naive");
      const Pass fused = run_with(*model, x, dy, "fused");
      expect_same(fused, layers, what, /*bias_bound=*/false);
#if MINITRAIN_CUDA_EMULATED
      // The emulated GPU runs the kernels' source on the CPU, where a * b + c is not contracted
      // into one fused multiply-add, as the twin's is not: the same bits. (A real GPU contracts
      // it, as it does in the naive rung: the same bits as the layers, not as the twin.)
      cpu->set_needs_input_grad(true);
      const Pass twin = run_with(*cpu, x.to(Device::cpu()), dy.to(Device::cpu()), "fused");
      expect_same(fused, twin, what + " (twin)", /*bias_bound=*/false);
#endif
    }
}

TEST(FusedMlpCuda, TakesLayersWithoutBiasOrActivationAndATrailingActivation) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
  auto model = irregular_model(Device::cuda(0));
  const Tensor x = random_tensor(Shape{6, 5}, 13, Device::cuda(0));
  const Tensor dy = random_tensor(Shape{6, 3}, 14, Device::cuda(0));
  for (bool input_grad : {true, false}) {
    model->set_needs_input_grad(input_grad);
    const Pass layers = run_with(*model, x, dy, "layers", "naive");
    const Pass fused = run_with(*model, x, dy, "fused");
    expect_same(fused, layers, input_grad ? "input grad" : "no input grad", false);
    EXPECT_EQ(fused.dx.empty(), !input_grad);
  }
}

#if MINITRAIN_CUDA_EMULATED
int64_t launches_of(const std::function<void()>& f) {
  const uint64_t before = mtemu::api_counts().launches;
  f();
  return static_cast<int64_t>(mtemu::api_counts().launches - before);
}
#endif

TEST(FusedMlpCuda, OneLaunchForwardTwoBackward) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  // mlp:4,64,64,1 (three Linear, two ReLU), the model, at batch 8.
  Generator gen(5);
  auto model = make_mlp({4, 64, 64, 1}, Activation::ReLU, gen, Device::cuda(0));
  const Tensor x = random_tensor(Shape{8, 4}, 15, Device::cuda(0));
  const Tensor dy = random_tensor(Shape{8, 1}, 16, Device::cuda(0));
  model->set_needs_input_grad(false);
  std::vector<int64_t> counts;
  for (const char* kernel : {"layers", "fused"}) {
    model->set_mlp_kernel(kernel);
    model->zero_grad();
    model->forward(x);
    model->backward(dy);  // warm-up: the gradients exist (added into, not stored)
    counts.push_back(launches_of([&] { model->forward(x); }));
    counts.push_back(launches_of([&] { model->backward(dy); }));
  }
  std::cout << "launches forward " << counts[0] << " -> " << counts[2] << ", backward " << counts[1]
            << " -> " << counts[3] << "\n";
  EXPECT_EQ(counts[2], 1);
  EXPECT_EQ(counts[3], 2);
#endif
}

}  // namespace
}  // namespace minitrain
