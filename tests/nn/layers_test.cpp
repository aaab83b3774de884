// Linear and activation layers: results against naive host references on every device, PyTorch's
// init (bounds, order, determinism), gradient accumulation, zero_grad, train/eval, errors, repr.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/activation.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/linear_layer.h"
#include "kernels/random.h"
#include "kernels/reduce.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/sequential.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

// ---- naive host references (loops over doubles, independent of the GEMM) ----

// y[b, o] = sum_i x[b, i] w[o, i] + bias[o]
std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& bias, int64_t batch, int64_t in,
                               int64_t out) {
  std::vector<double> y(static_cast<size_t>(batch * out));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias.empty() ? 0.0 : bias[o];
      for (int64_t i = 0; i < in; ++i) s += x[b * in + i] * w[o * in + i];
      y[b * out + o] = s;
    }
  return y;
}

class LinearOnDevice : public testing::DeviceTest {};

TEST_P(LinearOnDevice, ForwardMatchesNaiveReference) {
  Generator gen(1);
  Linear layer(7, 3, gen, true, device());
  const Tensor x = random_tensor(Shape{5, 7}, 2, device());
  const Tensor y = layer.forward(x);
  ASSERT_EQ(y.shape(), (Shape{5, 3}));
  EXPECT_EQ(y.device(), device());
  ASSERT_GT(host_max_abs(y), 0.0);
  const auto want = ref_linear(host_values(x), host_values(layer.weight().value),
                               host_values(layer.bias().value), 5, 7, 3);
  EXPECT_ALLCLOSE(host_values(y), want, 1e-6, 1e-5);  // float32 sums of 7 products
}

TEST_P(LinearOnDevice, BackwardMatchesNaiveReference) {
  Generator gen(3);
  Linear layer(7, 3, gen, true, device());
  const Tensor x = random_tensor(Shape{5, 7}, 4, device());
  const Tensor dy = random_tensor(Shape{5, 3}, 5, device());
  layer.forward(x);
  const Tensor dx = layer.backward(dy);
  const auto xv = host_values(x), dyv = host_values(dy), wv = host_values(layer.weight().value);
  std::vector<double> dx_ref(5 * 7, 0.0), dw_ref(3 * 7, 0.0), db_ref(3, 0.0);
  for (int b = 0; b < 5; ++b)
    for (int o = 0; o < 3; ++o) {
      db_ref[o] += dyv[b * 3 + o];
      for (int i = 0; i < 7; ++i) {
        dx_ref[b * 7 + i] += dyv[b * 3 + o] * wv[o * 7 + i];
        dw_ref[o * 7 + i] += dyv[b * 3 + o] * xv[b * 7 + i];
      }
    }
  ASSERT_GT(host_max_abs(dx), 0.0);
  EXPECT_ALLCLOSE(host_values(dx), dx_ref, 1e-6, 1e-5);
  EXPECT_ALLCLOSE(host_values(layer.weight().grad), dw_ref, 1e-6, 1e-5);
  EXPECT_ALLCLOSE(host_values(layer.bias().grad), db_ref, 1e-6, 1e-5);
  EXPECT_EQ(layer.weight().grad.device(), device());
}

TEST_P(LinearOnDevice, ToMovesParametersAndGradients) {
  Generator gen(6);
  Linear layer(4, 2, gen);
  const auto w_before = host_values(layer.weight().value);
  layer.zero_grad(/*set_to_none=*/false);  // a gradient to move
  layer.to(device());
  EXPECT_EQ(layer.weight().value.device(), device());
  EXPECT_EQ(layer.bias().value.device(), device());
  EXPECT_EQ(layer.weight().grad.device(), device());
  EXPECT_EQ(host_values(layer.weight().value), w_before);
  const Tensor y = layer.forward(random_tensor(Shape{3, 4}, 7, device()));
  EXPECT_EQ(y.device(), device());
  layer.backward(random_tensor(Shape{3, 2}, 8, device()));
  EXPECT_GT(host_max_abs(layer.bias().grad), 0.0);
}

// Under mixed precision backward's dx = dy round16(W) uses the forward's round16(W), as torch's
// autocast saves the cast weight for backward: a weight changed between forward and backward (here
// doubled) does not reach dx. It was rounded anew before, one launch more per layer.
TEST_P(LinearOnDevice, MixedPrecisionBackwardUsesTheWeightTheForwardRounded) {
  Generator gen_a(9), gen_b(9);
  Linear changed(5, 4, gen_a, true, device()), kept(5, 4, gen_b, true, device());
  const Tensor x = random_tensor(Shape{3, 5}, 10, device());
  const Tensor dy = random_tensor(Shape{3, 4}, 11, device());
  std::vector<std::vector<double>> dx;
  for (Linear* layer : {&changed, &kept}) {
    layer->set_precision(DType::BFloat16);
    layer->forward(x);
  }
  Tensor& w = changed.weight().value;
  scale(w, w, 2.0);
  for (Linear* layer : {&changed, &kept}) dx.push_back(host_values(layer->backward(dy)));
  ASSERT_GT(host_max_abs(changed.weight().value), 0.0);
  EXPECT_EQ(dx[0], dx[1]);
}

// Note [the weight casts] (nn/linear.cpp): a Sequential under mixed precision rounds all its
// Linear layers' weights at the start of its forward (one launch); the layers run one by one
// each round their own. Same bits either way, forward and backward (gradients stored into
// released buffers, then added to), and a weight changed between two passes (here doubled) is
// rounded anew.
TEST_P(LinearOnDevice, MixedPrecisionSequentialGivesTheBitsOfItsLayersRunAlone) {
  for (DType p : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(p));
    Generator gen_a(21), gen_b(21);
    auto together = make_mlp({4, 16, 16, 3}, Activation::ReLU, gen_a, device());
    auto alone = make_mlp({4, 16, 16, 3}, Activation::ReLU, gen_b, device());
    together->set_precision(p);
    alone->set_precision(p);
    const Tensor x = random_tensor(Shape{5, 4}, 22, device());
    const Tensor dy = cast(random_tensor(Shape{5, 3}, 23, device()), p);
    for (int pass = 0; pass < 3; ++pass) {
      SCOPED_TRACE(pass);
      if (pass == 0) {
        together->zero_grad();
        alone->zero_grad();
      }
      if (pass == 2)
        for (Sequential* m : {together.get(), alone.get()})
          for (auto& [name, param] : m->named_parameters()) scale(param->value, param->value, 2.0);
      const Tensor y_together = together->forward(x);
      const Tensor dx_together = together->backward(dy);
      Tensor h = x;
      Sequential& layers = *alone;
      for (std::size_t i = 0; i < layers.size(); ++i) h = layers[i].forward(h);
      Tensor g = dy;
      for (std::size_t i = layers.size(); i-- > 0;) g = layers[i].backward(g);
      ASSERT_GT(host_max_abs(y_together), 0.0);
      EXPECT_EQ(host_values(y_together), host_values(h));
      EXPECT_EQ(host_values(dx_together), host_values(g));
      const auto params_t = together->named_parameters(), params_a = alone->named_parameters();
      for (std::size_t k = 0; k < params_t.size(); ++k) {
        ASSERT_GT(host_max_abs(params_t[k].second->grad), 0.0) << params_t[k].first;
        EXPECT_EQ(host_values(params_t[k].second->grad), host_values(params_a[k].second->grad))
            << params_t[k].first;
      }
    }
  }
}

// The mixed-precision gradients are the one-tensor ops' bits: dW = round16(dy^T x) and db =
// round16(sum_rows(dy)), stored into a released gradient as zero_ then axpy would, then added
// with axpy (the path before Note [the weight casts], written out here).
TEST_P(LinearOnDevice, MixedPrecisionGradientsAreTheRoundedProductsAdded) {
  Generator gen(31);
  Linear layer(6, 5, gen, true, device());
  layer.set_precision(DType::Float16);
  const Tensor x = cast(random_tensor(Shape{4, 6}, 32, device()), DType::Float16);
  const Tensor dy = cast(random_tensor(Shape{4, 5}, 33, device()), DType::Float16);
  Tensor want_w = Tensor::zeros(Shape{5, 6}, DType::Float32, device());
  Tensor want_b = Tensor::zeros(Shape{5}, DType::Float32, device());
  layer.zero_grad();
  for (int pass = 0; pass < 2; ++pass) {
    layer.forward(x);
    layer.backward(dy);
    const Tensor dy32 = cast(dy, DType::Float32), x32 = cast(x, DType::Float32);
    Tensor dw = Tensor::empty(Shape{5, 6}, DType::Float32, device());
    gemm_with("auto", dw, dy32, /*trans_a=*/true, x32, /*trans_b=*/false);
    round_to_precision(dw, dw, DType::Float16);
    axpy(want_w, 1.0, dw);
    Tensor db = Tensor::empty(Shape{5}, DType::Float32, device());
    sum_rows(db, dy32);
    round_to_precision(db, db, DType::Float16);
    axpy(want_b, 1.0, db);
    ASSERT_GT(host_max_abs(want_w), 0.0);
    EXPECT_EQ(host_values(layer.weight().grad), host_values(want_w)) << "pass " << pass;
    EXPECT_EQ(host_values(layer.bias().grad), host_values(want_b)) << "pass " << pass;
  }
  // Both passes within one RoundedGradients (whose flush adds what waits): the first pass's
  // products are added before the second overwrites them.
  layer.zero_grad();
  {
    Linear::RoundedGradients grads16({&layer});
    for (int pass = 0; pass < 2; ++pass) {
      layer.forward(x);
      layer.backward(dy);
    }
    grads16.flush();
  }
  EXPECT_EQ(host_values(layer.weight().grad), host_values(want_w));
  EXPECT_EQ(host_values(layer.bias().grad), host_values(want_b));
  // Ended without its flush (an exception on the way): the released gradients are released
  // again, not left holding what the buffers held.
  layer.zero_grad();
  {
    Linear::RoundedGradients grads16({&layer});
    layer.forward(x);
    layer.backward(dy);
  }
  EXPECT_FALSE(layer.weight().grad.defined());
  EXPECT_FALSE(layer.bias().grad.defined());
}

// A pass's copies are current only for that pass: RoundedWeights forgets those its pass did not
// use, so a layer run later, after its weight changed, rounds the weight anew.
TEST_P(LinearOnDevice, MixedPrecisionCopiesOfAPassAreForgottenAtItsEnd) {
  Generator gen_a(41), gen_b(41);
  Linear first(3, 3, gen_a, true, device()), second(3, 3, gen_a, true, device());
  Linear first_same(3, 3, gen_b, true, device()), second_same(3, 3, gen_b, true, device());
  for (Linear* l : {&first, &second, &second_same}) l->set_precision(DType::BFloat16);
  const Tensor x = random_tensor(Shape{2, 3}, 42, device());
  {
    const Linear::RoundedWeights pass({&first, &second});
    first.forward(x);  // the pass ends before `second` runs (as after an exception)
  }
  scale(second.weight().value, second.weight().value, 2.0);
  scale(second_same.weight().value, second_same.weight().value, 2.0);
  ASSERT_EQ(host_values(second.weight().value), host_values(second_same.weight().value));
  const Tensor y = second.forward(x);
  ASSERT_GT(host_max_abs(y), 0.0);
  EXPECT_EQ(host_values(y), host_values(second_same.forward(x)));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(LinearOnDevice);

#if MINITRAIN_CUDA_EMULATED
int64_t launches_of(const std::function<void()>& f) {
  const uint64_t before = mtemu::api_counts().launches;
  f();
  return static_cast<int64_t>(mtemu::api_counts().launches - before);
}
#endif

// Counted on the emulated GPUs: under mixed precision a Linear's forward makes one launch for its
// weight and bias casts (two before), a Sequential's forward one for all its layers; a Linear's
// backward one for its gradient casts (four before with gradients to add to, six with released
// ones: a zero_, a round_to_precision and an axpy each), a Sequential's backward one for all its
// layers; besides the GEMMs, the bias sum and the activations' casts.
TEST(MixedPrecisionLinearCuda, OneLaunchForTheWeightCastsOfAPassAndOneForALayersGradients) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  const Device gpu = Device::cuda(0);
  const DType p = DType::Float16;
  Generator gen(51);
  Linear layer(6, 5, gen, true, gpu);
  layer.set_precision(p);
  const Tensor x = cast(random_tensor(Shape{4, 6}, 52, gpu), p);
  const Tensor dy = cast(random_tensor(Shape{4, 5}, 53, gpu), p);
  layer.forward(x);  // warm-up: the copies exist
  // What the forward runs besides the weight casts: one GEMM of 16-bit x by W16 with b16 in its
  // epilogue, rounded at its store (Note [16-bit GEMM operands] in nn/linear.cpp; before: widen
  // x, the float32 GEMM, the bias add, round the sum).
  const Tensor w16 = Tensor::zeros(Shape{5, 6}, DType::Float32, gpu);
  const Tensor b16 = Tensor::zeros(Shape{5}, DType::Float32, gpu);
  const int64_t rest_forward = launches_of([&] {
    Tensor y = Tensor::empty(Shape{4, 5}, p, gpu);
    gemm_mixed_with("auto", y, x, false, w16, true, 1.0, 0.0, b16);
  });
  EXPECT_EQ(rest_forward, 1);
  EXPECT_EQ(launches_of([&] { layer.forward(x); }), rest_forward + 1);

  // Backward besides the gradient casts: dW's GEMM of 16-bit dy and x, db's sum of 16-bit dy,
  // dx's GEMM rounded at its store (before: also widen dy and x, round dx).
  const int64_t rest_backward = launches_of([&] {
    Tensor dw = Tensor::empty(Shape{5, 6}, DType::Float32, gpu);
    gemm_mixed_with("auto", dw, dy, true, x, false);
    Tensor db = Tensor::empty(Shape{5}, DType::Float32, gpu);
    sum_rows(db, dy);
    Tensor dx = Tensor::empty(Shape{4, 6}, p, gpu);
    gemm_mixed_with("auto", dx, dy, false, w16, false);
  });
  EXPECT_EQ(rest_backward, 3);
  layer.zero_grad();  // released: stored into
  EXPECT_EQ(launches_of([&] { layer.backward(dy); }), rest_backward + 1);
  EXPECT_EQ(launches_of([&] { layer.backward(dy); }), rest_backward + 1);  // added to

  // A Sequential's three Linear layers: one weight-cast launch for the pass, not three.
  Generator gen_a(54), gen_b(54);
  auto model = make_mlp({4, 16, 16, 1}, Activation::ReLU, gen_a, gpu);
  auto same = make_mlp({4, 16, 16, 1}, Activation::ReLU, gen_b, gpu);
  model->set_precision(p);
  same->set_precision(p);
  const Tensor input = random_tensor(Shape{8, 4}, 55, gpu);
  model->forward(input);
  Sequential& layers = *same;
  auto one_by_one = [&] {
    Tensor h = input;
    for (std::size_t i = 0; i < layers.size(); ++i) h = layers[i].forward(h);
  };
  one_by_one();
  EXPECT_EQ(launches_of([&] { model->forward(input); }), launches_of(one_by_one) - 2);
  // Its backward: one gradient-cast launch for the three layers, not three.
  const Tensor grad = cast(random_tensor(Shape{8, 1}, 56, gpu), p);
  model->backward(grad);
  auto backward_one_by_one = [&] {
    Tensor g = grad;
    for (std::size_t i = layers.size(); i-- > 0;) g = layers[i].backward(g);
  };
  backward_one_by_one();
  EXPECT_EQ(launches_of([&] { model->backward(grad); }), launches_of(backward_one_by_one) - 2);
#endif
}

class ActivationLayerOnDevice : public testing::DeviceTest {};

TEST_P(ActivationLayerOnDevice, ForwardAndBackwardMatchTheKernels) {
  for (Activation a : {Activation::ReLU, Activation::GELU, Activation::GELUTanh, Activation::Tanh,
                       Activation::Sigmoid}) {
    ActivationLayer layer(a);
    const Tensor x = random_tensor(Shape{5, 7}, 9, device(), DType::Float32, -3, 3);
    const Tensor dy = random_tensor(Shape{5, 7}, 10, device());
    const Tensor y = layer.forward(x);
    const Tensor dx = layer.backward(dy);
    EXPECT_EQ(host_values(y), host_values(activation_forward(x, a))) << activation_name(a);
    EXPECT_EQ(host_values(dx), host_values(activation_backward(dy, x, a))) << activation_name(a);
    EXPECT_FALSE(dx.shares_storage_with(dy)) << "backward must not overwrite the caller's grad";
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(ActivationLayerOnDevice);

// ---- init ----

TEST(LinearInit, WithinTorchBoundsAndDeterministic) {
  for (int64_t in : {1, 7, 64}) {
    Generator g1(42), g2(42), g3(43);
    Linear a(in, 9, g1), b(in, 9, g2), c(in, 9, g3);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    EXPECT_LE(host_max_abs(a.weight().value), bound) << "in=" << in;
    EXPECT_LE(host_max_abs(a.bias().value), bound) << "in=" << in;
    EXPECT_GT(host_max_abs(a.weight().value), 0.5 * bound) << "suspiciously narrow init";
    EXPECT_EQ(host_values(a.weight().value), host_values(b.weight().value));
    EXPECT_EQ(host_values(a.bias().value), host_values(b.bias().value));
    EXPECT_NE(host_values(a.weight().value), host_values(c.weight().value));
  }
}

TEST(LinearInit, WeightFirstThenBiasFromTheGenerator) {
  Generator gen(5), manual(5);
  Linear layer(7, 3, gen, true, Device::cpu(), DType::Float64);
  Tensor w = Tensor::empty(Shape{3, 7}, DType::Float64),
         b = Tensor::empty(Shape{3}, DType::Float64);
  kaiming_uniform_(w, manual);
  linear_bias_uniform_(b, 7, manual);
  EXPECT_EQ(host_values(layer.weight().value), host_values(w));
  EXPECT_EQ(host_values(layer.bias().value), host_values(b));
  EXPECT_EQ(gen.offset(), manual.offset());

  Generator no_bias_gen(5);
  Linear no_bias(7, 3, no_bias_gen, false, Device::cpu(), DType::Float64);
  EXPECT_FALSE(no_bias.bias().value.defined());
  EXPECT_EQ(host_values(no_bias.weight().value), host_values(w));
  EXPECT_LT(no_bias_gen.offset(), gen.offset());  // no bias drawn
}

// ---- gradients: accumulate, zero_grad, skip dx ----

TEST(LinearGrad, AccumulatesOverBackwardCallsUntilZeroGrad) {
  Generator gen(7);
  Linear layer(7, 3, gen, true, Device::cpu(), DType::Float64);
  const Tensor x1 = random_tensor(Shape{5, 7}, 1, Device::cpu(), DType::Float64);
  const Tensor x2 = random_tensor(Shape{4, 7}, 2, Device::cpu(), DType::Float64);
  const Tensor d1 = random_tensor(Shape{5, 3}, 3, Device::cpu(), DType::Float64);
  const Tensor d2 = random_tensor(Shape{4, 3}, 4, Device::cpu(), DType::Float64);

  auto grads_of = [&](const Tensor& x, const Tensor& d) {
    layer.zero_grad();
    layer.forward(x);
    layer.backward(d);
    return std::make_pair(host_values(layer.weight().grad), host_values(layer.bias().grad));
  };
  const auto [w1, b1] = grads_of(x1, d1);
  const auto [w2, b2] = grads_of(x2, d2);

  layer.zero_grad();
  layer.forward(x1);
  layer.backward(d1);
  layer.forward(x2);
  layer.backward(d2);
  std::vector<double> w_sum(w1.size()), b_sum(b1.size());
  for (size_t i = 0; i < w1.size(); ++i) w_sum[i] = w1[i] + w2[i];
  for (size_t i = 0; i < b1.size(); ++i) b_sum[i] = b1[i] + b2[i];
  EXPECT_ALLCLOSE(host_values(layer.weight().grad), w_sum, 1e-14, 1e-14);
  EXPECT_ALLCLOSE(host_values(layer.bias().grad), b_sum, 1e-14, 1e-14);

  // a second backward of the same forward adds the same gradient again
  layer.zero_grad();
  layer.forward(x1);
  layer.backward(d1);
  layer.backward(d1);
  std::vector<double> w_twice(w1.size());
  for (size_t i = 0; i < w1.size(); ++i) w_twice[i] = 2 * w1[i];
  EXPECT_ALLCLOSE(host_values(layer.weight().grad), w_twice, 1e-14, 1e-14);
}

TEST(LinearGrad, ZeroGradReleasesAndTheNextBackwardOverwritesTheSameBuffer) {
  Generator gen(8);
  Linear layer(7, 3, gen);
  EXPECT_FALSE(layer.weight().grad.defined());  // nothing until the first backward / zero_grad
  layer.zero_grad(/*set_to_none=*/false);       // torch's set_to_none=False: zeros
  ASSERT_TRUE(layer.weight().grad.defined());
  EXPECT_EQ(layer.weight().grad.shape(), layer.weight().value.shape());
  EXPECT_EQ(layer.bias().grad.shape(), (Shape{3}));
  EXPECT_EQ(host_max_abs(layer.weight().grad), 0.0);

  const Tensor x = random_tensor(Shape{5, 7}, 1), dy = random_tensor(Shape{5, 3}, 2);
  const void* storage = layer.weight().grad.raw_data();
  layer.forward(x);
  layer.backward(dy);
  EXPECT_GT(host_max_abs(layer.weight().grad), 0.0);
  EXPECT_GT(host_max_abs(layer.bias().grad), 0.0);
  const std::vector<double> once_w = host_values(layer.weight().grad);
  const std::vector<double> once_b = host_values(layer.bias().grad);

  // The default, set_to_none: undefined (optimizers skip it), the buffer kept with its stale sums.
  layer.zero_grad();
  EXPECT_FALSE(layer.weight().grad.defined());
  EXPECT_FALSE(layer.bias().grad.defined());
  EXPECT_EQ(layer.weight().released.raw_data(), storage);
  // The next backward writes into that buffer: the same sums again, not added to the stale ones.
  layer.forward(x);
  layer.backward(dy);
  EXPECT_EQ(layer.weight().grad.raw_data(), storage) << "backward allocated a new gradient";
  EXPECT_FALSE(layer.weight().released.defined());
  EXPECT_EQ(host_values(layer.weight().grad), once_w);
  EXPECT_EQ(host_values(layer.bias().grad), once_b);
  // A second backward accumulates (x + x is exact).
  layer.forward(x);
  layer.backward(dy);
  std::vector<double> twice_w = once_w;
  for (double& v : twice_w) v *= 2;
  EXPECT_EQ(host_values(layer.weight().grad), twice_w);

  layer.zero_grad(false);
  EXPECT_EQ(host_max_abs(layer.weight().grad), 0.0);
  EXPECT_EQ(host_max_abs(layer.bias().grad), 0.0);
  EXPECT_EQ(layer.weight().grad.raw_data(), storage) << "zero_grad(false) reallocated";

  Generator gen2(8);
  Linear fresh(7, 3, gen2);  // backward without zero_grad allocates its gradient
  fresh.forward(x);
  fresh.backward(dy);
  EXPECT_EQ(host_values(fresh.weight().grad), once_w);
}

TEST(LinearGrad, SkippingInputGradKeepsParameterGradients) {
  Generator g1(9), g2(9);
  Linear with(7, 3, g1), without(7, 3, g2);
  without.set_needs_input_grad(false);
  const Tensor x = random_tensor(Shape{5, 7}, 1), dy = random_tensor(Shape{5, 3}, 2);
  with.forward(x);
  without.forward(x);
  EXPECT_TRUE(with.backward(dy).defined());
  EXPECT_FALSE(without.backward(dy).defined());
  EXPECT_EQ(host_values(with.weight().grad), host_values(without.weight().grad));
  EXPECT_EQ(host_values(with.bias().grad), host_values(without.bias().grad));
}

TEST(LinearGrad, EmptyBatchGivesEmptyOutputAndAddsNothing) {
  Generator gen(10);
  Linear layer(7, 3, gen);
  layer.zero_grad();
  const Tensor y = layer.forward(Tensor::zeros(Shape{0, 7}));
  EXPECT_EQ(y.shape(), (Shape{0, 3}));
  const Tensor dx = layer.backward(Tensor::zeros(Shape{0, 3}));
  EXPECT_EQ(dx.shape(), (Shape{0, 7}));
  EXPECT_EQ(host_max_abs(layer.weight().grad), 0.0);
  EXPECT_EQ(host_max_abs(layer.bias().grad), 0.0);
}

// ---- train / eval ----

TEST(LayerMode, BackwardWithoutTrainingForwardThrows) {
  Generator gen(11);
  Linear layer(7, 3, gen);
  EXPECT_THAT(error_message([&] {
                layer.backward(Tensor::zeros(Shape{5, 3}));
              }),
              HasSubstr("linear: backward called without a preceding training-mode forward"));
  EXPECT_THROW(layer.backward(Tensor::zeros(Shape{5, 3})), Error);

  // eval: forward works and caches nothing, not even an earlier training-mode input
  layer.forward(Tensor::zeros(Shape{5, 7}));
  layer.eval();
  EXPECT_FALSE(layer.is_training());
  EXPECT_EQ(layer.forward(Tensor::zeros(Shape{5, 7})).shape(), (Shape{5, 3}));
  EXPECT_THROW(layer.backward(Tensor::zeros(Shape{5, 3})), Error);
  EXPECT_FALSE(layer.weight().grad.defined());

  ActivationLayer relu(Activation::ReLU);
  relu.eval();
  relu.forward(Tensor::zeros(Shape{2, 2}));
  EXPECT_THAT(error_message([&] {
                relu.backward(Tensor::zeros(Shape{2, 2}));
              }),
              HasSubstr("ReLU(): backward called without a preceding training-mode forward"));
  relu.train();
  relu.forward(Tensor::zeros(Shape{2, 2}));
  EXPECT_NO_THROW(relu.backward(Tensor::zeros(Shape{2, 2})));
}

TEST(LayerMode, SequentialPropagatesTrainAndEval) {
  Generator gen(12);
  Sequential model;
  model.add(std::make_unique<Linear>(3, 4, gen))
      .add(std::make_unique<ActivationLayer>(Activation::Tanh));
  model.eval();
  EXPECT_FALSE(model[0].is_training());
  EXPECT_FALSE(model[1].is_training());
  model.add(std::make_unique<Linear>(4, 2, gen));  // joins in the container's mode
  EXPECT_FALSE(model[2].is_training());
  model.forward(Tensor::zeros(Shape{2, 3}));
  EXPECT_THROW(model.backward(Tensor::zeros(Shape{2, 2})), Error);
  model.train();
  EXPECT_TRUE(model[0].is_training() && model[1].is_training() && model[2].is_training());
  model.forward(Tensor::zeros(Shape{2, 3}));
  EXPECT_EQ(model.backward(Tensor::zeros(Shape{2, 2})).shape(), (Shape{2, 3}));
}

// ---- errors ----

TEST(LinearErrors, ShapeErrorsNameBothShapes) {
  Generator gen(13);
  Linear layer(8, 16, gen);
  EXPECT_THROW(layer.forward(Tensor::zeros(Shape{32, 7})), ShapeError);
  EXPECT_EQ(error_message([&] {
              layer.forward(Tensor::zeros(Shape{32, 7}));
            }),
            "linear: input has 7 features but weight expects 8 (input [32, 7], weight [16, 8])");
  EXPECT_THROW(layer.forward(Tensor::zeros(Shape{2, 4, 8})), ShapeError);
  EXPECT_THAT(error_message([&] {
                layer.forward(Tensor::zeros(Shape{2, 4, 8}));
              }),
              HasSubstr("[2, 4, 8]"));
  EXPECT_THROW(layer.forward(Tensor::zeros(Shape{8})), ShapeError);

  layer.forward(Tensor::zeros(Shape{32, 8}));
  EXPECT_THROW(layer.backward(Tensor::zeros(Shape{32, 15})), ShapeError);
  EXPECT_EQ(error_message([&] {
              layer.backward(Tensor::zeros(Shape{31, 16}));
            }),
            "linear: grad_output is [31, 16] but the forward output was [32, 16]");
}

TEST(LinearErrors, DTypeMismatchIsClear) {
  Generator gen(14);
  Linear layer(3, 2, gen);  // float32
  const Tensor x64 = Tensor::zeros(Shape{4, 3}, DType::Float64);
  EXPECT_THROW(layer.forward(x64), DTypeError);
  EXPECT_THAT(error_message([&] { layer.forward(x64); }),
              HasSubstr("input is float64 but the layer's weight is float32"));
  EXPECT_THROW(Linear(-1, 2, gen), ValueError);
}

TEST(ActivationLayerErrors, GradOutputShapeMustMatch) {
  ActivationLayer gelu(Activation::GELU);
  gelu.forward(Tensor::zeros(Shape{2, 3}));
  EXPECT_THROW(gelu.backward(Tensor::zeros(Shape{3, 2})), ShapeError);
  EXPECT_THAT(error_message([&] {
                gelu.backward(Tensor::zeros(Shape{3, 2}));
              }),
              HasSubstr("[3, 2]"));
}

// ---- repr ----

TEST(Repr, MatchesTorch) {
  Generator gen(15);
  EXPECT_EQ(Linear(3, 2, gen).repr(), "Linear(in_features=3, out_features=2, bias=True)");
  EXPECT_EQ(Linear(3, 2, gen, false).repr(), "Linear(in_features=3, out_features=2, bias=False)");
  EXPECT_EQ(ActivationLayer(Activation::ReLU).repr(), "ReLU()");
  EXPECT_EQ(ActivationLayer(Activation::GELU).repr(), "GELU(approximate='none')");
  EXPECT_EQ(ActivationLayer(Activation::GELUTanh).repr(), "GELU(approximate='tanh')");
  EXPECT_EQ(ActivationLayer(Activation::Tanh).repr(), "Tanh()");
  EXPECT_EQ(ActivationLayer(Activation::Sigmoid).repr(), "Sigmoid()");

  Sequential seq;
  EXPECT_EQ(seq.repr(), "Sequential()");
  seq.add(std::make_unique<Linear>(3, 2, gen))
      .add(std::make_unique<ActivationLayer>(Activation::ReLU));
  auto inner = std::make_unique<Sequential>();
  inner->add(std::make_unique<Linear>(2, 1, gen, false));
  seq.add(std::move(inner));
  EXPECT_EQ(seq.repr(),
            "Sequential(\n"
            "  (0): Linear(in_features=3, out_features=2, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Sequential(\n"
            "    (0): Linear(in_features=2, out_features=1, bias=False)\n"
            "  )\n"
            ")");
  EXPECT_EQ(seq.named_parameters().back().first, "2.0.weight");  // nested names, torch's rule
}

}  // namespace
}  // namespace minitrain
