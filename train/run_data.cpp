// The run's data (train/run_data.h): read, checked against the model, split, standardised, and
// the loss's and the sampler's weights, all before the first step.

#include "train/run_data.h"

#include <algorithm>
#include <cmath>

#include "core/npy.h"
#include "core/strings.h"
#include "data/class_labels.h"
#include "data/holdout_split.h"
#include "data/npy_file_dataset.h"
#include "data/readers.h"
#include "data/sampler.h"
#include "train/flag_context.h"

namespace minitrain {
namespace {

// The synthetic data's seed, apart from the init's: the same Philox seed would make the first
// inputs and the first weights the same numbers.
constexpr uint64_t kDataSeedMix = 0x9E3779B97F4A7C15ull;

// A table or a pair of .npy files; a classifier's CSV label column is read as class labels.
// `features`: empty, set to the table's feature columns; given (--val-data), read by those names.
TensorDataset load_table(const std::string& data, const std::string& targets, const TrainConfig& c,
                         CsvClassLabels* labels, CsvFeatureColumns* features) {
  if (ends_with(data, ".npy")) return load_npy_dataset(data, targets);
  CsvFeatureColumns none;
  if (features == nullptr) features = &none;  // --ignore-columns applies all the same
  features->ignored = c.ignore_columns;
  return load_csv_dataset(data, c.target_columns, labels, features);
}

void check_data_fits_model(const Dataset& d, const std::string& source, const TrainConfig& c,
                           const std::vector<int64_t>& sizes, bool classifier) {
  if (d.feature_dim() != sizes.front()) {
    std::vector<int64_t> fixed = sizes;
    fixed.front() = d.feature_dim();
    MT_THROW(ShapeError, source, " has ", d.feature_dim(),
             " feature column(s) per row but --model ", c.model, " expects ", sizes.front(),
             " inputs; use --model mlp:", join(fixed, ","));
  }
  if (classifier) {
    MT_CHECK_AS(ShapeError, d.target_dim() == 1, source, " has ", d.target_dim(),
                " target columns per row, but --loss ", c.loss,
                " takes one class label per row (for one-hot targets, save their argmax)");
    return;
  }
  if (d.target_dim() != sizes.back()) {
    std::vector<int64_t> fixed = sizes;
    fixed.back() = d.target_dim();
    MT_THROW(ShapeError, source, " has ", d.target_dim(), " target(s) per row but --model ",
             c.model, " has ", sizes.back(), " outputs; use --model mlp:", join(fixed, ","));
  }
}

// A regression whose one target column holds a few whole numbers, 0 or more: perhaps class ids,
// which a regression treats as quantities (class 2 "between" 1 and 3). A note, not a refusal: a
// count or a rating is a fine regression target. The bound of 20 distinct values is a heuristic
// (scikit-learn's type_of_target calls any whole-number column 'multiclass').
std::string class_id_note(const TrainConfig& c, const Tensor& targets,
                          const std::vector<int64_t>& sizes) {
  if (!ends_with(c.data, ".csv") || targets.size(1) != 1) return "";
  constexpr std::size_t kMaxDistinct = 20;
  std::vector<float> distinct;
  const float* y = targets.data<float>();
  for (int64_t i = 0; i < targets.size(0); ++i) {
    if (y[i] < 0 || y[i] != std::floor(y[i])) return "";
    if (std::find(distinct.begin(), distinct.end(), y[i]) == distinct.end()) {
      if (distinct.size() == kMaxDistinct) return "";
      distinct.push_back(y[i]);
    }
  }
  if (distinct.size() < 2) return "";
  std::sort(distinct.begin(), distinct.end());
  std::vector<int64_t> shown(distinct.begin(), distinct.end());
  std::vector<int64_t> classifier = sizes;
  classifier.back() = shown.back() + 1;
  return "target column '" + c.target_columns.front() + "' holds only whole numbers (" +
         join(shown, ", ") + "); --loss " + c.loss +
         " trains a regression on them as quantities. If they are class ids, train a "
         "classifier: --loss cross_entropy --model mlp:" +
         join(classifier, ",") + " (one output per class)";
}

// Text class labels name the classes: the model needs one output per class.
void check_classes_fit_model(const std::vector<std::string>& classes, const TrainConfig& c,
                             const std::vector<int64_t>& sizes) {
  if (classes.empty() || static_cast<int64_t>(classes.size()) == sizes.back()) return;
  std::vector<int64_t> fixed = sizes;
  fixed.back() = static_cast<int64_t>(classes.size());
  MT_THROW(ShapeError, "--data ", c.data, " has ", classes.size(), " classes in column '",
           c.target_columns.front(), "' but --model ", c.model, " has ", sizes.back(),
           " outputs; a classifier has one output per class: use --model mlp:", join(fixed, ","));
}

// A weight per class (--class-weights W.npy) or per output (--pos-weight W.npy): a 1-D array of
// `count` finite weights >= 0.
std::vector<double> read_weights_file(const char* flag, const std::string& path, int64_t count,
                                      const char* per) {
  const Tensor w = read_npy(path);
  MT_CHECK_AS(ShapeError, w.ndim() == 1 && w.numel() == count, "--", flag, " ", path,
              " holds an array of shape ", w.shape(), " but the model has ", count, " ", per,
              "; give one weight per ", per == std::string("classes") ? "class" : "output",
              " (shape [", count, "])");
  const std::vector<double> values = w.to_double_vector();
  for (int64_t i = 0; i < count; ++i) {
    const double v = values[static_cast<std::size_t>(i)];
    MT_CHECK_AS(ValueError, std::isfinite(v) && v >= 0, "--", flag, " ", path, ": weight ", i,
                " is ", v, "; weights must be finite and >= 0");
  }
  return values;
}

// --class-weights: auto (balanced, from the training rows) or one weight per class from a file.
std::vector<double> read_class_weights(const TrainConfig& c,
                                       const std::vector<int64_t>& train_labels, int64_t classes) {
  if (c.class_weights.empty()) return {};
  if (c.class_weights == "auto") {
    std::vector<int64_t> counts(static_cast<std::size_t>(classes), 0);
    for (int64_t y : train_labels)
      if (y != c.ignore_index) ++counts[static_cast<std::size_t>(y)];
    return balanced_class_weights(counts);
  }
  return read_weights_file("class-weights", c.class_weights, classes, "classes");
}

// Issue 30: a table whose every training row is ignored (--ignore-index) or has class weight 0
// has no loss to learn from (torch's mean over zero weight is nan): refused up front, naming the
// values, rather than stopping the run later with advice about the learning rate.
void check_some_row_counts(const std::vector<int64_t>& labels, int64_t ignore_index,
                           const std::vector<double>& class_weights) {
  int64_t kept = 0, weighted = 0;
  for (int64_t y : labels) {
    if (y == ignore_index) continue;
    ++kept;
    weighted += class_weights.empty() || class_weights[static_cast<std::size_t>(y)] != 0;
  }
  MT_CHECK_AS(ValueError, kept > 0, "every one of the ", labels.size(), " training rows has label ",
              ignore_index, ", the --ignore-index: there is nothing to train on");
  if (weighted > 0) return;
  std::vector<std::string> w;
  for (double v : class_weights) w.push_back(number_text(v));
  MT_THROW(ValueError, "every one of the ", kept,
           " counted training rows has a class whose --class-weights weight is 0 (weights [",
           join(w, ", "), "]): there is nothing to train on");
}

// --sample-weights W.npy: one weight per row of the data, [rows] or [rows, 1].
std::vector<double> read_sample_weights(const std::string& path, int64_t rows) {
  const Tensor w = read_npy(path);  // an IoError names the file
  const bool column = w.ndim() == 1 || (w.ndim() == 2 && w.size(1) == 1);
  if (!column || w.numel() != rows)
    MT_THROW(ShapeError, "--sample-weights ", path, " holds an array of shape ", w.shape(), " (",
             w.numel(), " weights) but --data has ", rows,
             " rows; give one weight per --data row (shape [", rows, "]), before any --val-split");
  const std::vector<double> values = w.to_double_vector();
  // Bad weights (negative, NaN, all zero) are refused now, before anything is written.
  with_flag_context("--sample-weights " + path, [&] { WeightedRandomSampler(values, rows); });
  return values;
}

}  // namespace

int64_t synthetic_rows(const std::string& spec) {
  if (spec == "synthetic") return kDefaultSyntheticRows;
  MT_CHECK_AS(ValueError, starts_with(spec, "synthetic:"), "not a synthetic data spec: '", spec,
              "'");
  const std::string n = spec.substr(10);
  std::size_t used = 0;
  long long rows = 0;
  try {
    rows = std::stoll(n, &used);
  } catch (const std::exception&) {
  }
  MT_CHECK_AS(ValueError, used == n.size() && rows >= 1, "--data '", spec,
              "': the row count after 'synthetic:' must be a positive integer");
  return rows;
}

RunData load_run_data(const TrainConfig& c, const std::vector<int64_t>& sizes, bool classifier) {
  RunData d;
  const int64_t classes = sizes.back();
  CsvClassLabels labels;
  CsvClassLabels* wanted_labels = classifier ? &labels : nullptr;
  std::shared_ptr<const Dataset> all;
  Tensor all_targets;    // every row's targets, in memory (labels are checked and counted here)
  if (c.data_on_disk) {  // X.npy read as batches need it (data/npy_file_dataset.h)
    auto on_disk = std::make_shared<NpyFileDataset>(c.data, c.targets);
    all_targets = on_disk->targets();
    all = std::move(on_disk);
  } else if (ends_with(c.data, ".npy") || ends_with(c.data, ".csv")) {
    CsvFeatureColumns features;
    auto table =
        std::make_shared<TensorDataset>(load_table(c.data, c.targets, c, wanted_labels, &features));
    d.feature_columns = std::move(features.names);
    all_targets = table->targets();
    all = std::move(table);
  } else {
    MT_CHECK_AS(ValueError, !classifier, "--loss ", c.loss, " needs class labels, but --data ",
                c.data,
                " is a regression; give a table with a label column or X.npy with --targets "
                "Y.npy of labels");
    auto synthetic = std::make_shared<TensorDataset>(make_synthetic_regression(
        synthetic_rows(c.data), sizes.front(), sizes.back(), c.seed ^ kDataSeedMix));
    all_targets = synthetic->targets();
    all = std::move(synthetic);
  }
  check_data_fits_model(*all, "--data " + c.data, c, sizes, classifier);
  d.classes = labels.names;
  if (!classifier) d.label_note = class_id_note(c, all_targets, sizes);
  std::vector<int64_t> label_of_row;  // classifiers: every row's class
  if (classifier) {
    check_classes_fit_model(d.classes, c, sizes);
    check_class_labels(all_targets, classes, c.ignore_index,
                       c.targets.empty() ? c.data : c.targets);
    label_of_row = label_values(all_targets);
  }
  d.train = all;
  d.data_rows = all->size();
  std::vector<int64_t> train_rows;  // empty: all
  if (c.val_split > 0) {
    HoldoutSplit split = holdout_split(all->size(), c.val_split, c.seed, label_of_row);
    if (c.data_on_disk) {  // views: the rows stay on disk
      d.train = std::make_shared<RowsOf>(all, split.train);
      d.val = std::make_shared<RowsOf>(all, split.held_out);
    } else {
      d.train = std::make_shared<TensorDataset>(subset(*all, split.train));
      d.val = std::make_shared<TensorDataset>(subset(*all, split.held_out));
    }
    train_rows = std::move(split.train);
    d.train_rows = train_rows;
    d.val_source = "--val-split " + number_text(c.val_split) + " of --data";
  } else if (!c.val_data.empty()) {
    CsvClassLabels val_labels = labels;  // the training table's kind and classes, in its order
    val_labels.held_out = true;
    CsvFeatureColumns val_features{d.feature_columns};  // by name, as the training table's
    auto val = std::make_shared<TensorDataset>(
        load_table(c.val_data, c.val_targets, c, classifier ? &val_labels : nullptr,
                   d.feature_columns.empty() ? nullptr : &val_features));
    check_data_fits_model(*val, "--val-data " + c.val_data, c, sizes, classifier);
    if (classifier)
      check_class_labels(val->targets(), classes, c.ignore_index,
                         c.val_targets.empty() ? c.val_data : c.val_targets);
    d.val = std::move(val);
    d.val_source = "--val-data " + c.val_data;
  }
  if (c.standardize) {
    // Fitted on the rows trained on only (after the split): held-out rows must not leak into the
    // statistics, as sklearn's scaler is fitted on the training split. --data-on-disk is refused
    // with --standardize (config_validate.cpp), so the rows are in memory here.
    const auto& train = dynamic_cast<const TensorDataset&>(*d.train);
    d.scaler = fit_standard_scaler(train.features());
    d.train =
        std::make_shared<TensorDataset>(standardize(train.features(), d.scaler), train.targets());
    if (d.val) {
      const auto& val = dynamic_cast<const TensorDataset&>(*d.val);
      d.val = std::make_shared<TensorDataset>(standardize(val.features(), d.scaler), val.targets());
    }
  }
  if (classifier && !train_rows.empty()) {  // the labels of the rows trained on
    std::vector<int64_t> kept;
    for (int64_t r : train_rows) kept.push_back(label_of_row[static_cast<std::size_t>(r)]);
    label_of_row = std::move(kept);
  }
  d.loss = loss_options(c);  // the weights files' placeholders are replaced just below
  if (classifier) {
    d.loss.class_weights = read_class_weights(c, label_of_row, classes);
    check_some_row_counts(label_of_row, c.ignore_index, d.loss.class_weights);
  }
  if (!c.pos_weight.empty())
    d.loss.pos_weight = read_weights_file("pos-weight", c.pos_weight, sizes.back(), "outputs");
  return d;
}

// --batch-size is per rank (as in torch): each rank takes its share of every epoch's order, or
// of the epoch's weighted draw (made alike on every rank).
DataLoaderOptions loader_options(const TrainConfig& c, Device device, bool ddp,
                                 const Dataset& train, const std::vector<double>& sample_weights,
                                 int rank, int world) {
  DataLoaderOptions lo;
  lo.batch_size = c.batch_size;
  lo.shuffle = c.shuffle;
  lo.drop_last = c.drop_last;
  lo.seed = c.seed;
  lo.device = device;
  lo.workers = static_cast<int>(c.workers);  // validate() kept it within kMaxLoaderWorkers
  if (!sample_weights.empty())
    lo.sampler =
        std::make_shared<WeightedRandomSampler>(sample_weights, train.size(), c.seed, world, rank);
  else if (ddp)
    lo.sampler = std::make_shared<DistributedSampler>(train.size(), world, rank, c.shuffle, c.seed);
  return lo;
}

// --sample-weights: one weight per --data row, split with the rows: the rows --val-split leaves
// for training are not the user's to see (they once had to give weights for that invisible
// subset). Empty without the flag.
std::vector<double> train_sample_weights(const TrainConfig& c, const RunData& data) {
  if (c.sample_weights.empty()) return {};
  std::vector<double> weights = read_sample_weights(c.sample_weights, data.data_rows);
  if (data.train_rows.empty()) return weights;
  std::vector<double> kept;
  kept.reserve(data.train_rows.size());
  for (int64_t r : data.train_rows) kept.push_back(weights[static_cast<std::size_t>(r)]);
  with_flag_context("--sample-weights " + c.sample_weights + " (the rows --val-split trains on)",
                    [&] { WeightedRandomSampler(kept, data.train->size()); });
  return kept;
}

}  // namespace minitrain
