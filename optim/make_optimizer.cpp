// Builds an optimizer by name from command-line style settings.

#include "optim/make_optimizer.h"

#include <utility>

#include "core/error.h"

namespace minitrain {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, NamedParameters params) {
  if (c.name == "sgd") {
    if (c.amsgrad)
      MT_THROW(ValueError, "amsgrad applies to adam and adamw, not to --optimizer sgd");
    SGDOptions o;
    o.lr = c.lr;
    o.momentum = c.momentum;
    o.dampening = c.dampening;
    o.nesterov = c.nesterov;
    o.weight_decay = c.weight_decay < 0.0 ? 0.0 : c.weight_decay;
    return std::make_unique<SGD>(std::move(params), o);
  }
  if (c.name == "adam" || c.name == "adamw") {
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
  MT_THROW(ValueError, "unknown optimizer '", c.name, "'; valid names: sgd, adam, adamw");
}

}  // namespace minitrain
