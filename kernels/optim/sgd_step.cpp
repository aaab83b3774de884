// SGD step: the entry point and the CPU loop. One pass over parameter, gradient and buffer; the
// variant is a template parameter (optimizer_math.h), so the loop body is branch-free and the
// compiler vectorises it. Memory-bound: two threads help once the tensors outgrow the caches.

#include "kernels/optim/sgd_step.h"

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/optim/optimizer_math.h"

namespace minitrain {

// ---- CPU reference ----

template <typename T>
void sgd_step_cpu(T* param, const T* grad, T* momentum_buf, int64_t n, const SGDStepArgs& args) {
  const SgdCoeffs<T> c{static_cast<T>(args.lr), static_cast<T>(args.weight_decay),
                       static_cast<T>(args.momentum), static_cast<T>(1.0 - args.dampening)};
  auto loop = [&](auto variant) {
    using V = decltype(variant);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      T* __restrict__ p = param;
      const T* __restrict__ g = grad;
      T* __restrict__ buf = momentum_buf;
      for (int64_t i = begin; i < end; ++i) {
        T unused{};
        sgd_update<V>(p[i], g[i], V::kMomentum ? buf[i] : unused, c);
      }
    });
  };
  dispatch_sgd_variant(args.weight_decay != 0.0, args.momentum != 0.0, args.first_step,
                       args.nesterov, loop);
}

template void sgd_step_cpu<float>(float*, const float*, float*, int64_t, const SGDStepArgs&);
template void sgd_step_cpu<double>(double*, const double*, double*, int64_t, const SGDStepArgs&);

// ---- entry point ----

void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buf, const SGDStepArgs& args) {
  const bool momentum = args.momentum != 0.0;
  if (momentum) {
    check_compatible("sgd_step",
                     {{"param", param}, {"grad", grad}, {"momentum_buf", momentum_buf}});
    check_same_shape("sgd_step",
                     {{"param", param}, {"grad", grad}, {"momentum_buf", momentum_buf}});
  } else {
    check_compatible("sgd_step", {{"param", param}, {"grad", grad}});
    check_same_shape("sgd_step", {{"param", param}, {"grad", grad}});
  }
  const int64_t n = param.numel();
  dispatch_op(
      "sgd_step", param.device(), param.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        sgd_step_cpu<T>(param.data<T>(), grad.data<T>(),
                        momentum ? momentum_buf.data<T>() : nullptr, n, args);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        sgd_step_cuda<T>(param.data<T>(), grad.data<T>(),
                         momentum ? momentum_buf.data<T>() : nullptr, n, args, stream);
      });
}

}  // namespace minitrain
