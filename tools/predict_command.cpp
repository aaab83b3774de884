// `minitrain predict`: flag parsing only; the work is train/predict.cpp.

#include "tools/predict_command.h"

#include <CLI/CLI.hpp>

#include "core/strings.h"
#include "kernels/activation.h"

namespace minitrain::cli {

PredictCommand::PredictCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("predict",
                               "run a trained model on X.npy and write its outputs to Y.npy");
  app_->add_option("--weights", config_.weights, "weights (.safetensors), e.g. from train --save")
      ->required();
  app_->add_option("--model", config_.model, "mlp:IN,H1,...,OUT, as trained")->required();
  app_->add_option("--activation", config_.activation,
                   join(activation_names(), " | ") + ", as trained");
  app_->add_option("--input", config_.input, "features X.npy [rows, IN]")->required();
  app_->add_option("--output", config_.output, "predictions Y.npy [rows, OUT], written atomically")
      ->required();
  app_->add_option("--device", config_.device, "auto | cpu | cuda | cuda:N");
  app_->add_option("--batch-size", config_.batch_size, "rows per forward pass");
}

bool PredictCommand::parsed() const { return app_->parsed(); }

int PredictCommand::run(std::ostream& out) {
  const int64_t rows = run_predict(config_);
  out << "predicted " << rows << " rows -> " << config_.output << "\n";
  return 0;
}

}  // namespace minitrain::cli
