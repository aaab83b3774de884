// `minitrain predict`: flag parsing only; the work is infer/predict.cpp.

#include "tools/predict_command.h"

#include <CLI/CLI.hpp>

#include "tools/trained_model_options.h"

namespace minitrain::cli {

PredictCommand::PredictCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "predict",
      "run a trained model on X.npy or T.csv and write its outputs to Y.npy or Y.csv; the model "
      "and activation come from the weights' metadata");
  add_trained_model_options(*app_, config_.weights, config_.model, config_.activation);
  app_->add_option("--input", config_.input,
                   "features X.npy [rows, IN], or a CSV table with a header (the training's "
                   "target columns, if present, are left out)")
      ->required();
  app_->add_option("--output", config_.output,
                   "predictions Y.npy [rows, OUT] or Y.csv (by the extension), written atomically")
      ->required();
  app_->add_option("--target-columns", config_.target_columns,
                   "columns of a CSV input that are not features (default: the training's)")
      ->delimiter(',');
  app_->add_option("--ignore-columns", config_.ignore_columns,
                   "a CSV input's columns that are neither feature nor target (an id; default: "
                   "the training's --ignore-columns, from the weights)")
      ->delimiter(',');
  app_->add_option("--keep-columns", config_.keep_columns,
                   "a CSV input's columns copied, as written, into the CSV output before the "
                   "predictions (an id); not features unless the model's")
      ->delimiter(',');
  app_->add_option("--device", config_.device, "auto | cpu | cuda | cuda:N");
  app_->add_option("--batch-size", config_.batch_size, "rows per forward pass");
  app_->add_option("--gemm", config_.gemm,
                   "the Linear layers' GEMM backend (default auto); reference sums in order, "
                   "as the C of `minitrain export` does, for bit-identical outputs");
  app_->add_flag("--probabilities", config_.probabilities,
                 "classifiers: each class's probability instead of the class");
  app_->add_flag("--class-and-probabilities", config_.class_and_probabilities,
                 "cross_entropy classifiers, CSV output: the class column first, then each "
                 "class's probability, in one file");
}

bool PredictCommand::parsed() const { return app_->parsed(); }

int PredictCommand::run(std::ostream& out) {
  const int64_t rows = run_predict(config_);
  out << "predicted " << rows << " rows -> " << config_.output << "\n";
  return 0;
}

}  // namespace minitrain::cli
