#pragma once
// One fused torch.optim.Adam / AdamW update of one parameter tensor: a single pass that reads the
// parameter, its gradient and its moments and writes them back. Memory-bound: 28 bytes an element
// (float32; 36 with amsgrad) against about 12 flops and a square root. Adam is the row AdamStep of
// kernels/optim/optimizer_math.h (its math and its scalars, AdamStepArgs); the loops are the
// generic optimizer_step's (kernels/optim/optimizer_step.h). These are the one-tensor step's names
// of old, and the host's step-dependent factors.

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_step.h"

namespace minitrain {

/// The arguments of step t (t >= 1, counted per parameter as torch does) with torch's formulas:
/// bias_correction1 = 1 - beta1^t, bias_correction2 = 1 - beta2^t, step_size = lr / bc1.
/// decoupled = true is AdamW. Throws ValueError for t < 1.
inline AdamStepArgs adam_step_args(double lr, double beta1, double beta2, double eps,
                                   double weight_decay, bool decoupled, bool amsgrad, int64_t t) {
  MT_CHECK_AS(ValueError, t >= 1, "adam_step_args: step t = ", t, " but steps count from 1");
  AdamStepArgs a;
  a.beta1 = beta1;
  a.beta2 = beta2;
  a.eps = eps;
  a.amsgrad = amsgrad;
  if (weight_decay != 0.0) {
    a.decay = decoupled ? AdamDecay::Decoupled : AdamDecay::L2;
    a.weight_decay = weight_decay;
    a.decay_factor = decoupled ? 1.0 - lr * weight_decay : 1.0;
  }
  // torch: bias_correction1 = 1 - beta1 ** step (Python floats, i.e. double pow).
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  a.step_size = lr / bias_correction1;
  a.bias_correction2_sqrt = std::sqrt(bias_correction2);
  return a;
}

/// One update (see Adam in optim/optimizer.h). exp_avg and exp_avg_sq (and max_exp_avg_sq with
/// amsgrad; it may be undefined otherwise) have param's shape, dtype and device and start at zero.
/// Throws the kernels/check.h errors for mismatched operands, before writing.
inline void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                      Tensor& max_exp_avg_sq, const AdamStepArgs& args) {
  optimizer_step<AdamStep>(param, grad, {&exp_avg, &exp_avg_sq, &max_exp_avg_sq}, args);
}

/// adam_step(params[k], grads[k], exp_avgs[k], exp_avg_sqs[k], max_exp_avg_sqs[k], args) for
/// every k, in one pass (optimizer_step_multi, kernels/optim/multi_tensor_optim.h).
/// max_exp_avg_sqs has params.size() entries with amsgrad and may be empty without. With `skip`
/// tensor k's step_size and sqrt(1 - beta2^t) are those of t = its count + 1 (skip->args.lr and
/// bias_table), not args'.
inline void adam_step_multi(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                            std::vector<Tensor>& max_exp_avg_sqs, const AdamStepArgs& args,
                            const void* coeffs_on_device = nullptr,
                            const SkipOnDevice* skip = nullptr) {
  optimizer_step_multi<AdamStep>(params, grads, {&exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}, args,
                                 coeffs_on_device, skip);
}

/// The CPU loop (max_exp_avg_sq may be null without amsgrad).
template <typename T>
void adam_step_cpu(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n,
                   const AdamStepArgs& args) {
  optimizer_step_cpu<AdamStep, T>(param, grad, {exp_avg, exp_avg_sq, max_exp_avg_sq}, n, args);
}

/// The element-type factors of `args` (shared by the CPU loop and the CUDA launcher).
template <typename T>
AdamCoeffs<T> adam_coeffs(const AdamStepArgs& args) {
  return AdamStep::coeffs<T>(args);
}

}  // namespace minitrain
