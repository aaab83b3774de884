#pragma once
// `minitrain predict --weights W.safetensors --input X.npy|T.csv --output Y.npy|Y.csv`.

#include <ostream>

#include "infer/predict.h"

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class PredictCommand {
 public:
  explicit PredictCommand(CLI::App& parent);
  bool parsed() const;
  int run(std::ostream& out);  ///< throws minitrain errors

 private:
  CLI::App* app_;
  PredictConfig config_;
};

}  // namespace minitrain::cli
