#pragma once
// Builds an optimizer by name ("sgd", "adam", "adamw") from command-line style settings.

#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace minitrain {

// Defaults are the optimizers' own (SGDOptions, AdamOptions in optim/optimizer.h), decided there
// once.
struct OptimizerConfig {
  std::string name = "adam";
  double lr = AdamOptions{}.lr;
  double momentum = SGDOptions{}.momentum;    ///< sgd
  double dampening = SGDOptions{}.dampening;  ///< sgd
  bool nesterov = SGDOptions{}.nesterov;      ///< sgd
  double weight_decay = -1.0;                 ///< < 0: the optimizer's default (0; adamw 0.01)
  double beta1 = AdamOptions{}.beta1, beta2 = AdamOptions{}.beta2,
         eps = AdamOptions{}.eps;        ///< adam, adamw
  bool amsgrad = AdamOptions{}.amsgrad;  ///< adam, adamw
};

// Note [one table per list of choices]: kOptimizers (make_optimizer.cpp) is the only list of
// optimizer names; make_optimizer, --optimizer's help text and its "choose one of" message read it.
struct OptimizerInfo {
  const char* name;  ///< "adamw", as --optimizer and Optimizer::name() spell it
  std::unique_ptr<Optimizer> (*make)(const OptimizerConfig& config, NamedParameters params);
};
/// Every optimizer, in the order --help and error messages list them.
const std::vector<OptimizerInfo>& optimizer_table();
std::vector<std::string> optimizer_names();

/// ValueError naming an unknown name (and the valid ones) or an impossible value.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, NamedParameters params);

}  // namespace minitrain
