#pragma once
// Builds an optimizer by name (a row of optimizer_table(): "sgd", "adam", ...) from command-line
// style settings.

#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace minitrain {

// The settings are the optimizers' own struct (OptimizerOptions in optim/optimizer.h, Note [one
// options struct]): make_optimizer hands it to the optimizer whole. Which optimizer takes which
// setting is a column of optimizer_table(), not a comment here.
struct OptimizerConfig : OptimizerOptions {
  std::string name = "adam";
};

/// The settings of OptimizerConfig that only some optimizers take (lr and weight_decay every one
/// takes). Note [settings as columns]: each optimizer's row lists the ones it takes; one given
/// away from its default to an optimizer that does not take it is refused, with a message made
/// from the column ("--nesterov applies to --optimizer sgd, not to adam"). Adding an optimizer
/// that takes --momentum is a new row, not a new branch.
enum class OptimizerSetting { Momentum, Dampening, Nesterov, Betas, Eps, Amsgrad, Alpha, Centered };

// Note [one table per list of choices]: optimizer_table() (make_optimizer.cpp) is the only list of
// optimizer names; make_optimizer, --optimizer's help text and its "choose one of" message read it.
// Its rows come from the optimizers' own files (Note [one row per optimizer] in optim/optimizer.h).
struct OptimizerInfo {
  const char* name;  ///< "adamw", as --optimizer and Optimizer::name() spell it
  std::unique_ptr<Optimizer> (*make)(const OptimizerConfig& config, NamedParameters params);
  std::vector<OptimizerSetting> settings;  ///< the settings it takes beside lr and weight_decay
};
/// Every optimizer, in the order --help and error messages list them.
const std::vector<OptimizerInfo>& optimizer_table();
std::vector<std::string> optimizer_names();

/// The flag that sets `s` ("momentum", "betas"), as --help and messages spell it.
const char* optimizer_setting_flag(OptimizerSetting s);
/// The optimizers whose row takes `s`, in table order: "adam, adamw".
std::string optimizers_taking(OptimizerSetting s);
/// The settings of `c` away from their defaults (OptimizerConfig{}).
std::vector<OptimizerSetting> given_settings(const OptimizerConfig& c);
/// ValueError for the first of `given` that optimizer `name` does not take, naming the flag and
/// the optimizers that take it. An unknown name is make_optimizer's error, not this one's.
void check_settings_apply(const std::string& name, const std::vector<OptimizerSetting>& given);

/// ValueError naming an unknown name (and the valid ones), a setting the optimizer does not take,
/// or an impossible value.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, NamedParameters params);

}  // namespace minitrain
