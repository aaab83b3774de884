// TensorDataset: shapes are checked and named, storage is float32 on the CPU, gather copies the
// requested rows in the requested order.

#include "data/dataset.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;

// Row r of X is [10r, 10r + 1, 10r + 2]; row r of Y is [-r].
TensorDataset numbered(int64_t n) {
  std::vector<float> x, y;
  for (int64_t r = 0; r < n; ++r) {
    for (int c = 0; c < 3; ++c) x.push_back(float(10 * r + c));
    y.push_back(float(-r));
  }
  return TensorDataset(Tensor::from_vector(x, {n, 3}), Tensor::from_vector(y, {n}));
}

TEST(TensorDataset, OneDimensionalTargetsBecomeAColumn) {
  const TensorDataset ds = numbered(5);
  EXPECT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.feature_dim(), 3);
  EXPECT_EQ(ds.target_dim(), 1);
  EXPECT_EQ(ds.targets().shape(), Shape({5, 1}));
}

TEST(TensorDataset, StoresFloat64InputsAsFloat32) {
  const TensorDataset ds(Tensor::from_vector(std::vector<double>{1.5, 2.5, 3.5, 4.5}, {2, 2}),
                         Tensor::from_vector(std::vector<double>{0.25, 0.75}, {2, 1}));
  EXPECT_EQ(ds.features().dtype(), DType::Float32);
  EXPECT_EQ(ds.targets().dtype(), DType::Float32);
  EXPECT_TRUE(ds.features().device().is_cpu());
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{1.5, 2.5, 3.5, 4.5}));
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{0.25, 0.75}));
}

TEST(TensorDataset, RejectsMismatchedOrMisshapenTensors) {
  expect_error<ShapeError>(
      [] {
        TensorDataset(Tensor::zeros({4, 3}), Tensor::zeros({5, 1}));
      },
      {"4 rows", "5", "[4, 3]", "[5, 1]"});
  expect_error<ShapeError>([] { TensorDataset(Tensor::zeros({4}), Tensor::zeros({4})); },
                           {"[N, in]", "[4]"});
  expect_error<ShapeError>(
      [] {
        TensorDataset(Tensor::zeros({4, 2}), Tensor::zeros({4, 1, 1}));
      },
      {"[4, 1, 1]"});
  expect_error<ValueError>([] { TensorDataset(Tensor(), Tensor::zeros({4})); }, {"defined"});
}

TEST(TensorDataset, GatherCopiesRowsInTheGivenOrder) {
  const TensorDataset ds = numbered(6);
  // A run (2, 3, 4), a jump back, a repeat: runs are merged, everything else row by row.
  const std::vector<int64_t> rows{2, 3, 4, 0, 5, 5};
  Tensor x = Tensor::empty({6, 3}), y = Tensor::empty({6, 1});
  ds.gather(rows, x, y);
  std::vector<double> want_x, want_y;
  for (int64_t r : rows) {
    for (int c = 0; c < 3; ++c) want_x.push_back(double(10 * r + c));
    want_y.push_back(double(-r));
  }
  EXPECT_EQ(host_values(x), want_x);
  EXPECT_EQ(host_values(y), want_y);
}

TEST(TensorDataset, GatherChecksIndicesAndOutputs) {
  const TensorDataset ds = numbered(4);
  Tensor x = Tensor::empty({2, 3}), y = Tensor::empty({2, 1});
  expect_error<ValueError>([&] { ds.gather({1, 4}, x, y); }, {"row 4", "4 rows"});
  expect_error<ValueError>([&] { ds.gather({-1, 0}, x, y); }, {"row -1"});
  Tensor wrong = Tensor::empty({2, 2});
  expect_error<ShapeError>([&] { ds.gather({0, 1}, wrong, y); }, {"[2, 2]", "[2, 3]"});
  Tensor f64 = Tensor::empty({2, 3}, DType::Float64);
  expect_error<DTypeError>([&] { ds.gather({0, 1}, f64, y); }, {"float64"});
}

}  // namespace
}  // namespace minitrain
