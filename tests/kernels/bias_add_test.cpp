// bias_add against a plain double loop, on every device and both dtypes.

#include "kernels/bias_add.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

std::vector<double> reference(const Tensor& x, const Tensor& bias) {
  const std::vector<double> xv = host_values(x), bv = host_values(bias);
  const size_t cols = bv.size();
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = xv[i] + bv[i % cols];
  return want;
}

// One addition rounded once: half an ulp relative to the result (float 6e-8, double 1.1e-16).
double rtol_for(DType d) { return d == DType::Float32 ? 1.2e-7 : 2.3e-16; }

class BiasAddTest : public testing::DeviceTest {};

TEST_P(BiasAddTest, MatchesReferenceOnOddShapes) {
  // 1, 7, 1000 and 1 << 20 elements; single rows, single columns and a wide case
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1}, {7, 1}, {1, 7}, {200, 5}, {1000, 3}, {1 << 10, 1 << 10}, {(1 << 20) / 64, 64}};
  for (DType dtype : {DType::Float32, DType::Float64})
    for (auto [rows, cols] : shapes) {
      if (testing::over_size_cap(rows * cols)) continue;
      Tensor x = random_tensor({rows, cols}, 31, device(), dtype);
      Tensor bias = random_tensor({cols}, 32, device(), dtype);
      Tensor out = bias_add(x, bias);
      ASSERT_GT(host_max_abs(out), 0.0);
      EXPECT_ALLCLOSE(host_values(out), reference(x, bias), 0.0, rtol_for(dtype))
          << dtype << " [" << rows << ", " << cols << "]";
    }
}

TEST_P(BiasAddTest, OutputMayBeTheInput) {
  Tensor x = random_tensor({37, 11}, 33, device());
  Tensor bias = random_tensor({11}, 34, device());
  const std::vector<double> want = reference(x, bias);
  bias_add(x, x, bias);  // x += bias, in place
  ASSERT_GT(host_max_abs(x), 0.0);
  EXPECT_ALLCLOSE(host_values(x), want, 0.0, rtol_for(DType::Float32));
}

TEST_P(BiasAddTest, WrongBiasLengthNamesBothShapes) {
  Tensor x = Tensor::zeros({4, 3}, DType::Float32, device());
  Tensor bias = Tensor::zeros({4}, DType::Float32, device());
  try {
    bias_add(x, bias);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bias_add"));
    EXPECT_THAT(e.what(), HasSubstr("[4, 3]"));
    EXPECT_THAT(e.what(), HasSubstr("[4]"));
  }
}

TEST_P(BiasAddTest, RejectsWrongRanksDTypesAndUndefined) {
  Tensor x = Tensor::zeros({4, 3}, DType::Float32, device());
  Tensor bias = Tensor::zeros({3}, DType::Float32, device());
  EXPECT_THROW(bias_add(x.reshape({12}), bias), ShapeError);    // x must be 2-D
  EXPECT_THROW(bias_add(x, bias.reshape({1, 3})), ShapeError);  // bias must be 1-D
  Tensor out = Tensor::zeros({3, 4}, DType::Float32, device());
  EXPECT_THROW(bias_add(out, x, bias), ShapeError);  // out must match x
  EXPECT_THROW(bias_add(x, Tensor::zeros({3}, DType::Float64, device())), DTypeError);
  EXPECT_THROW(bias_add(x, Tensor()), Error);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(BiasAddTest);

}  // namespace
}  // namespace minitrain
