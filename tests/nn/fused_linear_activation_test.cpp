// Linear + activation on a GPU as fewer kernels (Note [Linear + activation] in nn/sequential.cpp):
// forward is the GEMM and one bias + activation pass, backward one pass for the activation's
// gradient and the bias gradient's column sums, then the two GEMMs. The same bits as the layers
// run one by one (bias_add, activation_forward; activation_backward, sum_rows), close to the CPU
// twin, and on the emulated GPUs one launch fewer per hidden layer each way (counted).

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <vector>

#include "kernels/cast.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
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
  std::vector<std::vector<double>> grads;
};

// forward and backward of `model` twice (the second accumulates into the gradients), fused by
// Sequential or, with `one_by_one`, each layer alone (the unfused path).
Pass run(Sequential& model, const Tensor& x, const Tensor& dy, bool one_by_one) {
  Pass p;
  model.zero_grad();
  for (int rep = 0; rep < 2; ++rep) {
    Tensor y, g = dy;
    if (one_by_one) {
      Tensor h = x;
      for (size_t i = 0; i < model.size(); ++i) h = model[i].forward(h);
      y = h;
      for (size_t i = model.size(); i-- > 0;) g = model[i].backward(g);
    } else {
      y = model.forward(x);
      g = model.backward(dy);
    }
    p.y = host_values(y);
    p.dx = g.defined() ? host_values(g) : std::vector<double>();
  }
  for (auto& [name, param] : model.named_parameters()) p.grads.push_back(host_values(param->grad));
  return p;
}

void expect_same_bits(const Pass& a, const Pass& b, const char* what) {
  EXPECT_EQ(a.y, b.y) << what;
  EXPECT_EQ(a.dx, b.dx) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) EXPECT_EQ(a.grads[i], b.grads[i]) << what << " " << i;
}

TEST(FusedLinearActivationCuda, SameBitsAsTheLayersOneByOneAndCloseToTheCpuTwin) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
  for (const ActivationInfo& info : kActivations) {
    // float32 only: no GEMM backend of the emulated GPUs has float64 (cuBLAS is absent there).
    for (DType dtype : {DType::Float32}) {
      for (int64_t batch : {1, 7}) {
        Generator gen(3);
        auto model = make_mlp({5, 9, 4, 3}, info.kind, gen, Device::cuda(0), dtype);
        Generator gen2(3);
        auto cpu = make_mlp({5, 9, 4, 3}, info.kind, gen2, Device::cpu(), dtype);
        const Tensor x = cast(random_tensor(Shape{batch, 5}, 11, Device::cuda(0)), dtype);
        const Tensor dy = cast(random_tensor(Shape{batch, 3}, 12, Device::cuda(0)), dtype);
        const Pass fused = run(*model, x, dy, false);
        const Pass unfused = run(*model, x, dy, true);
        expect_same_bits(fused, unfused, info.name);
        const Pass twin = run(*cpu, x.to(Device::cpu()), dy.to(Device::cpu()), false);
        const double tol = 1e-5;  // the devices' GEMMs sum in different orders
        EXPECT_ALLCLOSE(fused.y, twin.y, tol, tol) << info.name;
        EXPECT_ALLCLOSE(fused.dx, twin.dx, tol, tol) << info.name;
        for (size_t i = 0; i < fused.grads.size(); ++i)
          EXPECT_ALLCLOSE(fused.grads[i], twin.grads[i], tol, tol) << info.name << " " << i;
      }
    }
  }
}

TEST(FusedLinearActivationCuda, FirstLayerWithoutInputGradAndLayersWithoutBias) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
  Generator gen(4);
  Sequential model;
  model.add(std::make_unique<Linear>(4, 6, gen, /*bias=*/false, Device::cuda(0)));
  model.add(std::make_unique<ActivationLayer>(Activation::Tanh));
  model.add(std::make_unique<Linear>(6, 5, gen, /*bias=*/true, Device::cuda(0)));
  model.add(std::make_unique<ActivationLayer>(Activation::GELU));
  model.add(std::make_unique<Linear>(5, 2, gen, /*bias=*/true, Device::cuda(0)));
  const Tensor x = random_tensor(Shape{3, 4}, 13, Device::cuda(0));
  const Tensor dy = random_tensor(Shape{3, 2}, 14, Device::cuda(0));
  for (bool input_grad : {true, false}) {
    model.set_needs_input_grad(input_grad);
    const Pass fused = run(model, x, dy, false);
    const Pass unfused = run(model, x, dy, true);
    expect_same_bits(fused, unfused, input_grad ? "input grad" : "no input grad");
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

TEST(FusedLinearActivationCuda, OneLaunchFewerPerHiddenLayerEachWay) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  // mlp:4,16,16,1 (three Linear, two ReLU), as tests/train/gpu_step_test.cpp's step.
  Generator gen(5);
  auto model = make_mlp({4, 16, 16, 1}, Activation::ReLU, gen, Device::cuda(0));
  const Tensor x = random_tensor(Shape{8, 4}, 15, Device::cuda(0));
  const Tensor dy = random_tensor(Shape{8, 1}, 16, Device::cuda(0));
  model->set_needs_input_grad(false);
  run(*model, x, dy, false);  // warm-up: the gradients exist (accumulated, not overwritten)
  Tensor y;
  const int64_t fwd_fused = launches_of([&] { y = model->forward(x); });
  const int64_t bwd_fused = launches_of([&] { model->backward(dy); });
  Tensor h;
  const int64_t fwd_unfused = launches_of([&] {
    h = x;
    for (size_t i = 0; i < model->size(); ++i) h = (*model)[i].forward(h);
  });
  const int64_t bwd_unfused = launches_of([&] {
    Tensor g = dy;
    for (size_t i = model->size(); i-- > 0;) g = (*model)[i].backward(g);
  });
  // Unfused forward: 3 GEMMs, 3 bias adds, 2 activations; fused: 3 GEMMs, 2 bias + activation
  // passes, 1 bias add. Backward (accumulating): 3 dW GEMMs, 2 dx GEMMs, 3 column sums, 3 axpys
  // and 2 activation backwards unfused; fused, the 2 activation backwards carry 2 column sums.
  std::cout << "launches forward " << fwd_unfused << " -> " << fwd_fused << ", backward "
            << bwd_unfused << " -> " << bwd_fused << "\n";
  EXPECT_EQ(fwd_fused, fwd_unfused - 2);
  EXPECT_EQ(bwd_fused, bwd_unfused - 2);
#endif
}

}  // namespace
}  // namespace minitrain
