// Adam / AdamW step: host-side factors, the entry point and the CPU loop. One pass over
// parameter, gradient and moments; the variant is a template parameter (optimizer_math.h), so
// the loop body is branch-free and vectorises (sqrt and divide included).

#include "kernels/optim/adam_step.h"

#include <cmath>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/cpu_features.h"
#include "kernels/dispatch.h"

namespace minitrain {

AdamStepArgs adam_step_args(double lr, double beta1, double beta2, double eps, double weight_decay,
                            bool decoupled, bool amsgrad, int64_t t) {
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

// ---- CPU reference ----

namespace {

// Note [AVX2 clones]: the build targets baseline x86-64 (SSE2, four floats a vector); the loop is
// compiled again for AVX2 (eight) and picked at run time. Adam's loop is bound by its square root
// and two divisions, not by memory: the AVX2 clone took 650 us against 1230 us for 1.3M floats on
// one core here. Both clones make the same IEEE operations in the same order (AVX2 without FMA,
// so nothing is contracted), hence the same bits (AdamStep.Avx2CloneMatchesScalarLoopBitForBit).
template <typename V, typename T>
inline void adam_range(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                       T* __restrict__ v, T* __restrict__ vmax, int64_t n, const AdamCoeffs<T>& c) {
  for (int64_t i = 0; i < n; ++i) {
    T unused{};
    adam_update<V>(p[i], g[i], m[i], v[i], V::kAmsgrad ? vmax[i] : unused, c);
  }
}

#if MINITRAIN_X86_CLONES
template <typename V, typename T>
__attribute__((target("avx2"))) void adam_range_avx2(T* __restrict__ p, const T* __restrict__ g,
                                                     T* __restrict__ m, T* __restrict__ v,
                                                     T* __restrict__ vmax, int64_t n,
                                                     const AdamCoeffs<T>& c) {
  adam_range<V>(p, g, m, v, vmax, n, c);
}
#endif

}  // namespace

template <typename T>
void adam_step_cpu(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n,
                   const AdamStepArgs& args) {
  const AdamCoeffs<T> c = adam_coeffs<T>(args);
  dispatch_adam_variant(args.decay, args.amsgrad, [&](auto variant) {
    using V = decltype(variant);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      T* vmax = max_exp_avg_sq == nullptr ? nullptr : max_exp_avg_sq + begin;
#if MINITRAIN_X86_CLONES
      if (cpu_has_avx2()) {
        adam_range_avx2<V>(param + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, vmax,
                           end - begin, c);
        return;
      }
#endif
      adam_range<V>(param + begin, grad + begin, exp_avg + begin, exp_avg_sq + begin, vmax,
                    end - begin, c);
    });
  });
}

template void adam_step_cpu<float>(float*, const float*, float*, float*, float*, int64_t,
                                   const AdamStepArgs&);
template void adam_step_cpu<double>(double*, const double*, double*, double*, double*, int64_t,
                                    const AdamStepArgs&);

// ---- entry point ----

void adam_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
               Tensor& max_exp_avg_sq, const AdamStepArgs& args) {
  if (args.amsgrad) {
    check_compatible("adam_step", {{"param", param},
                                   {"grad", grad},
                                   {"exp_avg", exp_avg},
                                   {"exp_avg_sq", exp_avg_sq},
                                   {"max_exp_avg_sq", max_exp_avg_sq}});
    check_same_shape("adam_step", {{"param", param},
                                   {"grad", grad},
                                   {"exp_avg", exp_avg},
                                   {"exp_avg_sq", exp_avg_sq},
                                   {"max_exp_avg_sq", max_exp_avg_sq}});
  } else {
    check_compatible(
        "adam_step",
        {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
    check_same_shape(
        "adam_step",
        {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
  }
  const int64_t n = param.numel();
  dispatch_op(
      "adam_step", param.device(), param.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        adam_step_cpu<T>(param.data<T>(), grad.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(),
                         args.amsgrad ? max_exp_avg_sq.data<T>() : nullptr, n, args);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        adam_step_cuda<T>(param.data<T>(), grad.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(),
                          args.amsgrad ? max_exp_avg_sq.data<T>() : nullptr, n, args, stream);
      });
}

}  // namespace minitrain
