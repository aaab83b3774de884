#pragma once
// Builds an optimizer by name ("sgd", "adam", "adamw") from command-line style settings.

#include <memory>
#include <string>

#include "optim/optimizer.h"

namespace minitrain {

struct OptimizerConfig {
  std::string name = "adam";
  double lr = 1e-3;
  double momentum = 0.0;        ///< sgd
  double dampening = 0.0;       ///< sgd
  bool nesterov = false;        ///< sgd
  double weight_decay = -1.0;   ///< < 0: the optimizer's default (0; adamw 0.01)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  ///< adam, adamw
  bool amsgrad = false;         ///< adam, adamw
};

/// ValueError naming an unknown name (and the valid ones) or an impossible value.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, NamedParameters params);

}  // namespace minitrain
