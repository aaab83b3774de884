// Activations: forward against double references, backward against the closed-form derivative
// and against central finite differences of the forward op in float64, on every device.

#include "kernels/activation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/cast.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_doubles;
using testing::random_tensor;

const Activation kAll[] = {Activation::ReLU, Activation::GELU, Activation::GELUTanh,
                           Activation::Tanh, Activation::Sigmoid};
const int64_t kSizes[] = {1, 7, 1000, testing::kLargeSize};

// ---- double references, written from the textbook formulas (not from activation_math.h) ----

constexpr double kPi = 3.14159265358979323846;

double ref_forward(Activation a, double x) {
  const double k = std::sqrt(2.0 / kPi), kappa = 0.044715;
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? x : 0.0;
    case Activation::GELU:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::GELUTanh:
      return 0.5 * x * (1 + std::tanh(k * (x + kappa * x * x * x)));
    case Activation::Tanh:
      return std::tanh(x);
    case Activation::Sigmoid:
      return 1 / (1 + std::exp(-x));
  }
  return 0;
}

double ref_derivative(Activation a, double x) {
  const double k = std::sqrt(2.0 / kPi), kappa = 0.044715;
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? 1.0 : 0.0;
    case Activation::GELU:  // Phi(x) + x phi(x)
      return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2 * kPi);
    case Activation::GELUTanh: {
      const double u = k * (x + kappa * x * x * x), t = std::tanh(u);
      return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * kappa * x * x);
    }
    case Activation::Tanh:
      return 1 - std::tanh(x) * std::tanh(x);
    case Activation::Sigmoid: {
      const double s = 1 / (1 + std::exp(-x));
      return s * (1 - s);
    }
  }
  return 0;
}

// float: erf/tanh/exp are within 2 ulp on the CPU and the GPU and a formula chains a few such
// steps, so a few ulps (1.2e-7 each) relative; near saturation (1 + erf) and (1 - tanh^2) cancel,
// which costs an ulp of 1 times |x| <= 5 in absolute terms. double: the same, 1e9 times smaller.
double atol_for(DType d) { return d == DType::Float32 ? 2e-6 : 2e-15; }
double rtol_for(DType d) { return d == DType::Float32 ? 2e-6 : 2e-15; }

double max_abs_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

class ActivationTest : public testing::DeviceTest {};

TEST_P(ActivationTest, ForwardMatchesReferenceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Activation a : kAll)
      for (int64_t n : kSizes) {
        if (testing::over_size_cap(n)) continue;
        Tensor x = random_tensor({n}, 21, device(), dtype, -5.0, 5.0);  // into saturation
        std::vector<double> want = host_values(x);
        for (double& v : want) v = ref_forward(a, v);
        Tensor y = activation_forward(x, a);
        // not silently zero (relu of a single negative input is legitimately zero)
        ASSERT_EQ(host_max_abs(y) > 0, max_abs_of(want) > 0) << activation_name(a) << " n=" << n;
        EXPECT_ALLCLOSE(host_values(y), want, atol_for(dtype), rtol_for(dtype))
            << activation_name(a) << " " << dtype << " n=" << n;
      }
}

TEST_P(ActivationTest, BackwardMatchesClosedFormOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Activation a : kAll)
      for (int64_t n : kSizes) {
        if (testing::over_size_cap(n)) continue;
        Tensor x = random_tensor({n}, 22, device(), dtype, -5.0, 5.0);
        Tensor g = random_tensor({n}, 23, device(), dtype);
        const std::vector<double> xv = host_values(x), gv = host_values(g);
        std::vector<double> want(xv.size());
        for (size_t i = 0; i < xv.size(); ++i) want[i] = gv[i] * ref_derivative(a, xv[i]);
        Tensor dx = activation_backward(g, x, a);
        ASSERT_EQ(host_max_abs(dx) > 0, max_abs_of(want) > 0) << activation_name(a) << " n=" << n;
        EXPECT_ALLCLOSE(host_values(dx), want, atol_for(dtype), rtol_for(dtype))
            << activation_name(a) << " " << dtype << " n=" << n;
      }
}

TEST_P(ActivationTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const int64_t n = 1000;
  std::vector<double> xv = random_doubles(n, 24, -3.0, 3.0);
  for (double& v : xv)
    if (std::fabs(v) < 1e-3) v += 0.01;  // keep relu's kink out of reach of the +-h probes
  const double h = 1e-6;
  std::vector<double> plus(xv), minus(xv);
  for (size_t i = 0; i < xv.size(); ++i) {
    plus[i] += h;
    minus[i] -= h;
  }
  Tensor x = Tensor::from_vector(xv, {n}, device());
  Tensor xp = Tensor::from_vector(plus, {n}, device());
  Tensor xm = Tensor::from_vector(minus, {n}, device());
  Tensor g = random_tensor({n}, 25, device(), DType::Float64);
  const std::vector<double> gv = host_values(g);
  for (Activation a : kAll) {
    const std::vector<double> fp = host_values(activation_forward(xp, a));
    const std::vector<double> fm = host_values(activation_forward(xm, a));
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = gv[i] * (fp[i] - fm[i]) / (2 * h);
    Tensor dx = activation_backward(g, x, a);
    ASSERT_GT(host_max_abs(dx), 0.0);
    // central differences: truncation h^2 |f'''| / 6 ~ 1e-12, rounding eps |f| / h ~ 1e-9
    EXPECT_ALLCLOSE(host_values(dx), want, 1e-8, 1e-7) << activation_name(a);
  }
}

TEST_P(ActivationTest, MatchesTorchAtKnownPoints) {
  Tensor x = Tensor::from_vector(std::vector<double>{1.0, -1.0, 0.0, -2.0}, {4}, device());
  // the defining formulas evaluated in float64 (Python's math module), which torch's float64
  // GELU(), GELU(approximate='tanh') and sigmoid reproduce to the last bit or two
  EXPECT_ALLCLOSE(
      host_values(activation_forward(x, Activation::GELU)),
      (std::vector<double>{0.8413447460685429, -0.15865525393145707, 0.0, -0.04550026389635842}),
      1e-15, 1e-15);
  const std::vector<double> gt = host_values(activation_forward(x, Activation::GELUTanh));
  EXPECT_NEAR(gt[0], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(gt[1], -0.15880800939172324, 1e-15);
  // relu'(0) = 0, as torch's threshold_backward; relu'(1) = 1
  Tensor ones = Tensor::from_vector(std::vector<double>{1, 1, 1, 1}, {4}, device());
  EXPECT_ALLCLOSE(host_values(activation_backward(ones, x, Activation::ReLU)),
                  (std::vector<double>{1, 0, 0, 0}), 0.0, 0.0);
  Tensor two = Tensor::from_vector(std::vector<double>{2.0}, {1}, device());
  EXPECT_NEAR(host_values(activation_forward(two, Activation::Sigmoid))[0], 0.8807970779778823,
              1e-15);
}

TEST_P(ActivationTest, SigmoidAndTanhStayFiniteForLargeInputs) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    const std::vector<double> big = {-1000.0, -100.0, 100.0, 1000.0};
    Tensor x = dtype == DType::Float32
                   ? Tensor::from_vector(std::vector<float>(big.begin(), big.end()), {4}, device())
                   : Tensor::from_vector(big, {4}, device());
    Tensor g = Tensor::zeros({4}, dtype, device());
    g = activation_forward(g, Activation::Sigmoid);  // 0.5 everywhere: a non-zero gradient
    for (Activation a :
         {Activation::Sigmoid, Activation::Tanh, Activation::GELU, Activation::GELUTanh}) {
      const std::vector<double> y = host_values(activation_forward(x, a));
      const std::vector<double> dx = host_values(activation_backward(g, x, a));
      for (size_t i = 0; i < y.size(); ++i) {
        EXPECT_TRUE(std::isfinite(y[i])) << activation_name(a) << " f(" << big[i] << ")";
        EXPECT_TRUE(std::isfinite(dx[i])) << activation_name(a) << " f'(" << big[i] << ")";
      }
    }
    const std::vector<double> s = host_values(activation_forward(x, Activation::Sigmoid));
    EXPECT_EQ(s[0], 0.0);  // exp(-1000) underflows to 0, not 0/0 or inf/inf
    EXPECT_EQ(s[3], 1.0);
  }
}

TEST_P(ActivationTest, InPlaceForwardAndBackward) {
  Tensor x = random_tensor({1000}, 26, device(), DType::Float64, -3.0, 3.0);
  const std::vector<double> xv = host_values(x);
  Tensor want_y = activation_forward(x, Activation::GELU);
  Tensor g = random_tensor({1000}, 27, device(), DType::Float64);
  Tensor want_dx = activation_backward(g, x, Activation::GELU);
  activation_backward(g, g, x, Activation::GELU);  // grad_x is grad_y
  activation_forward(x, x, Activation::GELU);      // y is x
  ASSERT_GT(host_max_abs(x), 0.0);
  EXPECT_ALLCLOSE(x, want_y, 0.0, 0.0);  // the same computation, so the same bits
  EXPECT_ALLCLOSE(g, want_dx, 0.0, 0.0);
}

TEST_P(ActivationTest, RejectsMismatchedOperands) {
  Tensor x = Tensor::zeros({4, 2}, DType::Float32, device());
  Tensor y = Tensor::zeros({8}, DType::Float32, device());
  try {
    activation_forward(y, x, Activation::ReLU);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("activation_forward"));
    EXPECT_THAT(e.what(), HasSubstr("[8]"));
    EXPECT_THAT(e.what(), HasSubstr("[4, 2]"));
  }
  Tensor g64 = Tensor::zeros({4, 2}, DType::Float64, device());
  EXPECT_THROW(activation_backward(g64, x, Activation::Tanh), DTypeError);
  EXPECT_THROW(activation_forward(Tensor(), Activation::Tanh), Error);
}

// ---- 16-bit storage (mixed precision): torch's bfloat16/float16 kernels ----

// What torch computes for a 16-bit tensor: the float32 function of the widened value, rounded
// once. Built here from the float32 kernel and casts, so it is an independent composition.
std::vector<double> rounded_float32(const Tensor& y32, DType half) {
  return host_values(cast(y32, half));
}

TEST_P(ActivationTest, SixteenBitForwardIsTheFloat32ResultRoundedOnce) {
  for (DType half : {DType::BFloat16, DType::Float16})
    for (Activation a : kAll)
      for (int64_t n : kSizes) {
        if (testing::over_size_cap(n)) continue;
        const Tensor x = cast(random_tensor({n}, 31, device(), DType::Float32, -5.0, 5.0), half);
        const Tensor y = activation_forward(x, a);
        ASSERT_EQ(y.dtype(), half);
        const std::vector<double> want =
            rounded_float32(activation_forward(cast(x, DType::Float32), a), half);
        ASSERT_EQ(host_max_abs(y) > 0, max_abs_of(want) > 0) << activation_name(a) << " n=" << n;
        EXPECT_EQ(host_values(y), want) << activation_name(a) << " " << half << " n=" << n;
      }
}

// relu and both gelus differentiate from the input, as torch does; tanh and sigmoid from the
// 16-bit OUTPUT torch saved (tanh_backward(grad, output) = grad * (1 - y^2), sigmoid's
// grad * (1 - y) * y), which the rounding of y makes another number than f'(x) of the input.
TEST_P(ActivationTest, SixteenBitBackwardIsTorchsFormulaRoundedOnce) {
  for (DType half : {DType::BFloat16, DType::Float16})
    for (Activation a : kAll)
      for (int64_t n : kSizes) {
        if (testing::over_size_cap(n)) continue;
        SCOPED_TRACE(::testing::Message() << activation_name(a) << " " << half << " n=" << n);
        const Tensor x = cast(random_tensor({n}, 32, device(), DType::Float32, -4.0, 4.0), half);
        const Tensor g = cast(random_tensor({n}, 33, device()), half);
        const Tensor dx = activation_backward(g, x, a);
        ASSERT_EQ(dx.dtype(), half);
        const Tensor g32 = cast(g, DType::Float32), x32 = cast(x, DType::Float32);
        const std::vector<double> from_input =
            rounded_float32(activation_backward(g32, x32, a), half);
        if (a != Activation::Tanh && a != Activation::Sigmoid) {
          EXPECT_EQ(host_values(dx), from_input);
          continue;
        }
        // float32 arithmetic on the 16-bit output, in torch's order, then one rounding.
        const std::vector<double> y = host_values(activation_forward(x, a)), gv = host_values(g);
        std::vector<float> want32(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          const float yi = static_cast<float>(y[i]), gi = static_cast<float>(gv[i]);
          want32[i] = a == Activation::Tanh ? gi * (1.0f - yi * yi) : gi * (1.0f - yi) * yi;
        }
        const Tensor want = Tensor::from_vector(want32, {n});
        EXPECT_EQ(host_values(dx), rounded_float32(want, half));
        if (n >= 1000) {  // the output's rounding shows in some elements, or this test is moot
          const std::vector<double> got = host_values(dx);
          std::size_t differ = 0;
          for (std::size_t i = 0; i < got.size(); ++i) differ += got[i] != from_input[i];
          EXPECT_GT(differ, 0u);
        }
      }
}

// A float32 gradient reaching a 16-bit input is refused by the kernel (the layer rounds it first).
TEST_P(ActivationTest, SixteenBitOperandsMustShareTheirType) {
  const Tensor x = cast(random_tensor({5}, 34, device()), DType::BFloat16);
  EXPECT_THROW(activation_backward(random_tensor({5}, 35, device()), x, Activation::GELU),
               DTypeError);
  EXPECT_THROW(activation_backward(cast(x, DType::Float16), x, Activation::GELU), DTypeError);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(ActivationTest);

// ---- names (no tensors, no device) ----

TEST(ActivationNames, ParseAndNameRoundTrip) {
  for (Activation a : kAll) EXPECT_EQ(parse_activation(activation_name(a)), a);
  EXPECT_EQ(parse_activation("gelu_tanh"), Activation::GELUTanh);
  EXPECT_STREQ(activation_name(Activation::GELU), "gelu");
}

TEST(ActivationNames, UnknownNameListsTheValidOnes) {
  try {
    parse_activation("swish");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("swish"));
    EXPECT_THAT(e.what(), HasSubstr("relu, gelu, gelu_tanh, tanh, sigmoid"));
  }
  EXPECT_THROW(parse_activation("ReLU"), ValueError);  // names are lower case, as on the CLI
}

}  // namespace
}  // namespace minitrain
