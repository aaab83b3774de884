// `minitrain evaluate`: weights + labelled data -> loss and metrics as JSON.

#include "infer/evaluate.h"

#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/finite.h"
#include "core/strings.h"
#include "data/class_labels.h"
#include "data/readers.h"
#include "infer/predict.h"
#include "infer/trained_model.h"
#include "train/validation.h"

namespace minitrain {
namespace {

// The mean over the classes present in `labels` of the share of their rows predicted as them
// (argmax, first of ties): accuracy that a majority class cannot carry alone.
double balanced_accuracy(const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.size(0), classes = logits.size(1);
  const float* z = logits.data<float>();
  const float* y = labels.data<float>();
  std::vector<double> hits(static_cast<std::size_t>(classes), 0.0),
      rows(static_cast<std::size_t>(classes), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const auto label = static_cast<int64_t>(y[i]);
    if (label < 0 || label >= classes) continue;  // ignore_index
    int64_t best = 0;
    for (int64_t j = 1; j < classes; ++j)
      if (z[i * classes + j] > z[i * classes + best]) best = j;
    rows[static_cast<std::size_t>(label)] += 1;
    hits[static_cast<std::size_t>(label)] += best == label;
  }
  double sum = 0, present = 0;
  for (int64_t k = 0; k < classes; ++k)
    if (rows[static_cast<std::size_t>(k)] > 0) {
      sum += hits[static_cast<std::size_t>(k)] / rows[static_cast<std::size_t>(k)];
      present += 1;
    }
  return present > 0 ? sum / present : std::nan("");
}

// bce_with_logits: the share of outputs whose class (1 where the logit is > 0, predict's rule)
// is the target's; NaN unless every target is 0 or 1 (soft labels have no class).
double binary_accuracy(const Tensor& logits, const Tensor& targets) {
  const Tensor z = logits.to(Device::cpu());
  const float* l = z.data<float>();
  const float* t = targets.data<float>();
  double hits = 0;
  for (int64_t i = 0; i < z.numel(); ++i) {
    if (t[i] != 0.0f && t[i] != 1.0f) return std::nan("");
    hits += (l[i] > 0) == (t[i] == 1.0f);
  }
  return hits / static_cast<double>(z.numel());
}

}  // namespace

Evaluation run_evaluate(const EvaluateConfig& c) {
  MT_CHECK_AS(ValueError, !c.weights.empty(), "evaluate needs --weights W.safetensors");
  MT_CHECK_AS(ValueError, !c.data.empty(),
              "evaluate needs --data X.npy --targets Y.npy, or --data T.csv");
  const Device device = Device::parse(c.device);
  check_available(device);
  const TrainedModel trained = load_trained_model(c.weights, c.model, c.activation, device);

  const bool csv = ends_with(c.data, ".csv");
  MT_CHECK_AS(ValueError, csv || ends_with(c.data, ".npy"), "--data ", c.data,
              ": the extension says the format, and it is neither .npy nor .csv");
  // The targets are what the model predicts: a table's other columns would only give numbers.
  MT_CHECK_AS(ValueError,
              c.target_columns.empty() || trained.target_columns.empty() ||
                  c.target_columns == trained.target_columns,
              "--target-columns ", join(c.target_columns, ","),
              " contradicts the weights: ", c.weights, " was trained to predict ",
              join(trained.target_columns, ","),
              " (its metadata 'target_columns'); leave --target-columns out");
  const std::vector<std::string> targets =
      c.target_columns.empty() ? trained.target_columns : c.target_columns;
  MT_CHECK_AS(ValueError, !csv || !targets.empty(), "--data ", c.data,
              ": which columns are the targets? The weights do not say (trained on .npy data, "
              "or made by PyTorch): give --target-columns a,b");
  MT_CHECK_AS(ValueError, csv || !c.targets.empty(), "--data ", c.data,
              " needs --targets Y.npy (the labels to compare with)");
  CsvClassLabels labels{trained.classes, /*held_out=*/true};  // the training's kind and classes
  CsvFeatureColumns features{trained.feature_columns};        // by name where the weights know them
  features.ignored = c.ignore_columns;
  // The training's ignored columns, unless --ignore-columns says which (the flag wins).
  if (c.ignore_columns.empty()) features.model_ignored = trained.ignore_columns;
  MT_CHECK_AS(ValueError, csv || c.ignore_columns.empty(),
              "--ignore-columns is for a CSV --data, "
              "but --data is ",
              c.data);
  const TensorDataset raw =
      csv ? load_csv_dataset(c.data, targets, trained.classifier() ? &labels : nullptr, &features)
          : load_npy_dataset(c.data, c.targets);
  // The model's input: standardised by the training rows' statistics where it was trained so.
  const auto data = std::make_shared<TensorDataset>(raw.feature_dim() == trained.sizes.front()
                                                        ? trained.model_input(raw.features())
                                                        : raw.features(),
                                                    raw.targets());
  const int64_t in = trained.sizes.front(), out = trained.sizes.back();
  const int64_t target_dim = trained.classifier() ? 1 : out;
  MT_CHECK_AS(ShapeError, data->feature_dim() == in && data->target_dim() == target_dim, "--data ",
              c.data, " has ", data->feature_dim(), " feature(s) and ", data->target_dim(),
              " target(s) but the model ", trained.spec, " takes ", in, " and gives ", out,
              trained.classifier() ? " class logits (a classifier: one label per row)" : "");
  if (trained.classifier())
    check_class_labels(data->targets(), out, LossOptions{}.ignore_index,
                       c.targets.empty() ? c.data : c.targets);

  // No score from non-finite outputs: an inf prediction once gave "r2 0.0" with exit 0. An error
  // rather than a NaN score: JSON has no NaN (it would be a null that scripts misread), and a
  // non-zero exit cannot be taken for a result.
  const Tensor y = predict(*trained.model, data->features(), device, c.batch_size);
  if (const int64_t bad = first_non_finite(y); bad >= 0)
    MT_THROW(ValueError, "--weights ", c.weights,
             ": the model's predictions are not finite: ", non_finite_name(y, bad), " at row ",
             bad / y.size(1), ", output ", bad % y.size(1), " (0-based) of --data ", c.data,
             "; no score is computed from them (the weights are finite but too large for these "
             "inputs: check the weights and the data's scale)");

  // The trained loss, as training's held-out evaluation computes it.
  ValidatorOptions vo;
  vo.loss = trained.loss;  // with its settings (metadata 'loss_settings'), as trained
  vo.batch_size = c.batch_size;
  vo.device = device;
  const ValMetrics vm = Validator(data, vo).evaluate(*trained.model);
  Evaluation e;
  e.rows = data->size();
  e.outputs = out;
  e.loss_name = trained.loss.name;
  e.loss = vm.loss;
  if (trained.classifier()) {
    e.classifier = true;
    e.accuracy = vm.accuracy;
    e.balanced_accuracy = balanced_accuracy(y, data->targets());
    return e;
  }

  // The errors of what the loss compares with the targets: a poisson_nll model's rate, not its log
  // (its r2 was once -0.6 on the log where the rate's is 0.3), a bce model's probabilities.
  const Tensor values = trained.target_values(y);
  const float* got = values.data<float>();
  const float* want = data->targets().data<float>();
  if (trained.loss.name == "bce_with_logits")
    e.binary_accuracy = binary_accuracy(y, data->targets());
  // Two passes in float64: the targets' means, then the errors and the spread about the means
  // (r2's total variance without the cancellation of sum(t^2) - sum(t)^2 / n).
  std::vector<double> mean(static_cast<std::size_t>(out), 0.0);
  for (int64_t i = 0; i < e.rows; ++i)
    for (int64_t j = 0; j < out; ++j) mean[j] += want[i * out + j];
  const double n = static_cast<double>(e.rows);
  for (double& m : mean) m /= n;
  std::vector<double> sq(mean.size(), 0.0), abs_err(mean.size(), 0.0), spread(mean.size(), 0.0);
  for (int64_t i = 0; i < e.rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      const double t = want[i * out + j], d = double(got[i * out + j]) - t;
      sq[j] += d * d;
      abs_err[j] += std::abs(d);
      spread[j] += (t - mean[j]) * (t - mean[j]);
    }
  const double elements = n * static_cast<double>(out);
  double r2_sum = 0;
  for (int64_t j = 0; j < out; ++j) {
    e.mse += sq[j] / elements;
    e.mae += abs_err[j] / elements;
    // A constant target: r2 is 1 for a perfect fit, else 0 (sklearn's convention).
    r2_sum += spread[j] > 0 ? 1.0 - sq[j] / spread[j] : (sq[j] == 0 ? 1.0 : 0.0);
  }
  e.rmse = std::sqrt(e.mse);
  if (trained.loss.name == "mse") e.loss = e.mse;  // the same number, from the float64 sums above
  e.r2 = r2_sum / static_cast<double>(out);
  return e;
}

std::string evaluation_json(const Evaluation& e) {
  nlohmann::ordered_json j;
  j["rows"] = e.rows;
  if (e.classifier) {
    j["classes"] = e.outputs;
    j["loss"] = e.loss;
    j["accuracy"] = e.accuracy;
    j["balanced_accuracy"] = e.balanced_accuracy;
    j["loss_name"] = e.loss_name;
    return j.dump();
  }
  j["outputs"] = e.outputs;
  j["loss"] = e.loss;
  j["mse"] = e.mse;
  j["mae"] = e.mae;
  j["rmse"] = e.rmse;
  j["r2"] = e.r2;
  if (!std::isnan(e.binary_accuracy)) j["accuracy"] = e.binary_accuracy;
  j["loss_name"] = e.loss_name;
  return j.dump();
}

}  // namespace minitrain
