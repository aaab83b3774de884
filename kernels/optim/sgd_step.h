#pragma once
// One fused torch.optim.SGD update of one parameter tensor: a single pass that reads the
// parameter, its gradient and (with momentum) its momentum buffer and writes parameter and
// buffer. Memory-bound: 12 bytes an element read/written without momentum, 20 with (float32).
// The per-element math is kernels/optim/optimizer_math.h.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/optim/optimizer_math.h"

struct CUstream_st;

namespace minitrain {

/// Scalars of one step, in double (rounded to the parameter's type once per tensor).
struct SGDStepArgs {
  double lr = 0.01;
  double momentum = 0.0;  ///< 0: no momentum buffer
  double dampening = 0.0;
  double weight_decay = 0.0;  ///< L2 term added to the gradient; 0 skips it (torch skips it)
  bool nesterov = false;
  /// The buffer's first step: buf = g (torch clones the gradient; dampening is not applied).
  /// The buffer's previous contents are not read then (uninitialised memory is fine).
  bool first_step = false;
};

/// param -= lr * update (see SGD in optim/optimizer.h). `momentum_buf` must be defined (same
/// shape, dtype and device as param) when args.momentum != 0, and is ignored otherwise (it may be
/// undefined). Throws the kernels/check.h errors for mismatched operands, before writing.
void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SGDStepArgs& args);

/// The element-type factors of `args` (shared by the CPU loop and the CUDA launchers).
template <typename T>
SgdCoeffs<T> sgd_coeffs(const SGDStepArgs& args) {
  return SgdCoeffs<T>{static_cast<T>(args.lr), static_cast<T>(args.weight_decay),
                      static_cast<T>(args.momentum), static_cast<T>(1.0 - args.dampening)};
}

// ---- implementations (float and double are instantiated); momentum_buf may be null without
// momentum ----
template <typename T>
void sgd_step_cpu(T* param, const T* grad, T* momentum_buf, int64_t n, const SGDStepArgs& args);
template <typename T>
void sgd_step_cuda(T* param, const T* grad, T* momentum_buf, int64_t n, const SGDStepArgs& args,
                   CUstream_st* stream);

}  // namespace minitrain
