// Reductions against double-precision references computed here, on odd sizes that leave partial
// chunks, warps and blocks; plus the empty cases, NaN, determinism and operand checks.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel_for.h"
#include "kernels/reduce.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;

const int64_t kOddSizes[] = {1, 7, 1000, 1 << 20};

std::vector<double> random_values(int64_t n, uint32_t seed) {
  const std::vector<float> f = testing::random_floats(n, seed);
  return std::vector<double>(f.begin(), f.end());  // float values, exactly, as doubles
}

Tensor float_tensor(const std::vector<double>& v, const Shape& shape, Device d) {
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), shape, d);
}

class ReduceTest : public testing::DeviceTest {};

TEST_P(ReduceTest, SumAndMeanMatchDoubleReferenceOnOddSizes) {
  for (int64_t n : kOddSizes) {
    if (testing::over_size_cap(n)) continue;
    const std::vector<double> v = random_values(n, 1 + uint32_t(n));
    double want = 0;
    for (double x : v) want += x;
    const Tensor x = float_tensor(v, Shape{n}, device());
    const Tensor s = sum(x), m = mean(x);
    EXPECT_EQ(s.ndim(), 0);
    EXPECT_EQ(s.device(), device());
    // Both accumulate in double; what remains is the one rounding to float32.
    EXPECT_NEAR(s.item(), want, 1e-6 * std::fabs(want) + 1e-6) << "n=" << n;
    EXPECT_NEAR(m.item(), want / double(n), 1e-6 * std::fabs(want / n) + 1e-9) << "n=" << n;
  }
}

TEST_P(ReduceTest, SquaredNormMatchesDoubleReferenceOnOddSizes) {
  for (int64_t n : kOddSizes) {
    if (testing::over_size_cap(n)) continue;
    const std::vector<double> v = random_values(n, 2 + uint32_t(n));
    double want = 0;
    for (double x : v) want += x * x;
    ASSERT_GT(want, 0);
    const Tensor got = squared_norm(float_tensor(v, Shape{n}, device()));
    EXPECT_NEAR(got.item(), want, 1e-6 * want) << "n=" << n;
  }
}

TEST_P(ReduceTest, MaxAbsFindsTheLargestMagnitudeAnywhere) {
  for (int64_t n : kOddSizes) {
    if (testing::over_size_cap(n)) continue;
    for (int64_t at : {int64_t(0), n / 2, n - 1}) {  // first, middle, last (a tail) element
      std::vector<double> v = random_values(n, 3 + uint32_t(n));
      v[at] = -3.5;  // larger than any U(-1, 1) value, and negative
      const Tensor got = max_abs(float_tensor(v, Shape{n}, device()));
      EXPECT_EQ(got.item(), 3.5) << "n=" << n << " at=" << at;
    }
  }
}

TEST_P(ReduceTest, Float64SumKeepsDoublePrecision) {
  const int64_t n = 100003;
  const std::vector<double> v = testing::random_doubles(n, 4);
  double want = 0, want_sq = 0, sum_abs = 0;
  for (double x : v) want += x, want_sq += x * x, sum_abs += std::fabs(x);
  const Tensor x = Tensor::from_vector(v, Shape{n}, device());
  EXPECT_EQ(sum(x).dtype(), DType::Float64);
  // Summation order differs from the reference's; both errors are far below 1e-12 relative to
  // the sum of magnitudes (a float32 accumulation would be off by ~1e-4 here).
  EXPECT_NEAR(sum(x).item(), want, 1e-12 * sum_abs);
  EXPECT_NEAR(squared_norm(x).item(), want_sq, 1e-12 * want_sq);
}

TEST_P(ReduceTest, EmptyInputFollowsTorch) {
  const Tensor x = Tensor::zeros(Shape{0}, DType::Float32, device());
  EXPECT_EQ(sum(x).item(), 0.0);
  EXPECT_EQ(squared_norm(x).item(), 0.0);
  EXPECT_EQ(max_abs(x).item(), 0.0);
  EXPECT_TRUE(std::isnan(mean(x).item()));
}

TEST_P(ReduceTest, NanPropagates) {
  std::vector<float> v(5000, 1.f);
  v[4321] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector(v, Shape{5000}, device());
  EXPECT_TRUE(std::isnan(max_abs(x).item()));
  EXPECT_TRUE(std::isnan(sum(x).item()));
}

TEST_P(ReduceTest, IntoExistingOutputAndReshapedInput) {
  const std::vector<double> v = random_values(6 * 35, 5);
  double want = 0;
  for (double x : v) want += x;
  const Tensor x = float_tensor(v, Shape{6, 35}, device());  // any shape reduces all elements
  Tensor out = Tensor::zeros(Shape{}, DType::Float32, device());
  sum(out, x);
  EXPECT_NEAR(out.item(), want, 1e-5);
}

TEST_P(ReduceTest, SameBitsRunAfterRun) {
  const Tensor x = testing::random_tensor(Shape{(1 << 20) + 3}, 6, device());
  const double first = sum(x).item();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sum(x).item(), first);
}

TEST_P(ReduceTest, SumRowsMatchesReferenceOnOddShapes) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},    {7, 13},    {1000, 3},
                                                           {3, 1000}, {300, 700}, {0, 5}};
  for (auto [rows, cols] : shapes) {
    const std::vector<double> v = random_values(rows * cols, 7 + uint32_t(rows * cols));
    std::vector<double> want(size_t(cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) want[j] += v[i * cols + j];
    const Tensor got = sum_rows(float_tensor(v, Shape{rows, cols}, device()));
    ASSERT_EQ(got.shape(), Shape({cols}));
    if (rows > 0) {
      ASSERT_GT(testing::host_max_abs(got), 0.0) << rows << "x" << cols;
    }
    std::vector<double> want_f(want.size());  // the reference rounded once, to float32
    for (size_t j = 0; j < want.size(); ++j) want_f[j] = double(float(want[j]));
    EXPECT_TRUE(testing::allclose(host_values(got), want_f, 0, 0)) << rows << "x" << cols;
  }
}

TEST_P(ReduceTest, BadOperandsAreNamed) {
  const Tensor x = Tensor::zeros(Shape{4, 3}, DType::Float32, device());
  Tensor vec = Tensor::zeros(Shape{1}, DType::Float32, device());
  EXPECT_THROW(sum(vec, x), ShapeError);  // out must be 0-d
  Tensor out64 = Tensor::zeros(Shape{}, DType::Float64, device());
  EXPECT_THROW(sum(out64, x), DTypeError);
  Tensor wrong = Tensor::zeros(Shape{4}, DType::Float32, device());
  try {
    sum_rows(wrong, x);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("out [4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x [4, 3]"), std::string::npos) << msg;
  }
  EXPECT_THROW(sum_rows(Tensor::zeros(Shape{12}, DType::Float32, device())), ShapeError);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(ReduceTest);

// CPU only: chunking is fixed, so the thread count cannot change a single bit.
TEST(ReduceCpu, SameBitsForAnyThreadCount) {
  const Tensor x = testing::random_tensor(Shape{(1 << 20) + 5}, 8);
  const Tensor m = testing::random_tensor(Shape{513, 1029}, 9);
  const int saved = num_threads();
  std::vector<double> sums, norms;
  std::vector<std::vector<double>> cols;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    sums.push_back(sum(x).item());
    norms.push_back(squared_norm(x).item());
    cols.push_back(host_values(sum_rows(m)));
  }
  set_num_threads(saved);
  for (size_t i = 1; i < sums.size(); ++i) {
    EXPECT_EQ(sums[i], sums[0]);
    EXPECT_EQ(norms[i], norms[0]);
    EXPECT_EQ(cols[i], cols[0]);
  }
}

// GPU only: two host threads reducing on one device at once, each on its own stream.
TEST(ReduceCuda, ConcurrentThreadsGetTheSameAnswer) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Tensor x = testing::random_tensor(Shape{testing::kLargeSize * 4}, 10, Device::cuda(0));
  const double want = sum(x).item();
  double got[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) got[t] = sum(x).item();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
}

}  // namespace
}  // namespace minitrain
