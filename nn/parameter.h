#pragma once
// A trainable tensor and its gradient. The gradient has the value's shape, dtype and device and
// accumulates (+=) over backward calls until zero_grad(), as in PyTorch, so that gradient
// accumulation over several batches is just several backward calls.
//
// Note [released gradients]: zero_grad() leaves every gradient undefined, as torch's
// zero_grad(set_to_none=True) does, and keeps its buffer in `released`. The next backward takes the
// buffer back and writes its gradient there instead of adding it to zeros (a GEMM with beta 0,
// which the CPU GEMM zeroes tile by tile as it computes them, Note [zeroing C ourselves] in
// kernels/gemm/gemm.cpp; a sum stored rather than added): no pass of its own over the gradients,
// no allocation, and DDP's bucket views (parallel/distributed_data_parallel.cpp) stay where they
// are. Until then the
// gradient is undefined and optimizers, clipping and the GradScaler skip the parameter, as torch
// skips a grad of None.

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace minitrain {

struct Parameter {
  Tensor value;
  Tensor grad;
  /// The buffer zero_grad() released (Note [released gradients]); its contents are stale.
  Tensor released;
};

/// p.grad, allocated as zeros like p.value when undefined (reusing p.released, zeroed) and again if
/// the value's shape, dtype or device has changed since.
Tensor& ensure_grad(Parameter& p);

/// The gradient a layer is about to add its result to. When p.grad is undefined it is taken from
/// p.released (or allocated) WITHOUT zeroing, and `overwrite` is true: the caller must then store
/// every element instead of adding to it. Otherwise p.grad (as ensure_grad) and false.
Tensor& grad_to_write(Parameter& p, bool& overwrite);

/// Leaves p.grad undefined, its buffer kept in p.released (zero_grad's default).
void release_grad(Parameter& p);

/// Parameters with their PyTorch state_dict names ("0.weight", "0.bias", "2.weight", ...), in
/// registration order. The pointers stay valid while the module lives.
using NamedParameters = std::vector<std::pair<std::string, Parameter*>>;

}  // namespace minitrain
