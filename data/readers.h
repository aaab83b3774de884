#pragma once
// Reading training data: a pair of .npy files, a CSV table with a header row, or the built-in
// synthetic regression. Every bad input is an IoError/ShapeError naming the file and the place.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace minitrain {

/// The class names of a CSV label column (see load_csv_dataset): index order; empty for numbers.
/// `held_out`: the labels of held-out data (--val-data, evaluate), which take the training's kind
/// and classes: its names when it had text labels, else class numbers (a text label is an error).
struct CsvClassLabels {
  std::vector<std::string> names;
  bool held_out = false;
};

/// Features X.npy [N, in] and targets Y.npy [N, out] or [N] (float, or integer class labels read
/// exactly); ShapeError naming both files and
/// shapes when N differs or a file has the wrong rank, IoError for a missing or malformed file
/// or N = 0.
/// The feature columns of a CSV table, by header name. Empty: set to the table's feature columns
/// (every column but the targets) in file order, as training reads them. Given (a trained
/// model's, from its weights' metadata 'feature_columns'): the features are these columns in this
/// order, wherever the file has them, so that a table whose columns come in another order is read
/// as the model was trained; a column among them that the header lacks, or a column that is
/// neither one of them nor a target, is an IoError naming the columns and the file.
///
/// `ignored` (--ignore-columns) are neither features nor targets (an `id`): not read at all.
/// `kept` (--keep-columns) are read as text, as written, into `kept_cells` (row-major, rows x
/// kept.size()) for predict to pass through; a kept column is a feature only where `names` (the
/// model's) says so. A name in either list that the header lacks, a name given twice, a column
/// both ignored and kept, or ignored and a target or one of `names`, is an IoError naming it.
struct CsvFeatureColumns {
  CsvFeatureColumns() = default;
  explicit CsvFeatureColumns(std::vector<std::string> model_names)
      : names(std::move(model_names)) {}
  std::vector<std::string> names;
  std::vector<std::string> ignored;
  std::vector<std::string> kept;
  std::vector<std::string> kept_cells;  ///< out: each row's kept cells, as written
  /// The training's --ignore-columns (a trained model's metadata 'ignore_columns'): ignored too
  /// where the header has them and nothing else names them (kept, a target, one of `names`); a
  /// table without them (rows to predict, without their `id`) is read all the same.
  std::vector<std::string> model_ignored;
  /// The running command takes --keep-columns (predict): only then does advice name that flag.
  bool keep_flag = false;
};

TensorDataset load_npy_dataset(const std::string& features_path, const std::string& targets_path);

/// A CSV file with a header row. `target_columns` (by header name) are the targets, in that order;
/// every other column is a feature, in file order. A cell that is not a number is an IoError
/// naming file, line and column: "data.csv:17: column 'age' (3): 'abc' is not a number" (lines
/// and columns count from 1, the header is line 1); empty cells, nan and inf are errors too. So
/// is a row with the wrong number of cells, a repeated header name, an unknown or repeated
/// target column, no feature column left, an empty file or one with no data rows. Quoted cells
/// ("1.5"), spaces around cells, CRLF line ends, a UTF-8 BOM and blank lines are accepted.
/// Values are parsed as float64 and rounded to float32. ValueError for no target columns.
///
/// With `class_labels` the one target column holds class labels: numbers (taken as class indices,
/// which the caller checks against the classes; each must be a whole number as written, at most
/// kMaxExactClassLabel in magnitude, else an IoError naming the line and the value), or any text.
/// Text labels become indices in the order of class_labels->names: given (the training table's
/// classes, for held-out data; a label outside them is an IoError naming the line), or when empty
/// set to the sorted distinct labels.
/// With `feature_columns`, the features are read by name (see CsvFeatureColumns); without, in
/// file order.
TensorDataset load_csv_dataset(const std::string& path,
                               const std::vector<std::string>& target_columns,
                               CsvClassLabels* class_labels = nullptr,
                               CsvFeatureColumns* feature_columns = nullptr);

/// The feature columns of a CSV table, for prediction: every column but those of `drop_columns`
/// that the header has (the targets of the table the model was trained on; columns it lacks are
/// no error, so unlabelled data reads too), in file order, as float32 [rows, features]. The dropped
/// columns are not read (text class labels are fine). Otherwise the checks of load_csv_dataset;
/// `feature_columns` as there.
Tensor load_csv_features(const std::string& path, const std::vector<std::string>& drop_columns = {},
                         CsvFeatureColumns* feature_columns = nullptr);

/// The built-in task: x ~ U(-1, 1)^in, y_j = sum_i sin((i + j + 1) x_i) / sqrt(in) + 0.1 * x_{j mod
/// in}^2 plus N(0, noise^2). A fixed smooth nonlinear function of the inputs, learnable by an MLP.
/// Deterministic from `seed` (one Philox Generator: x drawn first, then the noise). ValueError for
/// n < 1, in_dim < 1, out_dim < 1, or a negative or non-finite noise.
TensorDataset make_synthetic_regression(int64_t n, int64_t in_dim, int64_t out_dim, uint64_t seed,
                                        double noise = 0.01);

}  // namespace minitrain
