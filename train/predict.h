#pragma once
// Inference with trained weights: `minitrain predict`. The model runs in eval mode (nothing
// cached for backward), in batches so that memory stays bounded on large inputs.

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "nn/module.h"

namespace minitrain {

/// y = model(x) for x [N, in] (float32 or float64, any device), in batches of `batch_size` rows
/// on `device`; the result is float32 [N, out] on the CPU. ShapeError when x is not 2-D.
Tensor predict(Module& model, const Tensor& x, Device device, int64_t batch_size = 4096);

struct PredictConfig {
  std::string weights;  ///< .safetensors with PyTorch Sequential names
  std::string model;    ///< mlp:IN,...,OUT
  std::string activation = "relu";
  std::string input;   ///< X.npy [N, IN]
  std::string output;  ///< Y.npy [N, OUT], written atomically at the end
  std::string device = "auto";
  int64_t batch_size = 4096;
};

/// Checks every input (model spec, weights against the model, input shape against the model,
/// the output's directory) before computing, then writes the output. Returns the rows predicted.
int64_t run_predict(const PredictConfig& config);

}  // namespace minitrain
