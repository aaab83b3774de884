// Features read from disk on demand: the same rows, in every dtype and byte order read_npy takes,
// as the loaded data set gives, the same checks, and views of rows.

#include "data/npy_file_dataset.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/npy.h"
#include "data/readers.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;
using testing::ScratchDir;

// Rows `idx` of a data set, gathered.
std::pair<std::vector<double>, std::vector<double>> rows(const Dataset& d,
                                                         const std::vector<int64_t>& idx) {
  const auto k = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::empty({k, d.feature_dim()}), y = Tensor::empty({k, d.target_dim()});
  d.gather(idx, x, y);
  return {host_values(x), host_values(y)};
}

TEST(NpyFileDataset, GathersWhatTheLoadedDataSetGathers) {
  ScratchDir dir;
  const TensorDataset made = make_synthetic_regression(37, 5, 2, 3);
  write_npy(dir.path("x.npy"), made.features());
  write_npy(dir.path("y.npy"), made.targets());
  const NpyFileDataset disk(dir.path("x.npy"), dir.path("y.npy"));
  const TensorDataset memory = load_npy_dataset(dir.path("x.npy"), dir.path("y.npy"));
  EXPECT_EQ(disk.size(), 37);
  EXPECT_EQ(disk.feature_dim(), 5);
  EXPECT_EQ(disk.target_dim(), 2);
  // Runs of consecutive rows (one read each), single rows, repeats, the last row.
  for (const std::vector<int64_t>& idx :
       {std::vector<int64_t>{0, 1, 2, 3}, {36, 0, 17, 17, 18, 19, 5}, {36}})
    EXPECT_EQ(rows(disk, idx), rows(memory, idx));
  EXPECT_THROW(rows(disk, {37}), ValueError);
}

TEST(NpyFileDataset, ReadsFloat64AndBigEndianFilesAsReadNpyDoes) {
  // tests/fixtures/f32_be_3x2.npy: big-endian float32 [3, 2], written by NumPy
  // (make_npy_fixtures.py).
  ScratchDir dir;
  const std::string fixtures = ::minitrain::testing::test_data_dir();
  const Tensor be = read_npy(fixtures + "/f32_be_3x2.npy");
  write_npy(dir.path("y.npy"), Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}));
  const NpyFileDataset disk(fixtures + "/f32_be_3x2.npy", dir.path("y.npy"));
  EXPECT_EQ(rows(disk, {0, 1, 2}).first, host_values(be));
  // A float64 feature file converts to float32 as the loaded data set does.
  const Tensor x64 = testing::random_tensor({4, 3}, 9, Device::cpu(), DType::Float64);
  write_npy(dir.path("x64.npy"), x64);
  write_npy(dir.path("y4.npy"), Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {4}));
  const NpyFileDataset d64(dir.path("x64.npy"), dir.path("y4.npy"));
  const TensorDataset m64 = load_npy_dataset(dir.path("x64.npy"), dir.path("y4.npy"));
  EXPECT_EQ(rows(d64, {3, 1}), rows(m64, {3, 1}));
}

TEST(NpyFileDataset, BadFilesAreRefusedAsWhenLoaded) {
  ScratchDir dir;
  std::vector<float> x(12, 1.0f);
  x[7] = std::numeric_limits<float>::quiet_NaN();  // row 3, column 1
  write_npy(dir.path("x.npy"), Tensor::from_vector(x, {6, 2}));
  write_npy(dir.path("y.npy"), Tensor::zeros({6}));
  write_npy(dir.path("y5.npy"), Tensor::zeros({5}));
  write_npy(dir.path("flat.npy"), Tensor::zeros({6}));
  expect_error<ValueError>([&] { NpyFileDataset(dir.path("x.npy"), dir.path("y.npy")); },
                           {"x.npy", "NaN at row 3, column 1"});
  expect_error<ShapeError>([&] { NpyFileDataset(dir.path("x.npy"), dir.path("y5.npy")); },
                           {"different row counts", "(6 rows)", "(5 rows)"});
  expect_error<ShapeError>([&] { NpyFileDataset(dir.path("flat.npy"), dir.path("y.npy")); },
                           {"flat.npy", "[N, in]"});
  expect_error<IoError>([&] { NpyFileDataset(dir.path("missing.npy"), dir.path("y.npy")); },
                        {"missing.npy"});
}

TEST(RowsOf, IsAViewOfTheGivenRowsInOrder) {
  auto base = std::make_shared<TensorDataset>(make_synthetic_regression(10, 2, 1, 4));
  const RowsOf view(base, {7, 2, 9});
  EXPECT_EQ(view.size(), 3);
  EXPECT_EQ(rows(view, {0, 2, 1}), rows(*base, {7, 9, 2}));
  EXPECT_THROW(rows(view, {3}), ValueError);
  EXPECT_THROW(RowsOf(base, {10}), ValueError);
}

}  // namespace
}  // namespace minitrain
