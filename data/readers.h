#pragma once
// Reading training data: a pair of .npy files, a CSV table with a header row, or the built-in
// synthetic regression. Every bad input is an IoError/ShapeError naming the file and the place.

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace minitrain {

/// Features X.npy [N, in] and targets Y.npy [N, out] or [N]; ShapeError naming both files and
/// shapes when N differs, IoError for a missing or malformed file.
TensorDataset load_npy_dataset(const std::string& features_path, const std::string& targets_path);

/// A CSV file with a header row. `target_columns` (by header name) are the targets; every other
/// column is a feature. A cell that is not a number is an IoError naming file, line and column;
/// so is a row with the wrong number of cells, an unknown or repeated target column, an empty
/// table. Quoted cells ("1.5") and CRLF line ends are accepted.
TensorDataset load_csv_dataset(const std::string& path, const std::vector<std::string>& target_columns);

/// The built-in task: x ~ U(-1, 1)^in, y_j = sum_i sin((i + j + 1) x_i) / sqrt(in) + 0.1 * x_{j mod in}^2
/// plus N(0, noise^2). A fixed smooth nonlinear function of the inputs, learnable by an MLP.
TensorDataset make_synthetic_regression(int64_t n, int64_t in_dim, int64_t out_dim, uint64_t seed,
                                        double noise = 0.01);

}  // namespace minitrain
