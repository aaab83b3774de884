#pragma once
// One fused torch.optim.RMSprop update of one parameter tensor: a single pass that reads the
// parameter, its gradient and its state (square_avg; grad_avg when centered; the momentum buffer
// with momentum) and writes them back, where torch's single-tensor path makes six to nine passes.
// Memory-bound: 16 bytes an element (float32) plus 8 for each of grad_avg and the buffer, against
// a square root, a division and about 8 flops. The per-element math is
// kernels/optim/optimizer_math.h.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/optim/optimizer_math.h"

struct CUstream_st;

namespace minitrain {

/// Scalars of one step, in double (rounded to the parameter's type once per tensor).
struct RMSpropStepArgs {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< L2 term added to the gradient; 0 skips it (torch skips it)
  double momentum = 0.0;      ///< 0: no momentum buffer (torch: momentum > 0)
  bool centered = false;      ///< keep grad_avg and divide by sqrt(square_avg - grad_avg^2)
};

/// One update (see RMSprop in optim/optimizer.h). square_avg (and grad_avg when centered, and
/// momentum_buf with momentum > 0; each may be undefined otherwise) have param's shape, dtype and
/// device and start at zero, as torch's state does. Throws the kernels/check.h errors for
/// mismatched operands, before writing.
/// With `coeffs_on_device` (a CUDA device pointer to this step's RmspropCoeffs<T>) the kernel
/// reads the factors there and of `args` only the variant: Note [step scalars on the device] in
/// kernels/optim/multi_tensor_optim.h. It must be null on the CPU.
/// With `found_inf` (a float32 flag on param's device) the update does nothing when the flag is
/// non-zero, read by the kernel: Note [skip on the device] (kernels/optim/skip_on_device.h).
/// RMSprop's factors do not depend on a step count, so nothing else changes.
void rmsprop_step(Tensor& param, const Tensor& grad, Tensor& square_avg, Tensor& grad_avg,
                  Tensor& momentum_buf, const RMSpropStepArgs& args,
                  const void* coeffs_on_device = nullptr, const Tensor* found_inf = nullptr);

// ---- implementations (float and double are instantiated); grad_avg and momentum_buf may be null
// for variants without them ----
template <typename T>
void rmsprop_step_cpu(T* param, const T* grad, T* square_avg, T* grad_avg, T* momentum_buf,
                      int64_t n, const RMSpropStepArgs& args);
template <typename T>
void rmsprop_step_cuda(T* param, const T* grad, T* square_avg, T* grad_avg, T* momentum_buf,
                       int64_t n, const RMSpropStepArgs& args,
                       const RmspropCoeffs<T>* coeffs_on_device, const float* found_inf,
                       CUstream_st* stream);

/// The element-type factors of `args` (shared by the CPU loop and the CUDA launcher): 1 - alpha
/// in double first, as torch's Python float is.
template <typename T>
RmspropCoeffs<T> rmsprop_coeffs(const RMSpropStepArgs& args) {
  RmspropCoeffs<T> c;
  c.lr = static_cast<T>(args.lr);
  c.alpha = static_cast<T>(args.alpha);
  c.one_minus_alpha = static_cast<T>(1.0 - args.alpha);
  c.eps = static_cast<T>(args.eps);
  c.weight_decay = static_cast<T>(args.weight_decay);
  c.momentum = static_cast<T>(args.momentum);
  return c;
}

/// Calls f(RmspropVariant<...>{}) for `args`' flags.
template <typename F>
void dispatch_rmsprop_variant(const RMSpropStepArgs& args, F&& f) {
  dispatch_rmsprop_variant(args.weight_decay != 0.0, args.centered, args.momentum > 0.0,
                           std::forward<F>(f));
}

}  // namespace minitrain
