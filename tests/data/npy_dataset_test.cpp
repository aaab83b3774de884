// load_npy_dataset: a features/targets pair written with write_npy reads back as the same
// dataset; mismatched or misshapen pairs fail naming both files and their shapes.

#include <gtest/gtest.h>

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

TEST(NpyDataset, RoundTripsAFeaturesTargetsPair) {
  ScratchDir dir;
  const Tensor x = testing::random_tensor({7, 3}, /*seed=*/1);
  const Tensor y = testing::random_tensor({7, 2}, /*seed=*/2, Device::cpu(), DType::Float64);
  write_npy(dir.path("x.npy"), x);
  write_npy(dir.path("y.npy"), y);
  const TensorDataset ds = load_npy_dataset(dir.path("x.npy"), dir.path("y.npy"));
  EXPECT_EQ(ds.size(), 7);
  EXPECT_EQ(ds.feature_dim(), 3);
  EXPECT_EQ(ds.target_dim(), 2);
  EXPECT_EQ(host_values(ds.features()), host_values(x));
  std::vector<double> y32;
  for (double v : host_values(y)) y32.push_back(double(float(v)));  // stored as float32
  EXPECT_EQ(host_values(ds.targets()), y32);
}

TEST(NpyDataset, AcceptsOneDimensionalTargets) {
  ScratchDir dir;
  write_npy(dir.path("x.npy"), testing::random_tensor({4, 2}, 3));
  write_npy(dir.path("y.npy"), testing::random_tensor({4}, 4));
  EXPECT_EQ(load_npy_dataset(dir.path("x.npy"), dir.path("y.npy")).target_dim(), 1);
}

TEST(NpyDataset, RowCountMismatchNamesBothFilesAndShapes) {
  ScratchDir dir;
  write_npy(dir.path("x.npy"), Tensor::zeros({5, 3}));
  write_npy(dir.path("y.npy"), Tensor::zeros({6, 1}));
  expect_error<ShapeError>([&] { load_npy_dataset(dir.path("x.npy"), dir.path("y.npy")); },
                           {dir.path("x.npy"), dir.path("y.npy"), "[5, 3]", "[6, 1]"});
}

TEST(NpyDataset, RejectsOneDimensionalFeaturesAndThreeDimensionalTargets) {
  ScratchDir dir;
  write_npy(dir.path("x1.npy"), Tensor::zeros({5}));
  write_npy(dir.path("x.npy"), Tensor::zeros({5, 2}));
  write_npy(dir.path("y.npy"), Tensor::zeros({5}));
  write_npy(dir.path("y3.npy"), Tensor::zeros({5, 1, 1}));
  expect_error<ShapeError>([&] { load_npy_dataset(dir.path("x1.npy"), dir.path("y.npy")); },
                           {dir.path("x1.npy"), "[5]", "[N, in]"});
  expect_error<ShapeError>([&] { load_npy_dataset(dir.path("x.npy"), dir.path("y3.npy")); },
                           {dir.path("y3.npy"), "[5, 1, 1]"});
}

TEST(NpyDataset, MissingOrMalformedFileIsAnIoError) {
  ScratchDir dir;
  write_npy(dir.path("x.npy"), Tensor::zeros({2, 2}));
  const std::string junk = dir.write_raw("junk.npy", "not an array");
  expect_error<IoError>([&] { load_npy_dataset(dir.path("x.npy"), dir.path("absent.npy")); },
                        {dir.path("absent.npy")});
  expect_error<IoError>([&] { load_npy_dataset(junk, dir.path("x.npy")); }, {junk});
}

}  // namespace
}  // namespace minitrain
