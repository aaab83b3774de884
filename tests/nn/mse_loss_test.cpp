// MSELoss: values for each reduction, the gradient it starts backward with, and its errors.

#include "nn/mse_loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_values;

class MseLossOnDevice : public testing::DeviceTest {};

TEST_P(MseLossOnDevice, ValuesAndGradientsForEachReduction) {
  // differences 1, 0, -2, 0.5: squares 1, 0, 4, 0.25 (exact in float32)
  const Tensor pred = Tensor::from_vector(std::vector<float>{1, 2, 3, 4.5f}, Shape{2, 2}, device());
  const Tensor target = Tensor::from_vector(std::vector<float>{0, 2, 5, 4}, Shape{2, 2}, device());

  MSELoss mean_loss;  // the default, as torch's
  EXPECT_EQ(mean_loss.reduction(), Reduction::Mean);
  const Tensor m = mean_loss.forward(pred, target);
  EXPECT_EQ(m.ndim(), 0);
  EXPECT_EQ(m.item(), 5.25 / 4);
  EXPECT_EQ(host_values(mean_loss.backward()), (std::vector<double>{0.5, 0, -1, 0.25}));

  MSELoss sum_loss(Reduction::Sum);
  EXPECT_EQ(sum_loss.forward(pred, target).item(), 5.25);
  EXPECT_EQ(host_values(sum_loss.backward()), (std::vector<double>{2, 0, -4, 1}));

  MSELoss none_loss(Reduction::None);
  const Tensor per = none_loss.forward(pred, target);
  EXPECT_EQ(per.shape(), pred.shape());
  EXPECT_EQ(host_values(per), (std::vector<double>{1, 0, 4, 0.25}));
  const Tensor g = none_loss.backward();
  EXPECT_EQ(g.device(), device());
  EXPECT_EQ(host_values(g), (std::vector<double>{2, 0, -4, 1}));
  EXPECT_EQ(host_values(none_loss.backward()), host_values(g));  // repeatable
}

// The training step's call runs the fused kernel: the loss and the gradient are forward's and
// backward's, bit for bit, for each reduction (70,007 elements: several 16K-element chunks and
// several CUDA blocks, with a tail).
TEST_P(MseLossOnDevice, ForwardBackwardIsTheFusedPairBitForBit) {
  const int64_t n = 70007;
  std::vector<float> p(n), t(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.37f * float(i)) * 3.0f;
    t[i] = std::cos(0.11f * float(i)) + 0.001f * float(i % 97);
  }
  const Tensor pred = Tensor::from_vector(p, Shape{n / 7, 7}, device());
  const Tensor target = Tensor::from_vector(t, Shape{n / 7, 7}, device());
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    SCOPED_TRACE(reduction_name(r));
    std::unique_ptr<Loss> fused = make_loss({"mse", r});
    MSELoss apart(r);
    const Tensor want_loss = apart.forward(pred, target);
    const Tensor want_grad = apart.backward();
    Tensor grad;
    const Tensor loss = fused->forward_backward(pred, target, grad);
    EXPECT_EQ(loss.shape(), want_loss.shape());
    EXPECT_EQ(grad.device(), device());
    EXPECT_EQ(host_values(loss), host_values(want_loss));
    EXPECT_EQ(host_values(grad), host_values(want_grad));
    // backward after forward_backward gives the same gradient again
    EXPECT_EQ(host_values(fused->backward()), host_values(want_grad));
  }
  // batchmean, a Reduction of its own: the sum over the first extent (n / 7 rows), fused or not
  std::unique_ptr<Loss> batchmean = make_loss({"mse", Reduction::BatchMean});
  MSELoss sum(Reduction::Sum);
  const double rows = double(n / 7);
  Tensor grad;
  const Tensor loss = batchmean->forward_backward(pred, target, grad);
  // float32: the sum rounded to float once, then divided (batchmean rounds the quotient once)
  const double want_loss = sum.forward(pred, target).item() / rows;
  EXPECT_NEAR(loss.item(), want_loss, 1e-6 * std::fabs(want_loss));
  std::vector<double> want_grad = host_values(sum.backward());
  for (double& g : want_grad) g /= rows;
  EXPECT_ALLCLOSE(host_values(grad), want_grad, 1e-7, 1e-6);
  EXPECT_EQ(host_values(batchmean->backward()), host_values(grad));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MseLossOnDevice);

TEST(MseLossErrors, ShapeMismatchAndBackwardBeforeForward) {
  MSELoss loss;
  EXPECT_THROW(loss.backward(), Error);
  EXPECT_THAT(error_message([&] { loss.backward(); }), HasSubstr("backward called before forward"));
  const Tensor a = Tensor::zeros(Shape{32, 2}), b = Tensor::zeros(Shape{32, 3});
  EXPECT_THROW(loss.forward(a, b), ShapeError);
  EXPECT_THAT(error_message([&] { loss.forward(a, b); }),
              HasSubstr("mse_loss: pred [32, 2] and target [32, 3] differ in shape"));
}

TEST(MseLossErrors, BackwardFollowsTheLatestForward) {
  MSELoss loss(Reduction::Sum);
  loss.forward(Tensor::from_vector(std::vector<double>{3}, Shape{1, 1}),
               Tensor::from_vector(std::vector<double>{1}, Shape{1, 1}));
  EXPECT_EQ(host_values(loss.backward()), (std::vector<double>{4}));
  loss.forward(Tensor::from_vector(std::vector<double>{1, 2}, Shape{2, 1}),
               Tensor::from_vector(std::vector<double>{2, 2}, Shape{2, 1}));
  EXPECT_EQ(host_values(loss.backward()), (std::vector<double>{-2, 0}));
}

}  // namespace
}  // namespace minitrain
