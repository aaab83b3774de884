#pragma once
// One fused torch.optim.SGD update of one parameter tensor: a single pass that reads the
// parameter, its gradient and (with momentum) its momentum buffer and writes parameter and
// buffer. Memory-bound: 12 bytes an element read/written without momentum, 20 with (float32).
// SGD is the row SgdStep of kernels/optim/optimizer_math.h (its math and its scalars, SGDStepArgs);
// the loops are the generic optimizer_step's (kernels/optim/optimizer_step.h). These are the
// one-tensor step's names of old.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_step.h"

namespace minitrain {

/// param -= lr * update (see SGD in optim/optimizer.h). `momentum_buf` must be defined (same
/// shape, dtype and device as param) when args.momentum != 0, and is ignored otherwise (it may be
/// undefined). Throws the kernels/check.h errors for mismatched operands, before writing.
inline void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf,
                     const SGDStepArgs& args) {
  optimizer_step<SgdStep>(param, grad, {&momentum_buf}, args);
}

/// sgd_step(params[k], grads[k], momentum_bufs[k], args) for every k, in one pass
/// (optimizer_step_multi, kernels/optim/multi_tensor_optim.h). momentum_bufs has params.size()
/// entries with momentum and may be empty without. With `skip` a tensor whose count is 0 takes
/// the buffer's first step (buf = g) whatever args.first_step says.
inline void sgd_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                           std::vector<Tensor>& momentum_bufs, const SGDStepArgs& args,
                           const void* coeffs_on_device = nullptr,
                           const SkipOnDevice* skip = nullptr) {
  optimizer_step_multi<SgdStep>(params, grads, {&momentum_bufs}, args, coeffs_on_device, skip);
}

/// The element-type factors of `args` (shared by the CPU loop and the CUDA launchers).
template <typename T>
SgdCoeffs<T> sgd_coeffs(const SGDStepArgs& args) {
  return SgdStep::coeffs<T>(args);
}

}  // namespace minitrain
