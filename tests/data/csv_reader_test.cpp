// load_csv_dataset: a well-formed file with quotes, CRLF and blank lines reads correctly, and each
// kind of bad input fails with an IoError naming the file, the line and the column.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/strings.h"
#include "data/readers.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;
using testing::ScratchDir;

TEST(CsvReader, ReadsQuotesCrlfBlankLinesAndSpaces) {
  ScratchDir dir;
  const std::string path = dir.write_raw("good.csv",
                                         "a,\"b\",target, c\r\n"
                                         "1, 2.5,\"10\",-3\r\n"
                                         "\r\n"
                                         "  \n"
                                         "\"4\",5e-1, 11 ,\" 6 \"\r\n"
                                         "7,8,12,9\r\n");
  const TensorDataset ds = load_csv_dataset(path, {"target"});
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.feature_dim(), 3);
  EXPECT_EQ(ds.target_dim(), 1);
  // Features keep the file's column order (a, b, c) with the target column taken out.
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{1, 2.5, -3, 4, 0.5, 6, 7, 8, 9}));
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{10, 11, 12}));
}

TEST(CsvReader, TargetsFollowTheGivenOrderAndTheLastNewlineIsOptional) {
  ScratchDir dir;
  const std::string path = dir.write_raw("t.csv", "t1,x,t2\n1,2,3\n4,5,6");
  const TensorDataset ds = load_csv_dataset(path, {"t2", "t1"});
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{2, 5}));
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{3, 1, 6, 4}));
}

// For prediction: every column is a feature but the named ones the header has (the training's
// targets); a named column the table lacks (unlabelled data) is no error.
TEST(CsvReader, FeaturesAloneLeaveOutTheNamedColumnsThatExist) {
  ScratchDir dir;
  const std::string path = dir.write_raw("t.csv", "t1,x,t2,z\n1,2,3,4\n5,6,7,8\n");
  EXPECT_EQ(host_values(load_csv_features(path)), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}));
  const Tensor x = load_csv_features(path, {"t2", "absent", "t1"});
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
  EXPECT_EQ(host_values(x), (std::vector<double>{2, 4, 6, 8}));
  // Every column dropped leaves no features; a bad cell is named as in load_csv_dataset.
  expect_error<IoError>(
      [&] {
        load_csv_features(path, {"t1", "x", "t2", "z"});
      },
      {"which leaves no features"});
  const std::string bad = dir.write_raw("bad.csv", "a,b\n1,x\n");
  expect_error<IoError>([&] { load_csv_features(bad); }, {"bad.csv:2: column 'b' (2)"});
}

// A model's feature columns by name (issue 30: by position, a table whose columns came in another
// order gave wrong classes with exit 0): read in the model's order wherever the file has them;
// without names, the file's order is reported for the weights' metadata.
TEST(CsvReader, FeatureColumnsAreReadByNameInTheModelsOrder) {
  ScratchDir dir;
  const std::string path = dir.write_raw("t.csv", "c,y,a,b\n3,0,1,2\n6,1,4,5\n");
  CsvFeatureColumns found;
  const TensorDataset ds = load_csv_dataset(path, {"y"}, nullptr, &found);
  EXPECT_EQ(found.names, (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{3, 1, 2, 6, 4, 5}));

  CsvFeatureColumns model{{"a", "b", "c"}};
  EXPECT_EQ(host_values(load_csv_dataset(path, {"y"}, nullptr, &model).features()),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(host_values(load_csv_features(path, {"y"}, &model)),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(model.names, (std::vector<std::string>{"a", "b", "c"}));  // given names stay

  CsvFeatureColumns wider{{"a", "b", "c", "d", "e"}};
  expect_error<IoError>([&] { load_csv_features(path, {"y"}, &wider); },
                        {"t.csv: no column 'd', 'e' in the header", "'a', 'b', 'c', 'd', 'e'"});
  CsvFeatureColumns narrower{{"a", "c"}};
  expect_error<IoError>([&] { load_csv_features(path, {"y"}, &narrower); },
                        {"t.csv: column 'b' is neither one of the model's feature columns"});
  // A target is never taken for a feature of that name.
  CsvFeatureColumns target_named{{"a", "b", "y"}};
  expect_error<IoError>(
      [&] { load_csv_dataset(path, {"y"}, nullptr, &target_named); },
      {"t.csv: column 'y' is named a target, but the model takes it as a feature"});
}

// --ignore-columns and --keep-columns (issue 30): an `id` column is neither feature nor target;
// a kept one is read as written, row by row, for predict to pass through; every misuse is named.
TEST(CsvReader, IgnoredAndKeptColumnsAreNeitherFeatureNorTarget) {
  ScratchDir dir;
  const std::string path = dir.write_raw("t.csv", "id,a,y,note,b\nr1,1,0,\"x, y\",2\nr2,3,1,z,4\n");
  // Training: the ignored and kept columns are left out of the features and their names.
  CsvFeatureColumns train;
  train.ignored = {"id"};
  train.kept = {"note"};
  const TensorDataset ds = load_csv_dataset(path, {"y"}, nullptr, &train);
  EXPECT_EQ(train.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(host_values(ds.features()), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{0, 1}));
  EXPECT_EQ(train.kept_cells, (std::vector<std::string>{"x, y", "z"}));
  // By the model's names: a kept column may be a feature too, and a target can be kept.
  CsvFeatureColumns model{{"b", "a"}};
  model.ignored = {"note"};
  model.kept = {"id", "a", "y"};
  EXPECT_EQ(host_values(load_csv_features(path, {"y"}, &model)), (std::vector<double>{2, 1, 4, 3}));
  EXPECT_EQ(model.kept_cells, (std::vector<std::string>{"r1", "1", "0", "r2", "3", "1"}));
  // Without the flags the id column is refused, and the message names the flags: --keep-columns
  // only for a command that takes it (predict; issue 33: evaluate's message named it too).
  CsvFeatureColumns bare{{"a", "b"}};
  bare.keep_flag = true;
  expect_error<IoError>([&] { load_csv_features(path, {"y"}, &bare); },
                        {"column 'id', 'note' is neither", "--ignore-columns", "--keep-columns"});
  CsvFeatureColumns evaluate{{"a", "b"}};  // keep_flag false: the command has no --keep-columns
  try {
    load_csv_dataset(path, {"y"}, nullptr, &evaluate);
    ADD_FAILURE() << "no IoError for the id and note columns";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("column 'id', 'note' is neither"), std::string::npos) << what;
    EXPECT_NE(what.find("name it with --ignore-columns"), std::string::npos) << what;
    EXPECT_EQ(what.find("--keep-columns"), std::string::npos) << what;
  }
  const auto refused = [&](std::vector<std::string> ignored, std::vector<std::string> kept,
                           std::vector<std::string> names, std::vector<std::string> want) {
    CsvFeatureColumns f{std::move(names)};
    f.ignored = std::move(ignored);
    f.kept = std::move(kept);
    try {
      load_csv_dataset(path, {"y"}, nullptr, &f);
      ADD_FAILURE() << "no IoError; wanted '" << want.front() << "'";
    } catch (const IoError& e) {
      for (const std::string& part : want)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused({"ID"}, {}, {}, {"t.csv: --ignore-columns names column 'ID'", "lacks", "'id', 'a'"});
  refused({}, {"nope"}, {}, {"--keep-columns names column 'nope'", "lacks"});
  refused({"id", "id"}, {}, {}, {"--ignore-columns names column 'id' twice"});
  refused({}, {"id", "id"}, {}, {"--keep-columns names column 'id' twice"});
  refused({"id"}, {"id"}, {}, {"'id' is named by both --ignore-columns and --keep-columns"});
  refused({"y"}, {}, {}, {"'y' is named by --ignore-columns but is a target"});
  refused({"a"}, {}, {"a", "b"}, {"'a' is named by --ignore-columns but the model takes it"});
  refused({"a", "b", "id", "note"}, {}, {}, {"leaves no features"});
}

// Issue 33: a model trained with --ignore-columns id keeps that in its weights ('ignore_columns'),
// and evaluate/predict pass it as model_ignored: the id is ignored where the table has it, a table
// without it is read as well, and a flag that names the column otherwise (kept) wins.
TEST(CsvReader, TheTrainingsIgnoredColumnsAreIgnoredWhereTheTableHasThem) {
  ScratchDir dir;
  const std::string with_id = dir.write_raw("t.csv", "id,a,y,b\nr1,1,0,2\nr2,3,1,4\n");
  const std::string without = dir.write_raw("n.csv", "b,a\n2,1\n4,3\n");
  CsvFeatureColumns model{{"a", "b"}};
  model.model_ignored = {"id"};
  EXPECT_EQ(host_values(load_csv_dataset(with_id, {"y"}, nullptr, &model).features()),
            (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(host_values(load_csv_features(without, {"y"}, &model)),
            (std::vector<double>{1, 2, 3, 4}));
  CsvFeatureColumns kept{{"a", "b"}};  // predict --keep-columns id: passed through, not ignored
  kept.model_ignored = {"id"};
  kept.kept = {"id"};
  EXPECT_EQ(host_values(load_csv_features(with_id, {"y"}, &kept)),
            (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(kept.kept_cells, (std::vector<std::string>{"r1", "r2"}));
  CsvFeatureColumns old_weights{{"a", "b"}};  // weights without 'ignore_columns': refused as before
  expect_error<IoError>([&] { load_csv_features(with_id, {"y"}, &old_weights); },
                        {"column 'id' is neither"});
}

TEST(CsvReader, TextInARegressionTargetHintsAtAClassifier) {
  ScratchDir dir;
  const std::string path = dir.write_raw("t.csv", "a,species\n1,setosa\n");
  expect_error<IoError>([&] { load_csv_dataset(path, {"species"}); },
                        {"t.csv:2: column 'species' (2): 'setosa' is not a number",
                         "train with --loss cross_entropy"});
  const std::string feature = dir.write_raw("f.csv", "a,y\nx,1\n");
  try {  // a text feature is no label: no hint
    load_csv_dataset(feature, {"y"});
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()).find("cross_entropy"), std::string::npos) << e.what();
  }
}

TEST(CsvReader, AcceptsEveryPlainNumberForm) {
  ScratchDir dir;
  const std::string path = dir.write_raw("n.csv", "x,y\n+1,.5\n5.,-0\n1e-3,1E+2\n1e-50,0.1\n");
  const TensorDataset ds = load_csv_dataset(path, {"y"});
  EXPECT_EQ(host_values(ds.features()),
            (std::vector<double>{1, 5, double(1e-3f), 0}));  // 1e-50 underflows to 0 in float32
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{0.5, 0, 100, double(0.1f)}));
}

TEST(CsvReader, BadCellNamesFileLineAndColumn) {
  ScratchDir dir;
  // Line 3 is blank and still counted: the bad row is line 4 of the file.
  const std::string path = dir.write_raw("data.csv", "id,height,age,y\n1,2,3,4\n\n5,6,abc,8\n");
  expect_error<IoError>([&] { load_csv_dataset(path, {"y"}); },
                        {path + ":4: column 'age' (3): 'abc' is not a number"});
}

TEST(CsvReader, RejectsMissingAndNonFiniteValues) {
  ScratchDir dir;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"nan", "'nan' is not a finite number"},
      {"inf", "'inf' is not a finite number"},
      {"-inf", "'-inf' is not a finite number"},
      {"", "empty cell"},
      {"\"\"", "empty cell"},
      {"1e", "'1e' is not a number"},
      {"1.5x", "'1.5x' is not a number"},
      {"0x10", "'0x10' is not a number"},
      {"1e39", "'1e39' is too large for float32"},
      {"1e400", "'1e400' is too large for float32"},
      {"--1", "'--1' is not a number"}};
  for (const auto& [cell, message] : cases) {
    SCOPED_TRACE("cell: " + cell);
    const std::string path = dir.write_raw("bad.csv", "x,y\n1,2\n" + cell + ",3\n");
    expect_error<IoError>([&] { load_csv_dataset(path, {"y"}); },
                          {path + ":3: column 'x' (1): " + message});
  }
}

TEST(CsvReader, WrongCellCountNamesExpectedAndFound) {
  ScratchDir dir;
  const std::string short_row = dir.write_raw("s.csv", "a,b,c,y\n1,2,3,4\n1,2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(short_row, {"y"}); },
                        {short_row + ":3:", "expected 4 cells", "found 3"});
  const std::string long_row = dir.write_raw("l.csv", "a,y\n1,2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(long_row, {"y"}); },
                        {long_row + ":2:", "expected 2 cells", "found 3"});
}

TEST(CsvReader, UnknownTargetColumnListsTheHeader) {
  ScratchDir dir;
  const std::string path = dir.write_raw("h.csv", "alpha,beta,gamma\n1,2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(path, {"delta"}); },
                        {path, "'delta'", "'alpha', 'beta', 'gamma'"});
}

TEST(CsvReader, RejectsDuplicateHeaderNamesAndRepeatedTargets) {
  ScratchDir dir;
  const std::string dup = dir.write_raw("d.csv", "a,b,a\n1,2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(dup, {"b"}); },
                        {dup + ":1:", "'a' appears twice", "columns 1 and 3"});
  const std::string ok = dir.write_raw("ok.csv", "a,b,c\n1,2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(ok, {"b", "b"}); }, {ok, "'b'", "twice"});
  expect_error<IoError>([&] { load_csv_dataset(ok, {"a", "b", "c"}); }, {ok, "no features"});
  expect_error<ValueError>([&] { load_csv_dataset(ok, {}); }, {"no target columns"});
}

TEST(CsvReader, RejectsEmptyFilesAndHeaderOnlyFiles) {
  ScratchDir dir;
  const std::string empty = dir.write_raw("e.csv", "");
  expect_error<IoError>([&] { load_csv_dataset(empty, {"y"}); }, {empty, "empty"});
  const std::string blank = dir.write_raw("b.csv", "\n \r\n\n");
  expect_error<IoError>([&] { load_csv_dataset(blank, {"y"}); }, {blank, "empty"});
  const std::string header_only = dir.write_raw("h.csv", "x,y\r\n\r\n");
  expect_error<IoError>([&] { load_csv_dataset(header_only, {"y"}); },
                        {header_only, "no data rows"});
}

TEST(CsvReader, MissingFileAndBrokenQuotesAreIoErrors) {
  ScratchDir dir;
  expect_error<IoError>([&] { load_csv_dataset(dir.path("absent.csv"), {"y"}); },
                        {dir.path("absent.csv")});
  const std::string open_quote = dir.write_raw("q.csv", "x,y\n1,2\n\"3,4\n");
  expect_error<IoError>([&] { load_csv_dataset(open_quote, {"y"}); },
                        {open_quote + ":3:", "never closed"});
  const std::string after_quote = dir.write_raw("a.csv", "x,y\n\"1\"2,3\n");
  expect_error<IoError>([&] { load_csv_dataset(after_quote, {"y"}); },
                        {after_quote + ":2:", "closing quote"});
}

TEST(CsvReader, ReadsManyRowsExactly) {
  ScratchDir dir;
  const int64_t n = 50000;
  std::string text = "i,half,y\n";
  for (int64_t r = 0; r < n; ++r)
    text += std::to_string(r) + "," + std::to_string(r) + ".5," + std::to_string(-r) + "\n";
  const TensorDataset ds = load_csv_dataset(dir.write_raw("big.csv", text), {"y"});
  ASSERT_EQ(ds.size(), n);
  const std::vector<double> x = host_values(ds.features());
  const std::vector<double> y = host_values(ds.targets());
  for (int64_t r = 0; r < n; r += 997) {
    EXPECT_EQ(x[2 * r], double(r));
    EXPECT_EQ(x[2 * r + 1], double(float(r + 0.5)));
    EXPECT_EQ(y[r], double(-r));
  }
}

// Issue 30: whatever class name csv_field writes (predict's CSV outputs) reads back as written.
TEST(CsvReader, ClassNamesWrittenByCsvFieldReadBackAsWritten) {
  const std::vector<std::string> names = {" padded",    "a,b",        "plain",
                                          "say \"hi\"", "two\nlines", "win\r\nline"};
  std::string text = "x,y\n";
  for (std::size_t i = 0; i < names.size(); ++i)
    text += std::to_string(i) + "," + csv_field(names[i]) + "\n";
  ScratchDir dir;
  CsvClassLabels labels;
  const TensorDataset ds = load_csv_dataset(dir.write_raw("t.csv", text), {"y"}, &labels);
  EXPECT_EQ(labels.names, names);  // sorted already, so index i is names[i]
  EXPECT_EQ(host_values(ds.targets()), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

}  // namespace
}  // namespace minitrain
