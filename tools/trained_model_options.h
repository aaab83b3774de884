#pragma once
// The flags of a command that rebuilds a trained model from its weights (predict, evaluate):
// --weights, and --model / --activation for weights that do not say (infer/trained_model.h).

#include <CLI/CLI.hpp>

#include <string>

#include "core/strings.h"
#include "kernels/activation.h"

namespace minitrain::cli {

inline void add_trained_model_options(CLI::App& app, std::string& weights, std::string& model,
                                      std::string& activation) {
  app.add_option("--weights", weights, "weights (.safetensors) from train --save, or a checkpoint")
      ->required();
  app.add_option("--model", model,
                 "mlp:IN,H1,...,OUT; only for weights that do not say (e.g. made by PyTorch), "
                 "an error where it differs from theirs");
  app.add_option("--activation", activation, join(activation_names(), " | ") + "; as --model");
}

}  // namespace minitrain::cli
