#pragma once
// Held-out numbers for a trained model: `minitrain evaluate`. The model is rebuilt from its
// weights file (infer/trained_model.h) and run on a labelled data set in eval mode; the metrics
// are computed in float64 over every row.

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minitrain {

struct EvaluateConfig {
  std::string weights;     ///< train --save weights, a checkpoint, or PyTorch's state_dict
  std::string model;       ///< "" : from the weights' metadata (as predict)
  std::string activation;  ///< "" : from the weights' metadata
  std::string data;        ///< X.npy (with targets) or T.csv
  std::string targets;     ///< Y.npy, with an X.npy data file
  std::vector<std::string> target_columns;  ///< for T.csv; empty: the weights' metadata's
  /// T.csv columns that are neither feature nor target; empty: the weights' metadata's
  /// 'ignore_columns' (the training's), where the table has them.
  std::vector<std::string> ignore_columns;
  std::string device = "auto";
  int64_t batch_size = 4096;
};

/// Metrics over all rows and outputs. `loss` is what training minimised and logs: the weights'
/// loss (metadata 'loss', mse when absent) with reduction 'mean', over every row.
struct Evaluation {
  int64_t rows = 0;
  int64_t outputs = 0;
  std::string loss_name = "mse";
  double loss = 0;
  // ---- classifiers (cross_entropy): top-1 accuracy and the mean of the per-class recalls ----
  bool classifier = false;
  double accuracy = 0;
  double balanced_accuracy = 0;  ///< over the classes that occur in the labels
  // ---- regressions, on the outputs as target values (TrainedModel::target_values: a
  // poisson_nll model's rate, a bce_with_logits model's probabilities: its mse is the Brier
  // score) ----
  double mse = 0;
  double mae = 0;   ///< mean absolute error
  double rmse = 0;  ///< sqrt(loss)
  double r2 = 0;    ///< coefficient of determination, averaged over the outputs (sklearn's default)
  /// bce_with_logits with 0/1 targets: the share of outputs classed right (logit > 0 is 1);
  /// NaN (not written) otherwise.
  double binary_accuracy = std::nan("");
};

/// Checks the inputs (weights against their model, data shapes against it) and evaluates.
Evaluation run_evaluate(const EvaluateConfig& config);

/// {"rows":..,"outputs":..,"loss":..,"mse":..,"mae":..,"rmse":..,"r2":..,"loss_name":..} on one
/// line (bce_with_logits with 0/1 targets: "accuracy" before "loss_name");
/// line; a classifier's: {"rows":..,"classes":..,"loss":..,"accuracy":..,"balanced_accuracy":..,
/// "loss_name":..}.
std::string evaluation_json(const Evaluation& e);

}  // namespace minitrain
