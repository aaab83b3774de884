// The elementwise losses (l1, smooth_l1, huber, bce_with_logits, kl_div, poisson_nll): forward
// for each reduction and backward against plain double loops, finite differences, the fused call
// against forward + backward bit for bit, CUDA against the CPU, and bad input, on every device.

#include "kernels/loss/pointwise_loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/kernels/loss_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::central_differences;
using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::kAllReductions;
using testing::loss_total;
using testing::random_tensor;
using testing::tensor_of;

// One configuration under test: the loss, its setting, and pos_weight's host values (bce).
struct Case {
  PointwiseLossKind kind;
  double param;
  bool pos_weight;
  std::string label() const {
    return std::string(pointwise_loss_name(kind)) + "(" + std::to_string(param) +
           (pos_weight ? ", pos_weight)" : ")");
  }
};
const Case kCases[] = {
    {PointwiseLossKind::L1, 0, false},
    {PointwiseLossKind::SmoothL1, 1.0, false},
    {PointwiseLossKind::SmoothL1, 0.5, false},
    {PointwiseLossKind::SmoothL1, 0.0, false},
    {PointwiseLossKind::Huber, 1.0, false},
    {PointwiseLossKind::Huber, 0.7, false},
    {PointwiseLossKind::BceWithLogits, 0, false},
    {PointwiseLossKind::BceWithLogits, 0, true},
    {PointwiseLossKind::KlDiv, 0, false},       // target: probabilities, every fifth exactly 0
    {PointwiseLossKind::KlDiv, 1, false},       // log_target: target log-probabilities
    {PointwiseLossKind::PoissonNll, 1, false},  // log_input: pred the log of the rate
    {PointwiseLossKind::PoissonNll, 0, false},  // pred the rate itself, > 0
};

// ---- the double reference, written from torch's documented formulas ----
double ref_loss(const Case& c, double p, double t, double pw) {
  const double d = p - t, z = std::fabs(d);
  switch (c.kind) {
    case PointwiseLossKind::L1:
      return z;
    case PointwiseLossKind::SmoothL1:
      if (c.param == 0) return z;
      return z < c.param ? 0.5 * d * d / c.param : z - 0.5 * c.param;
    case PointwiseLossKind::Huber:
      return z < c.param ? 0.5 * d * d : c.param * (z - 0.5 * c.param);
    case PointwiseLossKind::BceWithLogits: {
      // -[pw t log s(x) + (1 - t) log(1 - s(x))], the textbook form (fine for |x| <= 3)
      const double s = 1 / (1 + std::exp(-p));
      return -(pw * t * std::log(s) + (1 - t) * std::log(1 - s));
    }
    case PointwiseLossKind::KlDiv:  // torch.nn.KLDivLoss: t (log t - x), 0 for t == 0
      if (c.param != 0) return std::exp(t) * (t - p);
      return t == 0 ? 0.0 : t * (std::log(t) - p);
    case PointwiseLossKind::PoissonNll:  // torch.nn.PoissonNLLLoss (full=False, eps=1e-8)
      return c.param != 0 ? std::exp(p) - t * p : p - t * std::log(p + 1e-8);
  }
  return 0;
}
double ref_derivative(const Case& c, double p, double t, double pw) {
  const double d = p - t;
  const double sign = d > 0 ? 1 : (d < 0 ? -1 : 0);
  switch (c.kind) {
    case PointwiseLossKind::L1:
      return sign;
    case PointwiseLossKind::SmoothL1:
      if (c.param == 0) return sign;
      return std::fabs(d) < c.param ? d / c.param : sign;
    case PointwiseLossKind::Huber:
      return std::fabs(d) < c.param ? d : c.param * sign;
    case PointwiseLossKind::BceWithLogits: {
      const double s = 1 / (1 + std::exp(-p));
      return -pw * t * (1 - s) + (1 - t) * s;
    }
    case PointwiseLossKind::KlDiv:
      return c.param != 0 ? -std::exp(t) : -t;
    case PointwiseLossKind::PoissonNll:
      return c.param != 0 ? std::exp(p) - t : 1 - t / (p + 1e-8);
  }
  return 0;
}

// Inputs for a case: pred in [-3, 3] (both sides of every kink), target in [-3, 3] or, for bce,
// a probability in [0, 1]; pos_weight in [0.5, 3] per column. kl_div: pred (log-probabilities)
// in [-3, 0], target a probability in [0, 1] with every fifth exactly 0 (torch's xlogy(0, 0) = 0)
// or, with log_target, a log-probability in [-3, 0]. poisson_nll: target a count-like rate in
// [0, 5]; pred in [-3, 3] with log_input, else a rate in [0.1, 3].
struct Inputs {
  Tensor pred, target;
  PointwiseLossSpec spec;
  std::vector<double> pw;  // per column, all 1 without pos_weight
  int64_t cols;
};
Inputs make_inputs(const Case& c, const Shape& shape, uint32_t seed, Device device, DType dtype) {
  Inputs in;
  in.cols = shape.ndim() == 0 ? 1 : shape[shape.ndim() - 1];
  const bool bce = c.kind == PointwiseLossKind::BceWithLogits;
  const bool kl = c.kind == PointwiseLossKind::KlDiv;
  const bool poisson = c.kind == PointwiseLossKind::PoissonNll;
  in.pred =
      random_tensor(shape, seed, device, dtype, poisson && c.param == 0 ? 0.1 : -3, kl ? 0 : 3);
  if (poisson) {
    in.target = random_tensor(shape, seed + 1, device, dtype, 0, 5);
  } else if (kl && c.param == 0) {
    std::vector<double> t = host_values(random_tensor(shape, seed + 1, device, dtype, 0, 1));
    for (size_t i = 2; i < t.size(); i += 5) t[i] = 0;  // from 2: a [1] pred still has a loss
    in.target = tensor_of(t, shape, device, dtype);
  } else {
    in.target = random_tensor(shape, seed + 1, device, dtype, bce || kl ? (kl ? -3 : 0) : -3,
                              bce ? 1 : (kl ? 0 : 3));
  }
  in.spec = PointwiseLossSpec(c.kind, c.param);
  in.pw.assign(size_t(in.cols), 1.0);
  if (c.pos_weight) {
    in.spec = in.spec.with_pos_weight(random_tensor({in.cols}, seed + 2, device, dtype, 0.5, 3));
    in.pw = host_values(in.spec.pos_weight());
  }
  return in;
}

class PointwiseLossTest : public testing::DeviceTest {};

const Shape kShapes[] = {{1}, {7, 3}, {37, 5}, {testing::kLargeSize / 16 + 1, 16}};

TEST_P(PointwiseLossTest, ForwardMatchesReferenceOnOddSizesForEachReduction) {
  for (const Case& c : kCases)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const Shape& shape : kShapes) {
        if (testing::over_size_cap(shape.numel())) continue;
        const Inputs in = make_inputs(c, shape, 11, device(), dtype);
        const std::vector<double> p = host_values(in.pred), t = host_values(in.target);
        std::vector<double> want(p.size());
        double sum = 0;
        for (size_t i = 0; i < p.size(); ++i) {
          want[i] = ref_loss(c, p[i], t[i], in.pw[i % size_t(in.cols)]);
          sum += want[i];
        }
        // float: the per-element loss is a few roundings in float (log1p/exp to an ulp or two),
        // each ~6e-8 relative; every term is >= 0, so the double sum keeps that relative bound
        const double rtol = dtype == DType::Float32 ? 2e-6 : 1e-12;
        const double atol = dtype == DType::Float32 ? 1e-6 : 1e-13;
        Tensor none = pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::None);
        ASSERT_EQ(none.shape(), shape);
        ASSERT_GT(host_max_abs(none), 0.0);
        EXPECT_ALLCLOSE(host_values(none), want, atol, rtol) << c.label() << " " << shape;
        Tensor s = pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::Sum);
        Tensor m = pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::Mean);
        ASSERT_EQ(s.ndim(), 0);
        EXPECT_ALLCLOSE(host_values(s), std::vector<double>{sum}, 0.0, rtol) << c.label();
        EXPECT_ALLCLOSE(host_values(m), std::vector<double>{sum / double(p.size())}, 0.0, rtol)
            << c.label() << " " << shape;
      }
}

TEST_P(PointwiseLossTest, BackwardMatchesReferenceForEachReduction) {
  for (const Case& c : kCases)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const Shape& shape : {Shape{1}, Shape{7, 3}, Shape{37, 5}}) {
        const Inputs in = make_inputs(c, shape, 21, device(), dtype);
        const std::vector<double> p = host_values(in.pred), t = host_values(in.target);
        Tensor g_each = random_tensor(shape, 23, device(), dtype, 0.5, 1.5);
        Tensor g_scalar = tensor_of({0.75}, {}, device(), dtype);
        const std::vector<double> ge = host_values(g_each);
        for (Reduction r : kAllReductions) {
          const double norm = r == Reduction::Mean ? 1.0 / double(p.size()) : 1.0;
          std::vector<double> want(p.size());
          for (size_t i = 0; i < p.size(); ++i)
            want[i] = norm * ref_derivative(c, p[i], t[i], in.pw[i % size_t(in.cols)]) *
                      (r == Reduction::None ? ge[i] : 0.75);
          Tensor grad = pointwise_loss_backward(r == Reduction::None ? g_each : g_scalar, in.pred,
                                                in.target, in.spec, r);
          ASSERT_GT(host_max_abs(grad), 0.0);
          const double rtol = dtype == DType::Float32 ? 2e-6 : 1e-12;
          EXPECT_ALLCLOSE(host_values(grad), want, 1e-7 * norm, rtol)
              << c.label() << " " << reduction_name(r) << " " << shape;
        }
      }
}

TEST_P(PointwiseLossTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const Shape shape{3, 4};
  for (const Case& c : kCases) {
    const Inputs in = make_inputs(c, shape, 31, device(), DType::Float64);
    const std::vector<double> p = host_values(in.pred);
    Tensor g_each = random_tensor(shape, 33, device(), DType::Float64, 0.5, 1.5);
    const std::vector<double> ge = host_values(g_each);
    const double h = 1e-6;
    for (Reduction r : kAllReductions) {
      // for none, differentiate sum_i g_i loss_i
      const std::vector<double> want = central_differences(
          [&](const std::vector<double>& x) {
            return loss_total(pointwise_loss_forward(Tensor::from_vector(x, shape, device()),
                                                     in.target, in.spec, r),
                              ge);
          },
          p, h);
      Tensor g = r == Reduction::None ? g_each : tensor_of({1.0}, {}, device(), DType::Float64);
      Tensor grad = pointwise_loss_backward(g, in.pred, in.target, in.spec, r);
      ASSERT_GT(host_max_abs(grad), 0.0);
      // truncation h^2 * f''' (smooth here: no element sits within h of a kink) plus rounding
      // eps * loss / h ~ 1e-9
      EXPECT_ALLCLOSE(host_values(grad), want, 1e-7, 1e-6) << c.label() << " " << reduction_name(r);
    }
  }
}

TEST_P(PointwiseLossTest, FusedEqualsForwardThenBackwardBitForBit) {
  for (const Case& c : kCases)
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const Shape& shape : kShapes) {
        if (testing::over_size_cap(shape.numel())) continue;
        const Inputs in = make_inputs(c, shape, 41, device(), dtype);
        for (Reduction r : kAllReductions) {
          const Shape loss_shape = r == Reduction::None ? shape : Shape{};
          Tensor ones = Tensor::empty(loss_shape, dtype, device());
          ones.copy_(tensor_of(std::vector<double>(size_t(loss_shape.numel()), 1.0), loss_shape,
                               Device::cpu(), dtype));
          Tensor loss = Tensor::empty(loss_shape, dtype, device());
          Tensor grad = Tensor::empty(shape, dtype, device());
          pointwise_loss_forward_backward(loss, grad, in.pred, in.target, in.spec, r);
          EXPECT_EQ(host_values(loss),
                    host_values(pointwise_loss_forward(in.pred, in.target, in.spec, r)))
              << c.label() << " " << reduction_name(r) << " " << shape;
          EXPECT_EQ(host_values(grad),
                    host_values(pointwise_loss_backward(ones, in.pred, in.target, in.spec, r)))
              << c.label() << " " << reduction_name(r) << " " << shape;
        }
      }
}

TEST_P(PointwiseLossTest, DeviceMatchesCpuWithinFloatRounding) {
  for (const Case& c : kCases)
    for (const Shape& shape : kShapes) {
      if (testing::over_size_cap(shape.numel())) continue;
      const Inputs in = make_inputs(c, shape, 51, device(), DType::Float32);
      const Inputs cpu = make_inputs(c, shape, 51, Device::cpu(), DType::Float32);
      for (Reduction r : kAllReductions) {
        const Shape loss_shape = r == Reduction::None ? shape : Shape{};
        Tensor loss = Tensor::empty(loss_shape, DType::Float32, device());
        Tensor grad = Tensor::empty(shape, DType::Float32, device());
        pointwise_loss_forward_backward(loss, grad, in.pred, in.target, in.spec, r);
        Tensor loss_cpu = Tensor::empty(loss_shape);
        Tensor grad_cpu = Tensor::empty(shape);
        pointwise_loss_forward_backward(loss_cpu, grad_cpu, cpu.pred, cpu.target, cpu.spec, r);
        // the same float math per element (device exp/log1p within an ulp or two of the host's);
        // sums in double in another order: far below float rounding
        EXPECT_ALLCLOSE(host_values(loss), host_values(loss_cpu), 1e-7, 1e-6)
            << c.label() << " " << reduction_name(r);
        EXPECT_ALLCLOSE(host_values(grad), host_values(grad_cpu), 1e-8, 1e-6)
            << c.label() << " " << reduction_name(r);
      }
    }
}

TEST_P(PointwiseLossTest, BceWithLogitsStaysFiniteForLogitsOf1000) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // loss (1 - t) x - log_sigmoid(x), log_sigmoid(x) = min(x, 0) - log1p(e^-|x|), e^-1000 = 0:
    //   x = 1000, t = 1:   -log_sigmoid(1000) = 0
    //   x = -1000, t = 1:  -log_sigmoid(-1000) = 1000
    //   x = 1000, t = 0:   1000 - log_sigmoid(1000) = 1000
    //   x = -1000, t = 0:  -1000 - log_sigmoid(-1000) = 0
    // (the naive -log(1 - sigmoid(1000)) would be inf)
    Tensor x = tensor_of({1000, -1000, 1000, -1000}, {4}, device(), dtype);
    Tensor t = tensor_of({1, 1, 0, 0}, {4}, device(), dtype);
    const PointwiseLossSpec spec{PointwiseLossKind::BceWithLogits, 0, Tensor()};
    EXPECT_EQ(host_values(pointwise_loss_forward(x, t, spec, Reduction::None)),
              (std::vector<double>{0, 1000, 1000, 0}));
    // derivative sigmoid(x) - t: 0, -1, 1, 0 (exactly, in both types)
    EXPECT_EQ(host_values(pointwise_loss_backward(tensor_of({1.0}, {}, device(), dtype), x, t, spec,
                                                  Reduction::Sum)),
              (std::vector<double>{0, -1, 1, 0}));
  }
}

TEST_P(PointwiseLossTest, MeanOfNoElementsIsNaNAndSumIsZero) {
  Tensor p = Tensor::zeros({0}, DType::Float32, device());
  for (const Case& c : kCases) {
    if (c.pos_weight) continue;
    const PointwiseLossSpec spec{c.kind, c.param, Tensor()};
    EXPECT_TRUE(std::isnan(pointwise_loss_forward(p, p, spec, Reduction::Mean).item()));
    EXPECT_EQ(pointwise_loss_forward(p, p, spec, Reduction::Sum).item(), 0.0);
  }
}

TEST_P(PointwiseLossTest, RejectsMismatchedOperandsAndBadSettings) {
  Tensor p = Tensor::zeros({4, 2}, DType::Float32, device());
  Tensor t = Tensor::zeros({2, 4}, DType::Float32, device());
  const PointwiseLossSpec l1{PointwiseLossKind::L1, 0, Tensor()};
  const std::string shape_msg = error_message([&] { pointwise_loss_forward(p, t, l1); });
  EXPECT_THAT(shape_msg, HasSubstr("[4, 2]"));
  EXPECT_THAT(shape_msg, HasSubstr("[2, 4]"));
  EXPECT_THROW(pointwise_loss_forward(p, t, l1), ShapeError);
  EXPECT_THROW(pointwise_loss_forward(p, Tensor::zeros({4, 2}, DType::Float64, device()), l1),
               DTypeError);
  // A setting out of range cannot reach a kernel: the spec's constructor is its one check.
  EXPECT_THROW(PointwiseLossSpec(PointwiseLossKind::SmoothL1, -0.5), ValueError);
  EXPECT_THAT(error_message([&] { PointwiseLossSpec(PointwiseLossKind::SmoothL1, -0.5); }),
              HasSubstr("smooth_l1: beta must be finite and >= 0 but is -0.5"));
  EXPECT_THROW(PointwiseLossSpec(PointwiseLossKind::Huber, 0), ValueError);
  const PointwiseLossSpec pw3{PointwiseLossKind::BceWithLogits, 0,
                              Tensor::zeros({3}, DType::Float32, device())};
  EXPECT_THROW(pointwise_loss_forward(p, p, pw3), ShapeError);
  EXPECT_THAT(error_message([&] { pointwise_loss_forward(p, p, pw3); }), HasSubstr("[3]"));
  const PointwiseLossSpec pw_l1{PointwiseLossKind::L1, 0,
                                Tensor::zeros({2}, DType::Float32, device())};
  EXPECT_THROW(pointwise_loss_forward(p, p, pw_l1), ValueError);
  Tensor not_scalar = Tensor::zeros({1}, DType::Float32, device());
  EXPECT_THROW(pointwise_loss_backward(not_scalar, p, p, l1, Reduction::Sum), ShapeError);
}

// torch's reduction='batchmean' (KLDivLoss's), taken by every pointwise loss: the sum over the
// first extent, in the loss and in its gradient, fused or not; a 0-d pred's batchmean is its sum
// (torch divides only for dim > 0).
TEST_P(PointwiseLossTest, BatchMeanDividesByTheFirstExtentForEveryLoss) {
  for (const Case& c : kCases) {
    for (const Shape& shape : {Shape{7, 3}, Shape{5}, Shape{3, 2, 4}}) {
      const Inputs in = make_inputs(c, shape, 61, device(), DType::Float64);
      const double sum = pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::Sum).item();
      const double batch = double(shape[0]);
      EXPECT_DOUBLE_EQ(
          pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::BatchMean).item(),
          sum / batch)
          << c.label() << " " << shape;
      Tensor one = tensor_of({1.0}, {}, device(), DType::Float64);
      const std::vector<double> g_sum =
          host_values(pointwise_loss_backward(one, in.pred, in.target, in.spec, Reduction::Sum));
      std::vector<double> want;
      for (double g : g_sum) want.push_back(g / batch);
      EXPECT_ALLCLOSE(host_values(pointwise_loss_backward(one, in.pred, in.target, in.spec,
                                                          Reduction::BatchMean)),
                      want, 1e-15, 1e-14)
          << c.label() << " " << shape;
      Tensor loss = Tensor::empty({}, DType::Float64, device());
      Tensor grad = Tensor::empty(shape, DType::Float64, device());
      pointwise_loss_forward_backward(loss, grad, in.pred, in.target, in.spec,
                                      Reduction::BatchMean);
      EXPECT_EQ(loss.item(),
                pointwise_loss_forward(in.pred, in.target, in.spec, Reduction::BatchMean).item());
      EXPECT_EQ(host_values(grad), host_values(pointwise_loss_backward(
                                       one, in.pred, in.target, in.spec, Reduction::BatchMean)));
    }
    const Inputs scalar = make_inputs(c, Shape{}, 71, device(), DType::Float64);
    EXPECT_EQ(
        pointwise_loss_forward(scalar.pred, scalar.target, scalar.spec, Reduction::BatchMean)
            .item(),
        pointwise_loss_forward(scalar.pred, scalar.target, scalar.spec, Reduction::Sum).item());
  }
}

TEST_P(PointwiseLossTest, KlDivZeroTargetAddsNothingAndBoolSettingsAreZeroOrOne) {
  // torch: xlogy(0, 0) - 0 * x = 0 for any finite x; a NaN target gives NaN (xlogy's rule)
  Tensor x = tensor_of({-0.5, -2.0, -1.0}, {3}, device(), DType::Float32);
  Tensor t = tensor_of({0.0, 0.0, double(NAN)}, {3}, device(), DType::Float32);
  const PointwiseLossSpec kl{PointwiseLossKind::KlDiv, 0, Tensor()};
  const std::vector<double> loss = host_values(pointwise_loss_forward(x, t, kl, Reduction::None));
  EXPECT_EQ(loss[0], 0.0);
  EXPECT_EQ(loss[1], 0.0);
  EXPECT_TRUE(std::isnan(loss[2]));
  EXPECT_THAT(error_message([&] { PointwiseLossSpec(PointwiseLossKind::KlDiv, 0.5); }),
              HasSubstr("log_target must be 0 or 1 but is 0.5"));
  EXPECT_THAT(error_message([&] { PointwiseLossSpec(PointwiseLossKind::PoissonNll, 2); }),
              HasSubstr("poisson_nll: log_input must be 0 or 1 but is 2"));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(PointwiseLossTest);

}  // namespace
}  // namespace minitrain
