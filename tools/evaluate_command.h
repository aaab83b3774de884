#pragma once
// `minitrain evaluate --weights W.safetensors --data X.npy --targets Y.npy | --data T.csv`: the
// model's loss and metrics on labelled data, as one JSON line.

#include <ostream>

#include "infer/evaluate.h"

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class EvaluateCommand {
 public:
  explicit EvaluateCommand(CLI::App& parent);
  bool parsed() const;
  int run(std::ostream& out);  ///< throws minitrain errors

 private:
  CLI::App* app_;
  EvaluateConfig config_;
};

}  // namespace minitrain::cli
