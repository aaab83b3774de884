// `minitrain evaluate`: flag parsing only; the work is infer/evaluate.cpp.

#include "tools/evaluate_command.h"

#include <CLI/CLI.hpp>

#include "tools/trained_model_options.h"

namespace minitrain::cli {

EvaluateCommand::EvaluateCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "evaluate",
      "a trained model's scores on labelled data, as one JSON line: a classifier's loss, "
      "accuracy and balanced accuracy; a regression's loss (as training reports it), MSE, MAE, "
      "RMSE and R^2. The model (and a table's feature and target columns) come from the "
      "weights' metadata");
  add_trained_model_options(*app_, config_.weights, config_.model, config_.activation);
  app_->add_option("--data", config_.data, "features X.npy (with --targets) or a CSV table")
      ->required();
  app_->add_option("--targets", config_.targets, "targets Y.npy, with --data X.npy");
  app_->add_option("--target-columns", config_.target_columns,
                   "a CSV table's target columns (default: the training's, from the weights)")
      ->delimiter(',');
  app_->add_option("--ignore-columns", config_.ignore_columns,
                   "a CSV table's columns that are neither feature nor target (an id; default: "
                   "the training's --ignore-columns, from the weights)")
      ->delimiter(',');
  app_->add_option("--device", config_.device, "auto | cpu | cuda | cuda:N");
  app_->add_option("--batch-size", config_.batch_size, "rows per forward pass");
}

bool EvaluateCommand::parsed() const { return app_->parsed(); }

int EvaluateCommand::run(std::ostream& out) {
  out << evaluation_json(run_evaluate(config_)) << "\n";
  return 0;
}

}  // namespace minitrain::cli
