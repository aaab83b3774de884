#pragma once
// The run's data, as `minitrain train` reads it before the first step: the table, the .npy pair
// or the synthetic rows, checked against the model; the rows held out (--val-split, --val-data);
// the scaler fitted on the rows trained on (--standardize); the loss's weights (--class-weights,
// --pos-weight); and how the loader draws the rows (--sample-weights, ddp's share per rank).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/standard_scaler.h"
#include "nn/loss.h"
#include "train/config.h"

namespace minitrain {

/// The rows to train on and to hold out, and the loss they are scored with.
struct RunData {
  std::shared_ptr<const Dataset> train, val;  ///< val: null without validation
  std::string val_source;                     ///< "--val-data F" or "--val-split F of --data"
  std::vector<std::string> classes;           ///< a CSV label column's class names
  std::vector<std::string> feature_columns;   ///< a CSV table's feature columns, in input order
  std::string label_note;                     ///< a regression on what look like class ids
  int64_t data_rows = 0;                      ///< --data's rows, before any --val-split
  std::vector<int64_t> train_rows;            ///< --val-split: the --data rows trained on
  StandardScaler scaler;                      ///< --standardize: fitted on the training rows
  LossOptions loss;
};

/// Reads and checks the data of `config` for a model of widths `sizes` (mlp:IN,...,OUT) whose
/// loss takes class labels when `classifier`. Throws the library's typed errors, naming the flag.
RunData load_run_data(const TrainConfig& config, const std::vector<int64_t>& sizes,
                      bool classifier);

/// --sample-weights: one weight per --data row, split with the rows (those --val-split leaves for
/// training). Empty without the flag.
std::vector<double> train_sample_weights(const TrainConfig& config, const RunData& data);

/// The loader of the training rows on `device`: --batch-size is per rank (as in torch); each rank
/// takes its share of every epoch's order (`ddp`), or of the epoch's weighted draw.
DataLoaderOptions loader_options(const TrainConfig& config, Device device, bool ddp,
                                 const Dataset& train, const std::vector<double>& sample_weights,
                                 int rank, int world);

/// Rows of "synthetic[:N]" (8192 when N is not given).
int64_t synthetic_rows(const std::string& data_spec);
inline constexpr int64_t kDefaultSyntheticRows = 8192;

}  // namespace minitrain
