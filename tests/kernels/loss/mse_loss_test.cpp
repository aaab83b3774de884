// MSE loss forward (mean, sum, none) and backward against plain double loops and finite
// differences, on every device.

#include "kernels/loss/mse_loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/parallel_for.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

const int64_t kSizes[] = {1, 7, 1000, 1 << 20};

double sum_sq(const std::vector<double>& p, const std::vector<double>& t) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += (p[i] - t[i]) * (p[i] - t[i]);
  return s;
}

class MseLossTest : public testing::DeviceTest {};

TEST_P(MseLossTest, ReducedForwardMatchesReferenceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      if (testing::over_size_cap(n)) continue;
      Tensor p = random_tensor({n}, 41, device(), dtype);
      Tensor t = random_tensor({n}, 42, device(), dtype);
      const double want_sum = sum_sq(host_values(p), host_values(t));
      Tensor mean = mse_loss_forward(p, t, Reduction::Mean);
      Tensor sum = mse_loss_forward(p, t, Reduction::Sum);
      ASSERT_EQ(mean.ndim(), 0);
      ASSERT_EQ(sum.ndim(), 0);
      ASSERT_GT(host_max_abs(sum), 0.0);
      // accumulated in double, rounded once to the dtype: half an ulp (float 6e-8) plus the
      // double sum's own error (~n eps = 2e-10 at 1 << 20). A float32 running sum would be off
      // by ~5e-4 relative at 1 << 20 and fail the float bound.
      const double rtol = dtype == DType::Float32 ? 1.2e-7 : 1e-12;
      EXPECT_ALLCLOSE(host_values(sum), std::vector<double>{want_sum}, 0.0, rtol) << "n=" << n;
      EXPECT_ALLCLOSE(host_values(mean), std::vector<double>{want_sum / double(n)}, 0.0, rtol)
          << "n=" << n;
    }
}

TEST_P(MseLossTest, UnreducedForwardMatchesReferenceOnOddSizes) {
  for (int64_t n : kSizes) {
    if (testing::over_size_cap(n)) continue;
    Tensor p = random_tensor({n}, 43, device());
    Tensor t = random_tensor({n}, 44, device());
    const std::vector<double> pv = host_values(p), tv = host_values(t);
    std::vector<double> want(pv.size());
    for (size_t i = 0; i < pv.size(); ++i) want[i] = (pv[i] - tv[i]) * (pv[i] - tv[i]);
    Tensor out = mse_loss_forward(p, t, Reduction::None);
    ASSERT_EQ(out.shape(), p.shape());
    ASSERT_GT(host_max_abs(out), 0.0);
    // float: the difference is exact (Sterbenz) or rounded once, then the square once: 2.5e-7
    EXPECT_ALLCLOSE(host_values(out), want, 1e-12, 2.5e-7) << "n=" << n;
  }
}

TEST_P(MseLossTest, ReducedForwardIsBitIdenticalAcrossRunsAndThreadCounts) {
  const int64_t n = (1 << 20) + 3;
  Tensor p = random_tensor({n}, 45, device());
  Tensor t = random_tensor({n}, 46, device());
  const double first = mse_loss_forward(p, t).item();
  const int saved = num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);  // changes the CPU's split; the chunks it sums stay the same
    EXPECT_EQ(mse_loss_forward(p, t).item(), first) << threads << " threads";
  }
  set_num_threads(saved);
}

TEST_P(MseLossTest, BackwardMatchesTorchFormulaForEachReduction) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      if (testing::over_size_cap(n)) continue;
      Tensor p = random_tensor({n}, 47, device(), dtype);
      Tensor t = random_tensor({n}, 48, device(), dtype);
      Tensor g_scalar = Tensor::from_vector(std::vector<double>{0.75}, {}, Device::cpu());
      if (dtype == DType::Float32)
        g_scalar = Tensor::from_vector(std::vector<float>{0.75f}, {}, Device::cpu());
      g_scalar = g_scalar.to(device());
      Tensor g_each = random_tensor({n}, 49, device(), dtype);
      const std::vector<double> pv = host_values(p), tv = host_values(t), gv = host_values(g_each);
      for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        const double norm = r == Reduction::Mean ? 2.0 / double(n) : 2.0;
        std::vector<double> want(pv.size());
        for (size_t i = 0; i < pv.size(); ++i)
          want[i] = norm * (pv[i] - tv[i]) * (r == Reduction::None ? gv[i] : 0.75);
        Tensor grad = mse_loss_backward(r == Reduction::None ? g_each : g_scalar, p, t, r);
        ASSERT_GT(host_max_abs(grad), 0.0);
        // four roundings in the dtype (norm, the difference, two products), each half an ulp
        // relative to its result, even where p - t cancels: 2.4e-7 (float); for double the
        // reference rounds as often, so twice that
        const double rtol = dtype == DType::Float32 ? 4e-7 : 1e-15;
        EXPECT_ALLCLOSE(host_values(grad), want, 0.0, rtol)
            << reduction_name(r) << " " << dtype << " n=" << n;
      }
    }
}

TEST_P(MseLossTest, BackwardMatchesFiniteDifferencesInFloat64) {
  const int64_t n = 7;
  Tensor p = random_tensor({n}, 50, device(), DType::Float64);
  Tensor t = random_tensor({n}, 51, device(), DType::Float64);
  Tensor g = Tensor::from_vector(std::vector<double>{1.0}, {}, device());
  const std::vector<double> pv = host_values(p);
  const double h = 1e-6;
  for (Reduction r : {Reduction::Mean, Reduction::Sum}) {
    std::vector<double> want(pv.size());
    for (size_t i = 0; i < pv.size(); ++i) {
      std::vector<double> plus(pv), minus(pv);
      plus[i] += h;
      minus[i] -= h;
      const double lp = mse_loss_forward(Tensor::from_vector(plus, {n}, device()), t, r).item();
      const double lm = mse_loss_forward(Tensor::from_vector(minus, {n}, device()), t, r).item();
      want[i] = (lp - lm) / (2 * h);
    }
    Tensor grad = mse_loss_backward(g, p, t, r);
    ASSERT_GT(host_max_abs(grad), 0.0);
    // the loss is quadratic, so central differences have no truncation error; rounding
    // eps * loss / h ~ 1e-9
    EXPECT_ALLCLOSE(host_values(grad), want, 1e-8, 1e-7) << reduction_name(r);
  }
}

TEST_P(MseLossTest, MeanOfNoElementsIsNaNAndSumIsZero) {
  Tensor p = Tensor::zeros({0}, DType::Float32, device());
  EXPECT_TRUE(std::isnan(mse_loss_forward(p, p, Reduction::Mean).item()));  // as torch: 0 / 0
  EXPECT_EQ(mse_loss_forward(p, p, Reduction::Sum).item(), 0.0);
}

TEST_P(MseLossTest, RejectsMismatchedOperands) {
  Tensor p = Tensor::zeros({4, 2}, DType::Float32, device());
  Tensor t = Tensor::zeros({2, 4}, DType::Float32, device());
  try {
    mse_loss_forward(p, t);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("mse_loss_forward"));
    EXPECT_THAT(e.what(), HasSubstr("[4, 2]"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 4]"));
  }
  Tensor not_scalar = Tensor::zeros({1}, DType::Float32, device());
  EXPECT_THROW(mse_loss_forward(not_scalar, p, p, Reduction::Mean), ShapeError);
  EXPECT_THROW(mse_loss_backward(not_scalar, p, p, Reduction::Sum), ShapeError);
  Tensor wrong_each = Tensor::zeros({8}, DType::Float32, device());
  EXPECT_THROW(mse_loss_backward(wrong_each, p, p, Reduction::None), ShapeError);
  EXPECT_THROW(mse_loss_forward(p, Tensor::zeros({4, 2}, DType::Float64, device())), DTypeError);
  EXPECT_THROW(mse_loss_forward(Tensor(), p), Error);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MseLossTest);

TEST(MseReductionNames, ParseAndNameRoundTrip) {
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    EXPECT_EQ(parse_reduction(reduction_name(r)), r);
  EXPECT_STREQ(reduction_name(Reduction::Mean), "mean");
}

TEST(MseReductionNames, UnknownNameListsTheValidOnes) {
  try {
    parse_reduction("average");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_THAT(e.what(), HasSubstr("average"));
    EXPECT_THAT(e.what(), HasSubstr("mean, sum, none"));
  }
}

}  // namespace
}  // namespace minitrain
