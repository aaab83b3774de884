#pragma once
// Inference with trained weights: `minitrain predict`. The model runs in eval mode (nothing
// cached for backward), in batches so that memory stays bounded on large inputs.

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace minitrain {

/// y = model(x) for x [N, in] (float32 or float64, any device), in batches of `batch_size` rows
/// on `device`; the result is float32 [N, out] on the CPU. ShapeError when x is not 2-D.
Tensor predict(Module& model, const Tensor& x, Device device, int64_t batch_size = 4096);

struct PredictConfig {
  std::string weights;  ///< .safetensors from train --save, a checkpoint, or PyTorch's state_dict
  /// mlp:IN,...,OUT and the activation. Empty: the ones the weights' metadata names (minitrain
  /// writes both); given: used where the metadata has none, and an error where it differs.
  std::string model;
  std::string activation;
  std::string
      input;  ///< X.npy [N, IN] or T.csv with a header (the training targets' columns left out)
  std::string output;  ///< Y.npy [N, OUT] or Y.csv, by its extension; written atomically at the end
  /// Columns of a CSV input that are not features (the targets); empty: the weights' metadata's
  /// 'target_columns'. Columns the file lacks are no error (unlabelled data).
  std::vector<std::string> target_columns;
  /// Columns of a CSV input that are neither feature nor target (an `id`): not read. Empty: the
  /// weights' metadata's 'ignore_columns' (the training's), where the input has them.
  std::vector<std::string> ignore_columns;
  /// Columns of a CSV input copied as written (RFC 4180 quoted where needed) into the CSV output,
  /// in this order, before the predictions; a .npy output refuses them.
  std::vector<std::string> keep_columns;
  std::string device = "auto";
  int64_t batch_size = 4096;
  /// The Linear layers' GEMM backend by registry name (kernels/gemm/gemm_registry.h): "auto" is
  /// the device's fastest; "reference" sums each output over the inputs in order, as the C that
  /// `minitrain export --format c` writes does, so that the two agree bit for bit.
  std::string gemm = "auto";
  /// Classifiers (weights trained with cross_entropy or bce_with_logits): write each class's
  /// probability (softmax; sigmoid per output for bce) instead of the class. A regression's
  /// weights refuse it.
  bool probabilities = false;
  /// cross_entropy classifiers, CSV output: the class column first, then each class's probability.
  bool class_and_probabilities = false;
};

/// A classifier's output is its class per row ([N, 1] class indices in .npy; in CSV the class
/// names the weights' metadata gives, under the training's label column), or per output 0/1 for
/// bce_with_logits; with `probabilities`, [N, classes]. A regression's output is the model's.
/// Checks every input (model spec and activation against the weights' metadata, weights against
/// the model, input shape against the model, the output's directory and extension) before
/// computing, then writes the output. Returns the rows predicted.
/// Non-finite outputs (finite weights too large for the inputs) are written as they are, with a
/// warning on `warnings` naming their count and the first one's row: exit 0 stays, as numpy's
/// overflow warns, since the finite rows remain good (evaluate, which would score them, refuses).
int64_t run_predict(const PredictConfig& config, std::ostream& warnings = std::cerr);

}  // namespace minitrain
