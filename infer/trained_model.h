#pragma once
// A trained model rebuilt from its weights file, as `minitrain predict` and `evaluate` need it:
// the model spec, activation and (for a table) target columns come from the file's metadata,
// which train --save and checkpoints write; flags only fill in what a file does not say (one made
// by PyTorch), and a flag that contradicts the file is an error.

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "data/standard_scaler.h"
#include "nn/loss.h"
#include "nn/module.h"

namespace minitrain {

struct TrainedModel {
  std::unique_ptr<Module> model;  ///< in eval-ready state, on the requested device
  std::string spec;               ///< mlp:IN,...,OUT
  std::vector<int64_t> sizes;     ///< the spec's widths
  std::string activation;
  std::vector<std::string> target_columns;  ///< the training table's targets; empty for .npy data
  /// The training table's feature columns in the order the model takes them (metadata
  /// 'feature_columns'); empty for .npy data and files that do not say (read by position).
  std::vector<std::string> feature_columns;
  /// The training table's --ignore-columns (metadata 'ignore_columns'; empty where the file does
  /// not say): predict and evaluate ignore them too unless --ignore-columns is given.
  std::vector<std::string> ignore_columns;
  /// train --standardize's statistics (metadata 'standardize_mean', 'standardize_scale'): the
  /// model takes standardize(x, scaler); empty when it was trained on the features as they are.
  StandardScaler scaler;
  /// The model's input for raw features x [N, in]: x standardised where the weights say so, else
  /// x itself.
  Tensor model_input(const Tensor& x) const;
  /// The loss it was trained with: metadata 'loss' (mse when absent) and 'loss_settings' (the
  /// settings away from their defaults; train/loss_metadata.h).
  LossOptions loss;
  std::vector<std::string> classes;  ///< a classifier's class names (metadata 'classes'), if any
  /// Trained on class labels (cross_entropy): its outputs are the classes' logits.
  bool classifier() const;
  /// How an output becomes a value of the targets' kind, what the loss compares with them: exp
  /// of poisson_nll's log rate (log_input) and of kl_div's log-probabilities (unless log_target),
  /// the sigmoid of bce_with_logits' logits, the others as they are.
  enum class OutputMap { None, Exp, Sigmoid };
  OutputMap output_map() const;
  /// The outputs mapped by output_map(), in double rounded to float: a host tensor.
  Tensor target_values(const Tensor& outputs) const;
};

/// Reads `weights` (train --save weights, a checkpoint, or PyTorch's state_dict) and builds its
/// model on `device`. `model_flag` / `activation_flag` ("" = not given) are used where the
/// metadata has no value; ValueError where they contradict it or where neither says.
TrainedModel load_trained_model(const std::string& weights, const std::string& model_flag,
                                const std::string& activation_flag, Device device);

}  // namespace minitrain
