// `minitrain evaluate`: weights + labelled data -> loss and metrics as JSON.

#include "train/evaluate.h"

#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/strings.h"
#include "data/readers.h"
#include "train/predict.h"
#include "train/trained_model.h"

namespace minitrain {

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
  const TensorDataset data =
      csv ? load_csv_dataset(c.data, targets) : load_npy_dataset(c.data, c.targets);
  const int64_t in = trained.sizes.front(), out = trained.sizes.back();
  MT_CHECK_AS(ShapeError, data.feature_dim() == in && data.target_dim() == out, "--data ", c.data,
              " has ", data.feature_dim(), " feature(s) and ", data.target_dim(),
              " target(s) but the model ", trained.spec, " takes ", in, " and gives ", out);

  const Tensor y = predict(*trained.model, data.features(), device, c.batch_size);
  const float* got = y.data<float>();
  const float* want = data.targets().data<float>();
  Evaluation e;
  e.rows = data.size();
  e.outputs = out;
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
    e.loss += sq[j] / elements;
    e.mae += abs_err[j] / elements;
    // A constant target: r2 is 1 for a perfect fit, else 0 (sklearn's convention).
    r2_sum += spread[j] > 0 ? 1.0 - sq[j] / spread[j] : (sq[j] == 0 ? 1.0 : 0.0);
  }
  e.rmse = std::sqrt(e.loss);
  e.r2 = r2_sum / static_cast<double>(out);
  return e;
}

std::string evaluation_json(const Evaluation& e) {
  nlohmann::ordered_json j;
  j["rows"] = e.rows;
  j["outputs"] = e.outputs;
  j["loss"] = e.loss;
  j["mse"] = e.loss;
  j["mae"] = e.mae;
  j["rmse"] = e.rmse;
  j["r2"] = e.r2;
  return j.dump();
}

}  // namespace minitrain
