#pragma once
// A trainable tensor and its gradient. The gradient has the value's shape, dtype and device and
// accumulates (+=) over backward calls until zero_grad(), as in PyTorch, so that gradient
// accumulation over several batches is just several backward calls.

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace minitrain {

struct Parameter {
  Tensor value;
  Tensor grad;
};

/// p.grad, first allocated as zeros like p.value (and again if the value's shape, dtype or device
/// has changed since). Layers call it in backward, Module::zero_grad through it.
Tensor& ensure_grad(Parameter& p);

/// Parameters with their PyTorch state_dict names ("0.weight", "0.bias", "2.weight", ...), in
/// registration order. The pointers stay valid while the module lives.
using NamedParameters = std::vector<std::pair<std::string, Parameter*>>;

}  // namespace minitrain
