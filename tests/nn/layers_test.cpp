// Linear and activation layers: results against naive host references on every device, PyTorch's
// init (bounds, order, determinism), gradient accumulation, zero_grad, train/eval, errors, repr.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/random.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "tests/support/test_util.h"

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

MT_INSTANTIATE_DEVICE_TEST_SUITE(LinearOnDevice);

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
