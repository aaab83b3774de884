// make_synthetic_regression: shapes, determinism from the seed, the documented formula, and its
// argument checks.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "data/readers.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;

TEST(SyntheticRegression, ShapeAndSeedDeterminism) {
  const TensorDataset a = make_synthetic_regression(100, 5, 3, /*seed=*/7);
  const TensorDataset b = make_synthetic_regression(100, 5, 3, /*seed=*/7);
  const TensorDataset c = make_synthetic_regression(100, 5, 3, /*seed=*/8);
  EXPECT_EQ(a.features().shape(), Shape({100, 5}));
  EXPECT_EQ(a.targets().shape(), Shape({100, 3}));
  EXPECT_EQ(host_values(a.features()), host_values(b.features()));
  EXPECT_EQ(host_values(a.targets()), host_values(b.targets()));
  EXPECT_NE(host_values(a.features()), host_values(c.features()));
  EXPECT_NE(host_values(a.targets()), host_values(c.targets()));
}

TEST(SyntheticRegression, FollowsTheDocumentedFormula) {
  const int64_t n = 64, in = 4, out = 2;
  const TensorDataset ds = make_synthetic_regression(n, in, out, /*seed=*/3, /*noise=*/0.0);
  const std::vector<double> x = host_values(ds.features());
  const std::vector<double> y = host_values(ds.targets());
  ASSERT_GT(testing::host_max_abs(ds.features()), 0.0);
  for (double v : x) {
    EXPECT_GE(v, -1.0);
    EXPECT_LT(v, 1.0);
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += std::sin(double(i + j + 1) * x[r * in + i]);
      const double q = x[r * in + j % in];
      EXPECT_NEAR(y[r * out + j], s / std::sqrt(double(in)) + 0.1 * q * q, 1e-6);
    }
}

TEST(SyntheticRegression, NoiseHasTheRequestedSpread) {
  const int64_t n = 20000;
  const TensorDataset clean = make_synthetic_regression(n, 3, 1, /*seed=*/5, 0.0);
  const TensorDataset noisy = make_synthetic_regression(n, 3, 1, /*seed=*/5, 0.5);
  EXPECT_EQ(host_values(clean.features()), host_values(noisy.features()));  // noise drawn after x
  const std::vector<double> a = host_values(clean.targets()), b = host_values(noisy.targets());
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += b[i] - a[i];
    sq += (b[i] - a[i]) * (b[i] - a[i]);
  }
  const double mean = sum / n, stddev = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02);  // 4 standard errors (0.5 / sqrt(20000) = 0.0035) and margin
  EXPECT_NEAR(stddev, 0.5, 0.02);
}

TEST(SyntheticRegression, RejectsBadArguments) {
  expect_error<ValueError>([] { make_synthetic_regression(0, 2, 1, 0); }, {"n = 0"});
  expect_error<ValueError>([] { make_synthetic_regression(10, 0, 1, 0); }, {"in = 0"});
  expect_error<ValueError>([] { make_synthetic_regression(10, 2, 0, 0); }, {"out = 0"});
  expect_error<ValueError>([] { make_synthetic_regression(10, 2, 1, 0, -0.1); }, {"-0.1"});
  expect_error<ValueError>([] { make_synthetic_regression(10, 2, 1, 0, NAN); }, {"noise"});
}

}  // namespace
}  // namespace minitrain
