// Class labels: read from CSV text or integer .npy, checked against the classes naming the row,
// counted into balanced weights, and split into a stratified hold-out that depends on the seed
// alone.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/npy.h"
#include "data/class_labels.h"
#include "data/holdout_split.h"
#include "data/readers.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;
using testing::ScratchDir;

Tensor labels(const std::vector<float>& v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
}

TEST(ClassLabels, TextLabelsBecomeSortedClassIndices) {
  ScratchDir dir;
  const std::string path =
      dir.write_raw("t.csv", "x,species\n1,virginica\n2,setosa\n3,\"versicolor\"\n4,setosa\n");
  CsvClassLabels classes;
  const TensorDataset ds = load_csv_dataset(path, {"species"}, &classes);
  EXPECT_EQ(classes.names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{2, 0, 1, 0}));
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{1, 2, 3, 4}));
}

TEST(ClassLabels, HeldOutTextLabelsUseTheTrainingClassesAndRefuseNewOnes) {
  ScratchDir dir;
  CsvClassLabels classes{{"a", "b", "c"}};
  const TensorDataset ds =
      load_csv_dataset(dir.write_raw("v.csv", "x,y\n1,c\n2,a\n"), {"y"}, &classes);
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{2, 0}));
  const std::string bad = dir.write_raw("w.csv", "x,y\n1,c\n2,d\n");
  expect_error<IoError>([&] { load_csv_dataset(bad, {"y"}, &classes); },
                        {"w.csv:3", "label 'd'", "3 classes", "'a', 'b', 'c'"});
}

TEST(ClassLabels, NumericLabelsStayNumbersAndAnEmptyLabelIsAnError) {
  ScratchDir dir;
  CsvClassLabels classes;
  const TensorDataset ds =
      load_csv_dataset(dir.write_raw("n.csv", "x,y\n1,2\n2,0\n"), {"y"}, &classes);
  EXPECT_TRUE(classes.names.empty());
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{2, 0}));
  const std::string empty = dir.write_raw("e.csv", "x,y\n1,2\n2,\n");
  expect_error<IoError>([&] { load_csv_dataset(empty, {"y"}, &classes); },
                        {"e.csv:3", "column 'y' (2)", "empty label"});
  const std::string two = dir.write_raw("two.csv", "x,y,z\n1,2,3\n");
  expect_error<ValueError>(
      [&] {
        load_csv_dataset(two, {"y", "z"}, &classes);
      },
      {"one label column", "2 target columns"});
}

TEST(ClassLabels, IntegerNpyLabelsReadExactlyAndFloatsStayRefusedForFeatures) {
  ScratchDir dir;
  // tests/fixtures/i64_4.npy holds int64 [0, 1, 2, 3] (make_npy_fixtures.py).
  const std::string i64 = ::minitrain::testing::test_data_dir() + "/i64_4.npy";
  EXPECT_EQ(host_values(read_npy(i64, Device::cpu(), NpyIntegers::AsFloat64)),
            (std::vector<double>{0, 1, 2, 3}));
  expect_error<IoError>([&] { read_npy(i64); }, {"int64", "astype(np.float32)"});
}

TEST(ClassLabels, ALabelOutsideTheClassesNamesTheRowAndValue) {
  check_class_labels(labels({0, 2, 1, -100}), 3, -100, "y.npy");
  expect_error<ValueError>(
      [&] {
        check_class_labels(labels({0, 2, 3}), 3, -100, "y.npy");
      },
      {"y.npy", "row 2", "label 3", "[0, 3)"});
  expect_error<ValueError>(
      [&] {
        check_class_labels(labels({0, 1.5f}), 3, -100, "y.npy");
      },
      {"row 1", "label 1.5"});
  expect_error<ValueError>([&] { check_class_labels(labels({-1}), 3, -100, "y.npy"); },
                           {"row 0", "label -1"});
  expect_error<ShapeError>(
      [&] {
        check_class_labels(Tensor::zeros({2, 3}), 3, -100, "onehot.npy");
      },
      {"onehot.npy", "[2, 3]", "one class label per row"});
}

TEST(ClassLabels, BalancedWeightsAreRowsOverClassesTimesCount) {
  const std::vector<int64_t> counts = class_counts(labels({0, 0, 0, 1, -100, 2, 2}), 4, -100);
  EXPECT_EQ(counts, (std::vector<int64_t>{3, 1, 2, 0}));
  // 6 counted rows over 4 classes: 6 / (4 * count); an absent class gets 1.
  EXPECT_EQ(balanced_class_weights(counts), (std::vector<double>{0.5, 1.5, 0.75, 1.0}));
}

TEST(HoldoutSplit, SplitsEveryRowOnceByTheSeedAlone) {
  const HoldoutSplit a = holdout_split(100, 0.2, 7), b = holdout_split(100, 0.2, 7);
  EXPECT_EQ(a.held_out, b.held_out);
  EXPECT_EQ(a.held_out.size(), 20u);
  EXPECT_EQ(a.train.size(), 80u);
  std::vector<int64_t> all = a.train;
  all.insert(all.end(), a.held_out.begin(), a.held_out.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
  EXPECT_NE(holdout_split(100, 0.2, 8).held_out, a.held_out);
  // Not simply the first or last rows.
  EXPECT_NE(a.held_out.front(), 0);
  EXPECT_LT(a.held_out.front(), 80);
}

TEST(HoldoutSplit, StratifiedSplitKeepsEachClassShare) {
  std::vector<int64_t> y;
  for (int i = 0; i < 90; ++i) y.push_back(0);
  for (int i = 0; i < 10; ++i) y.push_back(1);
  const HoldoutSplit s = holdout_split(100, 0.3, 1, y);
  int64_t held_rare = 0;
  for (int64_t r : s.held_out) held_rare += y[static_cast<std::size_t>(r)] == 1;
  EXPECT_EQ(s.held_out.size(), 30u);
  EXPECT_EQ(held_rare, 3);  // round(0.3 * 10), where a plain split could draw any number
}

TEST(HoldoutSplit, TinySetsKeepBothSidesAndBadFractionsAreRefused) {
  const HoldoutSplit s = holdout_split(2, 0.01, 0);
  EXPECT_EQ(s.held_out.size(), 1u);
  EXPECT_EQ(s.train.size(), 1u);
  const HoldoutSplit t = holdout_split(3, 0.1, 0, {0, 1, 2});  // every class rounds to 0
  EXPECT_EQ(t.held_out.size(), 1u);
  expect_error<ValueError>([] { holdout_split(10, 1.0, 0); }, {"(0, 1)", "1"});
  expect_error<ValueError>([] { holdout_split(1, 0.5, 0); }, {"1 row(s)"});
}

// Issue 30: a stratified split rounds the held-out total once, as scikit-learn's
// train_test_split(stratify=) does (n_test = ceil(fraction x n)), and spreads it over the classes
// by largest remainder; rounding each class alone held out 19 of 20 one-row classes at 0.5.
int64_t held_of_class(const HoldoutSplit& s, const std::vector<int64_t>& y, int64_t c) {
  int64_t k = 0;
  for (int64_t r : s.held_out) k += y[static_cast<std::size_t>(r)] == c;
  return k;
}

TEST(HoldoutSplit, StratifiedSplitRoundsTheTotalOnce) {
  std::vector<int64_t> y;
  for (int64_t c = 0; c < 20; ++c) y.push_back(c);  // 20 one-row classes
  const HoldoutSplit s = holdout_split(20, 0.5, 3, y);
  EXPECT_EQ(s.held_out.size(), 10u);
  EXPECT_EQ(s.train.size(), 10u);
  EXPECT_NE(holdout_split(20, 0.5, 4, y).held_out, s.held_out);  // ties drawn by the seed
  // Odd cases: 3 classes of 3, 5 and 7 rows (15), 0.5: ceil(7.5) = 8 held out, each class
  // floor(8 x n_c / 15) = 1, 2, 3 (6) plus one for the 2 largest remainders (5: 10/15, 7: 11/15).
  std::vector<int64_t> z;
  for (int64_t c = 0, n = 3; c < 3; ++c, n += 2)
    for (int64_t i = 0; i < n; ++i) z.push_back(c);
  const HoldoutSplit t = holdout_split(15, 0.5, 0, z);
  EXPECT_EQ(t.held_out.size(), 8u);
  EXPECT_EQ(held_of_class(t, z, 0), 1);
  EXPECT_EQ(held_of_class(t, z, 1), 3);
  EXPECT_EQ(held_of_class(t, z, 2), 4);
  // 0.3 of 7 rows (classes 4 and 3): ceil(2.1) = 3, as scikit-learn; 0.7 of 10 is 7, not
  // ceil(7.000000000000001) = 8.
  const HoldoutSplit u = holdout_split(7, 0.3, 0, {0, 0, 0, 0, 1, 1, 1});
  EXPECT_EQ(u.held_out.size(), 3u);
  EXPECT_EQ(holdout_split(10, 0.7, 0, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}).held_out.size(), 7u);
  // Never all rows to one side: 0.99 of 5 rows holds out 4.
  EXPECT_EQ(holdout_split(5, 0.99, 0, {0, 1, 2, 3, 4}).held_out.size(), 4u);
  std::vector<int64_t> all = s.train;
  all.insert(all.end(), s.held_out.begin(), s.held_out.end());
  std::sort(all.begin(), all.end());
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(all[static_cast<std::size_t>(i)], i);
}

// Issue 30: labels are float32, which rounds 1.00000001 to 1, 2.9999999 to 3 and 16777217 to
// 16777216: each is refused as written, naming the line; a held-out table takes the training's
// label kind (a text label among numeric training labels once numbered its own classes).
TEST(ClassLabels, NumericLabelsMustBeExactIntegersAsWritten) {
  ScratchDir dir;
  CsvClassLabels classes;
  expect_error<IoError>(
      [&] {
        load_csv_dataset(dir.write_raw("a.csv", "x,y\n0,0\n1,1.00000001\n"), {"y"}, &classes);
      },
      {"a.csv:3", "label '1.00000001' is not an integer"});
  expect_error<IoError>(
      [&] { load_csv_dataset(dir.write_raw("b.csv", "x,y\n0,2.9999999\n"), {"y"}, &classes); },
      {"b.csv:2", "label '2.9999999' is not an integer"});
  expect_error<IoError>(
      [&] { load_csv_dataset(dir.write_raw("c.csv", "x,y\n0,1\n1,16777217\n"), {"y"}, &classes); },
      {"c.csv:3", "label '16777217' is beyond 16777216"});
  // Written as 2.0 or 2e0 a label is still the whole number 2; -100 (an ignore_index) is fine.
  const TensorDataset ok =
      load_csv_dataset(dir.write_raw("d.csv", "x,y\n0,2.0\n1,2e0\n2,-100\n"), {"y"}, &classes);
  EXPECT_EQ(host_values(ok.targets()), (std::vector<double>{2, 2, -100}));
  EXPECT_TRUE(classes.names.empty());
}

TEST(ClassLabels, HeldOutLabelsTakeTheTrainingsKind) {
  ScratchDir dir;
  CsvClassLabels numbers{{}, /*held_out=*/true};  // the training's labels were numbers
  expect_error<IoError>(
      [&] { load_csv_dataset(dir.write_raw("v.csv", "x,y\n0,1\n1,cat\n"), {"y"}, &numbers); },
      {"v.csv:3", "label 'cat' is not a number", "training labels are class numbers"});
  CsvClassLabels text{{"a", "b"}, /*held_out=*/true};
  expect_error<IoError>(
      [&] { load_csv_dataset(dir.write_raw("w.csv", "x,y\n0,a\n1,0\n"), {"y"}, &text); },
      {"w.csv:3", "label '0' is not one of the 2 classes"});
}

TEST(ClassLabels, MoreClassesThanFloat32CountsAreRefused) {
  expect_error<ValueError>(
      [&] {
        check_class_labels(labels({0, 1}), kMaxExactClassLabel + 1, -100, "y.npy");
      },
      {"y.npy", "16777217 classes", "at most 16777216"});
  EXPECT_NO_THROW(check_class_labels(labels({0, 1}), kMaxExactClassLabel, -100, "y.npy"));
}

// Issue 30 (medium): one "NA" among class numbers turned the column into text classes (sorted
// "10" before "2"). A missing-value marker (pandas' na_values) is refused as what it is, naming
// the line, in any label column.
TEST(ClassLabels, AMissingValueMarkerIsNoClass) {
  ScratchDir dir;
  for (const char* marker : {"NA", "nan", "NaN", "N/A", "null", "None", "#N/A", "<NA>"}) {
    CsvClassLabels classes;
    const std::string path =
        dir.write_raw("m.csv", std::string("x,y\n0,2\n1,10\n2,") + marker + "\n");
    expect_error<IoError>([&] { load_csv_dataset(path, {"y"}, &classes); },
                          {"m.csv:4", std::string("label '") + marker + "' is a missing value"});
  }
  CsvClassLabels text;  // text classes too
  expect_error<IoError>(
      [&] { load_csv_dataset(dir.write_raw("t.csv", "x,y\n0,cat\n1,NA\n"), {"y"}, &text); },
      {"t.csv:3", "label 'NA' is a missing value"});
}

}  // namespace
}  // namespace minitrain
