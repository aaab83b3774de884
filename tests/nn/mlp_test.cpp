// MLPs: the "mlp:..." spec, make_mlp's structure, names and init order, agreement of a float32
// model on every device with a float64 CPU copy, and a short training run that learns.

#include "nn/mlp.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/random.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/mse_loss.h"
#include "nn/state_dict.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

TEST(ParseMlpSpec, ReadsTheSizes) {
  EXPECT_EQ(parse_mlp_spec("mlp:3,16,2"), (std::vector<int64_t>{3, 16, 2}));
  EXPECT_EQ(parse_mlp_spec("mlp:1,1"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(parse_mlp_spec("mlp:784,1024,1024,10"), (std::vector<int64_t>{784, 1024, 1024, 10}));
}

TEST(ParseMlpSpec, RejectsMalformedSpecsNamingTheText) {
  for (const char* bad : {"mlp:", "mlp:3", "mlp:3,-1", "mlp:3,x", "foo:3,2", "mlp:3,,2", "mlp:3,2,",
                          "mlp:0,2", "mlp:3, 2", "MLP:3,2", "", "mlp:3,99999999999999999999"}) {
    EXPECT_THROW(parse_mlp_spec(bad), ValueError) << bad;
    EXPECT_THAT(error_message([&] { parse_mlp_spec(bad); }),
                HasSubstr(std::string("'") + bad + "'"));
  }
  EXPECT_THAT(error_message([] { parse_mlp_spec("mlp:3,x"); }), HasSubstr("mlp:IN,H1,...,OUT"));
}

TEST(MakeMlp, LinearActivationAlternationWithTorchNames) {
  Generator gen(1);
  auto model = make_mlp({3, 16, 8, 2}, Activation::GELUTanh, gen);
  ASSERT_EQ(model->size(), 5u);
  EXPECT_EQ(model->repr(),
            "Sequential(\n"
            "  (0): Linear(in_features=3, out_features=16, bias=True)\n"
            "  (1): GELU(approximate='tanh')\n"
            "  (2): Linear(in_features=16, out_features=8, bias=True)\n"
            "  (3): GELU(approximate='tanh')\n"
            "  (4): Linear(in_features=8, out_features=2, bias=True)\n"
            ")");
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (auto& [name, p] : model->named_parameters()) {
    names.push_back(name);
    shapes.push_back(p->value.shape());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                             "4.bias"}));
  EXPECT_EQ(shapes, (std::vector<Shape>{{16, 3}, {16}, {8, 16}, {8}, {2, 8}, {2}}));
  EXPECT_EQ(model->num_parameters(), 16 * 3 + 16 + 8 * 16 + 8 + 2 * 8 + 2);
  EXPECT_THROW(make_mlp({3}, Activation::ReLU, gen), ValueError);
  EXPECT_THROW(make_mlp({3, 0, 2}, Activation::ReLU, gen), ValueError);
}

TEST(MakeMlp, InitialisesLayerByLayerWeightThenBias) {
  Generator gen(77), manual(77);
  auto model = make_mlp({5, 4, 3}, Activation::ReLU, gen);
  for (auto& [name, p] : model->named_parameters()) {
    Tensor want = Tensor::empty(p->value.shape());
    if (p->value.ndim() == 2) {
      kaiming_uniform_(want, manual);
    } else {
      linear_bias_uniform_(want, name[0] == '0' ? 5 : 4, manual);
    }
    EXPECT_EQ(host_values(p->value), host_values(want)) << name;
  }
  EXPECT_EQ(gen.offset(), manual.offset());
  Generator again(77);
  EXPECT_EQ(state_dict(*make_mlp({5, 4, 3}, Activation::ReLU, again))[2].second.to_vector<float>(),
            model->named_parameters()[2].second->value.to_vector<float>());
}

TEST(MakeMlp, SkippingInputGradReachesTheFirstLinearOnly) {
  Generator g1(3), g2(3);
  auto with = make_mlp({6, 5, 4, 2}, Activation::Sigmoid, g1);
  auto without = make_mlp({6, 5, 4, 2}, Activation::Sigmoid, g2);
  without->set_needs_input_grad(false);
  EXPECT_FALSE((*without)[0].needs_input_grad());
  EXPECT_TRUE((*without)[1].needs_input_grad());
  EXPECT_TRUE((*without)[2].needs_input_grad());
  const Tensor x = random_tensor(Shape{9, 6}, 1), dy = random_tensor(Shape{9, 2}, 2);
  with->forward(x);
  without->forward(x);
  EXPECT_TRUE(with->backward(dy).defined());
  EXPECT_FALSE(without->backward(dy).defined());
  auto pw = with->named_parameters(), pwo = without->named_parameters();
  for (size_t i = 0; i < pw.size(); ++i)
    EXPECT_EQ(host_values(pw[i].second->grad), host_values(pwo[i].second->grad)) << pw[i].first;
  without->set_needs_input_grad(true);
  without->forward(x);
  EXPECT_TRUE(without->backward(dy).defined());
}

// A float32 model on the device against a float64 copy of it on the CPU: forward, dx and every
// parameter gradient agree within float32 rounding.
class MlpOnDevice : public testing::DeviceTest {};

TEST_P(MlpOnDevice, AgreesWithFloat64CpuCopy) {
  for (Activation act : {Activation::ReLU, Activation::GELU, Activation::Tanh}) {
    Generator gen(21);
    auto model = make_mlp({7, 6, 5, 3}, act, gen, device());
    Generator unused(0);
    auto ref = make_mlp({7, 6, 5, 3}, act, unused, Device::cpu(), DType::Float64);
    load_state_dict(*ref, state_dict(*model));

    const Tensor x = random_tensor(Shape{5, 7}, 22, device());
    const Tensor dy = random_tensor(Shape{5, 3}, 23, device());
    const Tensor y = model->forward(x);
    const Tensor dx = model->backward(dy);
    const Tensor y_ref = ref->forward(cast(x.to(Device::cpu()), DType::Float64));
    const Tensor dx_ref = ref->backward(cast(dy.to(Device::cpu()), DType::Float64));
    ASSERT_GT(host_max_abs(y), 0.0);
    EXPECT_ALLCLOSE(host_values(y), host_values(y_ref), 1e-6, 1e-5) << activation_name(act);
    EXPECT_ALLCLOSE(host_values(dx), host_values(dx_ref), 1e-6, 1e-5) << activation_name(act);
    auto got = model->named_parameters(), want = ref->named_parameters();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].second->grad.device(), device());
      EXPECT_ALLCLOSE(host_values(got[i].second->grad), host_values(want[i].second->grad), 1e-6,
                      1e-5)
          << got[i].first;
    }
  }
}

TEST_P(MlpOnDevice, ManualSgdOnASmoothTargetLearns) {
  // y = sin(x0) + x1 * x2 on 64 fixed points; 150 full-batch SGD steps at lr 0.25 must cut the
  // loss 10x (they cut it 16.7x on the CPU; each step is a dozen launches on emulated GPUs).
  const int64_t n = 64;
  const std::vector<double> xs = testing::random_doubles(n * 3, 31);
  std::vector<float> xf(xs.begin(), xs.end()), yf(n);
  for (int64_t i = 0; i < n; ++i)
    yf[i] = float(std::sin(xs[i * 3]) + xs[i * 3 + 1] * xs[i * 3 + 2]);
  const Tensor x = Tensor::from_vector(xf, Shape{n, 3}, device());
  const Tensor y = Tensor::from_vector(yf, Shape{n, 1}, device());
  Generator gen(32);
  auto model = make_mlp({3, 32, 32, 1}, Activation::Tanh, gen, device());
  MSELoss loss_fn;
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    model->zero_grad();
    const double loss = loss_fn.forward(model->forward(x), y).item();
    model->backward(loss_fn.backward());
    for (auto& [name, p] : model->named_parameters()) axpy(p->value, -0.25, p->grad);
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, first / 10) << "first " << first << ", last " << last;
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MlpOnDevice);

}  // namespace
}  // namespace minitrain
