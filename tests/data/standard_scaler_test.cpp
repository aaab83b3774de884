// StandardScaler against scikit-learn's (numbers from numpy: x.mean(0), x.std(0) in float64,
// rounded to float32): population std, a constant column scaled by 1, float32 arithmetic.

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "data/standard_scaler.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;

TEST(StandardScaler, MatchesScikitLearnWithAConstantColumn) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 10, 5, 2, 20, 5, 4, 60, 5}, {3, 3});
  const StandardScaler s = fit_standard_scaler(x);
  EXPECT_EQ(s.mean, (std::vector<float>{2.3333333f, 30.0f, 5.0f}));
  // ddof = 0: sqrt(42/27) and sqrt(1400/3); the constant column gets 1, as sklearn's scale_.
  EXPECT_EQ(s.scale, (std::vector<float>{1.2472191f, 21.602468f, 1.0f}));
  const std::vector<double> got = host_values(standardize(x, s));
  const std::vector<double> want{-1.069045, -0.9258201, 0, -0.26726118, -0.46291006, 0,
                                 1.3363063, 1.3887302,  0};
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(StandardScaler, ANearlyConstantColumnIsConstant) {
  // 0.1 is not exact in binary: the float64 mean of copies of it may differ from it by rounding,
  // which must not make a tiny spread into a scale (sklearn's _is_constant_feature bound).
  const Tensor x = Tensor::from_vector(std::vector<float>(7, 0.1f), {7, 1});
  const StandardScaler s = fit_standard_scaler(x);
  EXPECT_EQ(s.scale, (std::vector<float>{1.0f}));
  EXPECT_EQ(host_values(standardize(x, s)), std::vector<double>(7, 0.0));
}

TEST(StandardScaler, RefusesShapesItWasNotFittedOn) {
  const Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  const StandardScaler s = fit_standard_scaler(x);
  expect_error<ShapeError>(
      [&] {
        standardize(Tensor::from_vector(std::vector<float>{1, 2, 3}, {1, 3}), s);
      },
      {"3 features per row, but the scaler was fitted on 2"});
  expect_error<ShapeError>([&] { fit_standard_scaler(Tensor::empty({0, 2})); }, {"no rows"});
}

}  // namespace
}  // namespace minitrain
