#pragma once
// Held-out numbers for a trained model: `minitrain evaluate`. The model is rebuilt from its
// weights file (train/trained_model.h) and run on a labelled data set in eval mode; the metrics
// are computed in float64 over every row.

#include <cstdint>
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
  std::string device = "auto";
  int64_t batch_size = 4096;
};

/// Regression metrics over all rows and outputs. `loss` is what training minimises and logs:
/// torch's MSELoss with reduction 'mean' over every element.
struct Evaluation {
  int64_t rows = 0;
  int64_t outputs = 0;
  double loss = 0;  ///< mean squared error
  double mae = 0;   ///< mean absolute error
  double rmse = 0;  ///< sqrt(loss)
  double r2 = 0;    ///< coefficient of determination, averaged over the outputs (sklearn's default)
};

/// Checks the inputs (weights against their model, data shapes against it) and evaluates.
Evaluation run_evaluate(const EvaluateConfig& config);

/// {"rows":..,"outputs":..,"loss":..,"mse":..,"mae":..,"rmse":..,"r2":..} on one line.
std::string evaluation_json(const Evaluation& e);

}  // namespace minitrain
