// cast between float32 and float64 against static_cast loops, on every device.

#include "kernels/cast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_doubles;
using testing::random_floats;

class CastTest : public testing::DeviceTest {};

TEST_P(CastTest, FloatToDoubleIsExactOnOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    const std::vector<float> v = random_floats(n, 3);
    Tensor in = Tensor::from_vector(v, {n}, device());
    Tensor out = cast(in, DType::Float64);
    ASSERT_EQ(out.dtype(), DType::Float64);
    ASSERT_GT(host_max_abs(out), 0.0);
    // widening is exact: every float is a double
    EXPECT_ALLCLOSE(host_values(out), std::vector<double>(v.begin(), v.end()), 0.0, 0.0)
        << "n=" << n;
  }
}

TEST_P(CastTest, DoubleToFloatRoundsToNearestOnOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    const std::vector<double> v = random_doubles(n, 4);
    std::vector<double> want(v.size());
    for (size_t i = 0; i < v.size(); ++i) want[i] = double(static_cast<float>(v[i]));
    Tensor in = Tensor::from_vector(v, {n}, device());
    Tensor out = Tensor::zeros({n}, DType::Float32, device());
    cast(out, in);
    ASSERT_GT(host_max_abs(out), 0.0);
    // exact: both sides round each double to its nearest float (IEEE round-to-nearest-even)
    EXPECT_ALLCLOSE(host_values(out), want, 0.0, 0.0) << "n=" << n;
  }
}

TEST_P(CastTest, SameDTypeMakesAnIndependentCopy) {
  Tensor in = Tensor::from_vector(std::vector<float>{1.f, -2.f, 3.5f}, {3}, device());
  Tensor out = cast(in, DType::Float32);
  EXPECT_FALSE(out.shares_storage_with(in));
  EXPECT_ALLCLOSE(out, in, 0.0, 0.0);
  Tensor out2 = Tensor::zeros({3}, DType::Float32, device());
  cast(out2, in);
  EXPECT_ALLCLOSE(out2, in, 0.0, 0.0);
}

TEST_P(CastTest, RejectsShapeMismatchAndUndefined) {
  Tensor in = Tensor::zeros({4}, DType::Float32, device());
  Tensor out = Tensor::zeros({5}, DType::Float64, device());
  try {
    cast(out, in);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cast"));
    EXPECT_THAT(e.what(), HasSubstr("[5]"));
    EXPECT_THAT(e.what(), HasSubstr("[4]"));
  }
  EXPECT_THROW(cast(Tensor(), DType::Float64), Error);
  Tensor undefined;
  EXPECT_THROW(cast(undefined, in), Error);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(CastTest);

}  // namespace
}  // namespace minitrain
