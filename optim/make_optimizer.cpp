// Builds an optimizer by name from command-line style settings.

#include "optim/make_optimizer.h"

#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace minitrain {

namespace {

std::unique_ptr<Optimizer> make_sgd(const OptimizerConfig& c, NamedParameters params) {
  if (c.amsgrad) MT_THROW(ValueError, "amsgrad applies to adam and adamw, not to --optimizer sgd");
  SGDOptions o;
  o.lr = c.lr;
  o.momentum = c.momentum;
  o.dampening = c.dampening;
  o.nesterov = c.nesterov;
  o.weight_decay = c.weight_decay < 0.0 ? 0.0 : c.weight_decay;
  return std::make_unique<SGD>(std::move(params), o);
}

std::unique_ptr<Optimizer> make_adam_or_adamw(const OptimizerConfig& c, NamedParameters params) {
  const bool decoupled = c.name == "adamw";
  if (c.momentum != 0.0 || c.dampening != 0.0 || c.nesterov)
    MT_THROW(ValueError, "momentum, dampening and nesterov apply to sgd, not to --optimizer ",
             c.name, " (got momentum = ", c.momentum, ", dampening = ", c.dampening,
             ", nesterov = ", c.nesterov ? "true" : "false", "); use --betas for ", c.name);
  AdamOptions o = decoupled ? adamw_defaults() : AdamOptions{};
  o.lr = c.lr;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.amsgrad = c.amsgrad;
  if (c.weight_decay >= 0.0) o.weight_decay = c.weight_decay;
  return std::make_unique<Adam>(std::move(params), o, decoupled);
}

}  // namespace

const std::vector<OptimizerInfo>& optimizer_table() {
  static const std::vector<OptimizerInfo> table = {
      {"sgd", make_sgd},
      {"adam", make_adam_or_adamw},
      {"adamw", make_adam_or_adamw},
  };
  return table;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerInfo& o : optimizer_table()) names.push_back(o.name);
  return names;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, NamedParameters params) {
  for (const OptimizerInfo& o : optimizer_table())
    if (c.name == o.name) return o.make(c, std::move(params));
  MT_THROW(ValueError, "unknown optimizer '", c.name,
           "'; valid names: ", join(optimizer_names(), ", "));
}

}  // namespace minitrain
