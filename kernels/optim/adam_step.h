#pragma once
// One fused torch.optim.Adam / AdamW update of one parameter tensor: a single pass that reads the
// parameter, its gradient and its moments and writes them back. Memory-bound: 28 bytes an element
// (float32; 36 with amsgrad) against about 12 flops and a square root. The per-element math is
// kernels/optim/optimizer_math.h.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/optim/optimizer_math.h"

struct CUstream_st;

namespace minitrain {

/// Scalars of one step, in double (rounded to the parameter's type once per tensor). Make them
/// with adam_step_args(), which precomputes the step-dependent factors on the host.
struct AdamStepArgs {
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< Adam: L2 added to the gradient
  double decay_factor = 1.0;  ///< AdamW: 1 - lr * weight_decay, applied to p first
  AdamDecay decay = AdamDecay::None;
  bool amsgrad = false;
  double step_size = 1e-3;             ///< lr / (1 - beta1^t)
  double bias_correction2_sqrt = 1.0;  ///< sqrt(1 - beta2^t)
};

/// The arguments of step t (t >= 1, counted per parameter as torch does) with torch's formulas:
/// bias_correction1 = 1 - beta1^t, bias_correction2 = 1 - beta2^t, step_size = lr / bc1.
/// decoupled = true is AdamW. Throws ValueError for t < 1.
AdamStepArgs adam_step_args(double lr, double beta1, double beta2, double eps, double weight_decay,
                            bool decoupled, bool amsgrad, int64_t t);

/// One update (see Adam in optim/optimizer.h). exp_avg and exp_avg_sq (and max_exp_avg_sq with
/// amsgrad; it may be undefined otherwise) have param's shape, dtype and device and start at zero.
/// Throws the kernels/check.h errors for mismatched operands, before writing.
void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
               Tensor& max_exp_avg_sq, const AdamStepArgs& args);

// ---- implementations (float and double are instantiated); max_exp_avg_sq may be null without
// amsgrad ----
template <typename T>
void adam_step_cpu(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n,
                   const AdamStepArgs& args);
template <typename T>
void adam_step_cuda(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                    int64_t n, const AdamStepArgs& args, CUstream_st* stream);

/// The element-type factors of `args` (shared by the CPU loop and the CUDA launcher).
template <typename T>
AdamCoeffs<T> adam_coeffs(const AdamStepArgs& args) {
  AdamCoeffs<T> c;
  c.beta1 = static_cast<T>(args.beta1);
  c.one_minus_beta1 = static_cast<T>(1.0 - args.beta1);
  c.beta2 = static_cast<T>(args.beta2);
  c.one_minus_beta2 = static_cast<T>(1.0 - args.beta2);
  c.eps = static_cast<T>(args.eps);
  c.weight_decay = static_cast<T>(args.weight_decay);
  c.decay_factor = static_cast<T>(args.decay_factor);
  c.step_size = static_cast<T>(args.step_size);
  c.bias_correction2_sqrt = static_cast<T>(args.bias_correction2_sqrt);
  return c;
}

}  // namespace minitrain
