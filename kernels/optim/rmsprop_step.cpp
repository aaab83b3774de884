// RMSprop step: the entry point and the CPU loop. One pass over parameter, gradient and state;
// the variant is a template parameter (optimizer_math.h), so the loop body is branch-free.

#include "kernels/optim/rmsprop_step.h"

#include <vector>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

template <typename T>
void rmsprop_step_cpu(T* param, const T* grad, T* square_avg, T* grad_avg, T* momentum_buf,
                      int64_t n, const RMSpropStepArgs& args) {
  const RmspropCoeffs<T> c = rmsprop_coeffs<T>(args);
  dispatch_rmsprop_variant(args, [&](auto variant) {
    using V = decltype(variant);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      T* __restrict__ p = param;
      const T* __restrict__ g = grad;
      T* __restrict__ sq = square_avg;
      T* __restrict__ ga = grad_avg;
      T* __restrict__ buf = momentum_buf;
      for (int64_t i = begin; i < end; ++i) {
        T unused_ga{}, unused_buf{};
        rmsprop_update<V>(p[i], g[i], sq[i], V::kCentered ? ga[i] : unused_ga,
                          V::kMomentum ? buf[i] : unused_buf, c);
      }
    });
  });
}

template void rmsprop_step_cpu<float>(float*, const float*, float*, float*, float*, int64_t,
                                      const RMSpropStepArgs&);
template void rmsprop_step_cpu<double>(double*, const double*, double*, double*, double*, int64_t,
                                       const RMSpropStepArgs&);

// ---- entry point ----

void rmsprop_step(Tensor& param, const Tensor& grad, Tensor& square_avg, Tensor& grad_avg,
                  Tensor& momentum_buf, const RMSpropStepArgs& args, const void* coeffs_on_device,
                  const Tensor* found_inf) {
  MT_CHECK_AS(DeviceError, coeffs_on_device == nullptr || param.device().is_cuda(),
              "rmsprop_step: step factors in device memory need a parameter on a CUDA device, "
              "not ",
              param.device(), "; on the CPU pass them by value (coeffs_on_device = nullptr)");
  const bool centered = args.centered, momentum = args.momentum > 0.0;
  // Each operand against param; the state tensors a variant does not use may be undefined.
  std::vector<Operand> operands = {{"grad", grad}, {"square_avg", square_avg}};
  if (centered) operands.push_back({"grad_avg", grad_avg});
  if (momentum) operands.push_back({"momentum_buf", momentum_buf});
  for (const Operand& o : operands) {
    check_compatible("rmsprop_step", {{"param", param}, o});
    check_same_shape("rmsprop_step", {{"param", param}, o});
  }
  if (found_inf != nullptr)
    MT_CHECK_AS(DeviceError,
                found_inf->defined() && found_inf->dtype() == DType::Float32 &&
                    found_inf->device() == param.device(),
                "rmsprop_step: the inf flag must be a float32 tensor on the parameter's device ",
                param.device());
  const float* skip_flag = found_inf != nullptr ? found_inf->data<float>() : nullptr;
  const int64_t n = param.numel();
  dispatch_op(
      "rmsprop_step", param.device(), param.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        if (skip_flag != nullptr && *skip_flag != 0.0f) return;  // the kernel's early return
        rmsprop_step_cpu<T>(param.data<T>(), grad.data<T>(), square_avg.data<T>(),
                            centered ? grad_avg.data<T>() : nullptr,
                            momentum ? momentum_buf.data<T>() : nullptr, n, args);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        rmsprop_step_cuda<T>(
            param.data<T>(), grad.data<T>(), square_avg.data<T>(),
            centered ? grad_avg.data<T>() : nullptr, momentum ? momentum_buf.data<T>() : nullptr, n,
            args, static_cast<const RmspropCoeffs<T>*>(coeffs_on_device), skip_flag, stream);
      });
}

}  // namespace minitrain
