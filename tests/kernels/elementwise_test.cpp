// add, sub, mul, scale and axpy against plain double loops, on every device and both dtypes.

#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

class ElementwiseTest : public testing::DeviceTest {};

const int64_t kSizes[] = {1, 7, 1000,
                          testing::kLargeSize};  // odd sizes hit the tails of every loop split

// Each result is one correctly rounded operation on exactly representable inputs, so the only
// error is that rounding: half an ulp of the dtype, i.e. rtol 6e-8 (float) / 1.2e-16 (double).
double rtol_for(DType dtype) { return dtype == DType::Float32 ? 1.2e-7 : 2.3e-16; }

TEST_P(ElementwiseTest, AddSubMulMatchReferenceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      Tensor a = random_tensor({n}, 1, device(), dtype);
      Tensor b = random_tensor({n}, 2, device(), dtype);
      const std::vector<double> av = host_values(a), bv = host_values(b);
      std::vector<double> sum(av.size()), diff(av.size()), prod(av.size());
      for (size_t i = 0; i < av.size(); ++i) {
        sum[i] = av[i] + bv[i];
        diff[i] = av[i] - bv[i];
        prod[i] = av[i] * bv[i];
      }
      const Tensor got_sum = add(a, b), got_diff = sub(a, b), got_prod = mul(a, b);
      ASSERT_GT(host_max_abs(got_sum), 0.0);
      ASSERT_GT(host_max_abs(got_diff), 0.0);
      ASSERT_GT(host_max_abs(got_prod), 0.0);
      EXPECT_ALLCLOSE(host_values(got_sum), sum, 0.0, rtol_for(dtype)) << "add n=" << n;
      EXPECT_ALLCLOSE(host_values(got_diff), diff, 0.0, rtol_for(dtype)) << "sub n=" << n;
      EXPECT_ALLCLOSE(host_values(got_prod), prod, 0.0, rtol_for(dtype)) << "mul n=" << n;
    }
}

TEST_P(ElementwiseTest, ScaleMatchesReferenceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      Tensor x = random_tensor({n}, 3, device(), dtype);
      const double alpha = dtype == DType::Float32 ? double(-1.75f) : -1.75;  // exact in both
      std::vector<double> want = host_values(x);
      for (double& v : want) v *= alpha;
      Tensor out = Tensor::zeros({n}, dtype, device());
      scale(out, x, alpha);
      ASSERT_GT(host_max_abs(out), 0.0);
      // one product, rounded once; -1.75 x is exact in double, within half an ulp in float
      EXPECT_ALLCLOSE(host_values(out), want, 0.0, rtol_for(dtype)) << "n=" << n;
      EXPECT_ALLCLOSE(host_values(scale(x, alpha)), want, 0.0, rtol_for(dtype));
    }
}

TEST_P(ElementwiseTest, AxpyMatchesReferenceOnOddSizes) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      Tensor y = random_tensor({n}, 4, device(), dtype);
      Tensor x = random_tensor({n}, 5, device(), dtype);
      const double alpha = 0.3;
      const std::vector<double> yv = host_values(y), xv = host_values(x);
      std::vector<double> want(yv.size());
      for (size_t i = 0; i < yv.size(); ++i) want[i] = yv[i] + alpha * xv[i];
      axpy(y, alpha, x);
      ASSERT_GT(host_max_abs(y), 0.0);
      // float: 0.3 rounded to float (1.8e-8 on |x| <= 1), the product (1.8e-8) and the sum
      // (half an ulp of 1.3, 7.8e-8) add up to ~1.2e-7; double: one ulp at most (the GPU may
      // fuse the multiply-add); both bounds below leave a margin of ~5x
      const double atol = dtype == DType::Float32 ? 6e-7 : 1.2e-15;
      EXPECT_ALLCLOSE(host_values(y), want, atol, 0.0) << "n=" << n;
    }
}

TEST_P(ElementwiseTest, OutputMayAliasAnInput) {
  const int64_t n = 1000;
  Tensor a = random_tensor({n}, 6, device());
  Tensor b = random_tensor({n}, 7, device());
  const std::vector<double> av = host_values(a), bv = host_values(b);
  std::vector<double> want(av.size()), twice(av.size());
  for (size_t i = 0; i < av.size(); ++i) {
    want[i] = double(float(av[i] + bv[i]));
    twice[i] = 2 * want[i];
  }
  add(a, a, b);  // a += b
  ASSERT_GT(host_max_abs(a), 0.0);
  EXPECT_ALLCLOSE(host_values(a), want, 0.0, 0.0);   // the same single rounding as the reference
  add(a, a, a);                                      // a = 2a, every operand the same tensor
  EXPECT_ALLCLOSE(host_values(a), twice, 0.0, 0.0);  // doubling is exact
}

TEST_P(ElementwiseTest, AxpyMayUseTheSameTensorTwice) {
  Tensor y = random_tensor({1000}, 8, device(), DType::Float64);
  std::vector<double> want = host_values(y);
  for (double& v : want) v = v + 0.5 * v;
  axpy(y, 0.5, y);  // y += 0.5 y
  ASSERT_GT(host_max_abs(y), 0.0);
  EXPECT_ALLCLOSE(host_values(y), want, 0.0, 0.0);  // same operations in the same order
}

TEST_P(ElementwiseTest, ShapeMismatchNamesBothShapes) {
  Tensor a = Tensor::zeros({2, 3}, DType::Float32, device());
  Tensor b = Tensor::zeros({3, 2}, DType::Float32, device());
  try {
    add(a, b);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("add"));
    EXPECT_THAT(e.what(), HasSubstr("[2, 3]"));
    EXPECT_THAT(e.what(), HasSubstr("[3, 2]"));
  }
  Tensor out = Tensor::zeros({7}, DType::Float32, device());
  EXPECT_THROW(mul(out, a, a), ShapeError);
  EXPECT_THROW(axpy(a, 1.0, b), ShapeError);
}

TEST_P(ElementwiseTest, RejectsDTypeMismatchAndUndefined) {
  Tensor a = Tensor::zeros({3}, DType::Float32, device());
  Tensor d = Tensor::zeros({3}, DType::Float64, device());
  EXPECT_THROW(sub(a, d), DTypeError);
  EXPECT_THROW(scale(d, a, 2.0), DTypeError);
  EXPECT_THROW(add(a, Tensor()), Error);
  Tensor undefined;
  EXPECT_THROW(axpy(undefined, 1.0, a), Error);
}

TEST_P(ElementwiseTest, MaximumIsExactAndPropagatesNaN) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes) {
      Tensor a = random_tensor({n}, 3, device(), dtype);
      Tensor b = random_tensor({n}, 4, device(), dtype);
      const std::vector<double> av = host_values(a), bv = host_values(b);
      std::vector<double> want(av.size());
      for (size_t i = 0; i < av.size(); ++i) want[i] = std::max(av[i], bv[i]);
      const Tensor got = maximum(a, b);
      ASSERT_GT(host_max_abs(got), 0.0);
      EXPECT_ALLCLOSE(host_values(got), want, 0.0, 0.0) << "maximum n=" << n;  // a selection: exact
    }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = Tensor::from_vector(std::vector<double>{nan, 1.0, 2.0}, {3}).to(device());
  Tensor b = Tensor::from_vector(std::vector<double>{0.0, nan, 3.0}, {3}).to(device());
  const std::vector<double> got = host_values(maximum(a, b));
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 3.0);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(ElementwiseTest);

}  // namespace
}  // namespace minitrain
