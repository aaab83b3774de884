#pragma once
// Per-element update math of torch.optim's SGD, Adam/AdamW and RMSprop, shared by the CPU loops
// (sgd_step.cpp, adam_step.cpp, rmsprop_step.cpp) and the fused CUDA kernels (sgd_step.cu,
// adam_step.cu, rmsprop_step.cu), so the formulas are written once and tested on machines without
// a GPU.
//
// Note [optimizer arithmetic]: the update is computed in the parameter's type, as torch does;
// the scalar factors (lr / (1 - beta1^t), sqrt(1 - beta2^t), 1 - lr * wd, ...) are computed once
// per tensor in double on the host and rounded to the element type once, as torch's Python
// floats are when they meet a float32 tensor. Each operation below mirrors one of torch's
// in-place ops in the same order (buf.mul_(momentum).add_(g, alpha=1 - dampening), ...).
//
// The variant (weight decay or not, momentum or not, ...) is a compile-time parameter, so the
// inner loops carry no branches and vectorise; dispatch_sgd_variant / dispatch_adam_variant turn
// the run-time flags into those types once per tensor.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/host_device.h"

namespace minitrain {

namespace optmath {
// The C names exist on host and device alike, where std:: overload sets are not guaranteed.
MT_HOST_DEVICE float sqrt(float x) { return ::sqrtf(x); }
MT_HOST_DEVICE double sqrt(double x) { return ::sqrt(x); }
// torch.maximum: NaN in either operand gives NaN.
template <typename T>
MT_HOST_DEVICE T maximum(T a, T b) {
  return (a != a || a > b) ? a : b;  // b wins ties and a NaN b
}
}  // namespace optmath

// ---- SGD ----

/// The factors of one SGD step, in the element type.
template <typename T>
struct SgdCoeffs {
  T lr;
  T weight_decay;
  T momentum;
  T one_minus_dampening;
};

/// A compile-time SGD variant. kFirstStep: the momentum buffer is created from g (torch clones
/// the gradient into it; dampening is not applied then).
template <bool WeightDecay, bool Momentum, bool FirstStep, bool Nesterov>
struct SgdVariant {
  static constexpr bool kWeightDecay = WeightDecay;
  static constexpr bool kMomentum = Momentum;
  static constexpr bool kFirstStep = FirstStep;
  static constexpr bool kNesterov = Nesterov;
};

/// One element of torch.optim.SGD:
///   g = grad + wd * p;  buf = first ? g : momentum * buf + (1 - dampening) * g;
///   g = nesterov ? g + momentum * buf : buf;  p = p - lr * g.
/// `buf` is not touched without momentum.
template <typename V, typename T>
MT_HOST_DEVICE void sgd_update(T& p, T grad, T& buf, const SgdCoeffs<T>& c) {
  T g = grad;
  if constexpr (V::kWeightDecay) g = g + c.weight_decay * p;
  if constexpr (V::kMomentum) {
    T b;
    if constexpr (V::kFirstStep) {
      b = g;
    } else {
      b = buf * c.momentum;
      b = b + c.one_minus_dampening * g;
    }
    buf = b;
    if constexpr (V::kNesterov) {
      g = g + c.momentum * b;
    } else {
      g = b;
    }
  }
  p = p - c.lr * g;
}

/// Calls f(SgdVariant<...>{}) for the run-time flags; first_step and nesterov only matter with
/// momentum, so 2 x 5 variants exist, not 16.
template <typename F>
void dispatch_sgd_variant(bool weight_decay, bool momentum, bool first_step, bool nesterov, F&& f) {
  auto with_wd = [&](auto wd) {
    constexpr bool kWd = decltype(wd)::value;
    if (!momentum) return f(SgdVariant<kWd, false, false, false>{});
    if (first_step) {
      if (nesterov) return f(SgdVariant<kWd, true, true, true>{});
      return f(SgdVariant<kWd, true, true, false>{});
    }
    if (nesterov) return f(SgdVariant<kWd, true, false, true>{});
    return f(SgdVariant<kWd, true, false, false>{});
  };
  if (weight_decay) return with_wd(std::integral_constant<bool, true>{});
  return with_wd(std::integral_constant<bool, false>{});
}

// ---- Adam / AdamW ----

enum class AdamDecay : uint8_t {
  None,       ///< weight_decay == 0
  L2,         ///< Adam: g = grad + wd * p
  Decoupled,  ///< AdamW: p = p * (1 - lr * wd) before the moments are updated
};

/// The factors of one Adam step at step t, in the element type.
template <typename T>
struct AdamCoeffs {
  T beta1, one_minus_beta1;
  T beta2, one_minus_beta2;
  T eps;
  T weight_decay;           ///< L2
  T decay_factor;           ///< Decoupled: 1 - lr * wd
  T step_size;              ///< lr / (1 - beta1^t)
  T bias_correction2_sqrt;  ///< sqrt(1 - beta2^t)
};

template <AdamDecay Decay, bool Amsgrad>
struct AdamVariant {
  static constexpr AdamDecay kDecay = Decay;
  static constexpr bool kAmsgrad = Amsgrad;
};

/// One element of torch.optim.Adam / AdamW (single-tensor implementation):
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g g;  v_max = max(v_max, v)
///   p = p - step_size * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps).
/// `vmax` is not touched without amsgrad.
template <typename V, typename T>
MT_HOST_DEVICE void adam_update(T& p, T grad, T& m, T& v, T& vmax, const AdamCoeffs<T>& c) {
  T g = grad;
  T param = p;
  if constexpr (V::kDecay == AdamDecay::L2) g = g + c.weight_decay * param;
  if constexpr (V::kDecay == AdamDecay::Decoupled) param = param * c.decay_factor;
  const T m_new = c.beta1 * m + c.one_minus_beta1 * g;
  const T v_new = v * c.beta2 + c.one_minus_beta2 * g * g;
  m = m_new;
  v = v_new;
  T v_hat = v_new;
  if constexpr (V::kAmsgrad) {
    v_hat = optmath::maximum(vmax, v_new);
    vmax = v_hat;
  }
  const T denom = optmath::sqrt(v_hat) / c.bias_correction2_sqrt + c.eps;
  p = param - c.step_size * (m_new / denom);
}

/// Calls f(AdamVariant<...>{}) for the run-time decay mode and amsgrad flag (6 variants).
template <typename F>
void dispatch_adam_variant(AdamDecay decay, bool amsgrad, F&& f) {
  auto with_decay = [&](auto ams) {
    constexpr bool kAms = decltype(ams)::value;
    switch (decay) {
      case AdamDecay::L2:
        return f(AdamVariant<AdamDecay::L2, kAms>{});
      case AdamDecay::Decoupled:
        return f(AdamVariant<AdamDecay::Decoupled, kAms>{});
      case AdamDecay::None:
        break;
    }
    return f(AdamVariant<AdamDecay::None, kAms>{});
  };
  if (amsgrad) return with_decay(std::integral_constant<bool, true>{});
  return with_decay(std::integral_constant<bool, false>{});
}

// ---- RMSprop ----

/// The factors of one RMSprop step, in the element type.
template <typename T>
struct RmspropCoeffs {
  T lr;
  T alpha, one_minus_alpha;  ///< square_avg's decay and the new g^2's share (also grad_avg's lerp)
  T eps;
  T weight_decay;
  T momentum;
};

/// A compile-time RMSprop variant: L2 weight decay, centered (grad_avg kept), momentum (buffer).
template <bool WeightDecay, bool Centered, bool Momentum>
struct RmspropVariant {
  static constexpr bool kWeightDecay = WeightDecay;
  static constexpr bool kCentered = Centered;
  static constexpr bool kMomentum = Momentum;
};

/// torch.lerp(self, end, weight) with a scalar weight, in torch's two-sided form (exact at both
/// ends): weight < 0.5 ? self + weight (end - self) : end - (end - self) (1 - weight).
template <typename T>
MT_HOST_DEVICE T lerp(T self, T end, T weight) {
  const T diff = end - self;
  return weight < T(0.5) ? self + weight * diff : end - diff * (T(1) - weight);
}

/// One element of torch.optim.RMSprop (single-tensor implementation, torch 2.x), each line one of
/// torch's in-place ops in its order:
///   g = grad + wd * p;  sq = sq * alpha + ((1 - alpha) * g) * g
///   centered: ga = lerp(ga, g, 1 - alpha);  avg = sqrt(sq + (-ga) * ga)   else avg = sqrt(sq)
///   avg = avg + eps                                        (eps after the square root)
///   momentum: buf = buf * momentum + g / avg;  p = p + (-lr) * buf
///   else:     p = p + ((-lr) * g) / avg                    (addcdiv: value * t1 / t2)
/// `grad_avg` and `buf` are not touched by variants without them.
template <typename V, typename T>
MT_HOST_DEVICE void rmsprop_update(T& p, T grad, T& square_avg, T& grad_avg, T& buf,
                                   const RmspropCoeffs<T>& c) {
  T g = grad;
  if constexpr (V::kWeightDecay) g = g + c.weight_decay * p;
  const T sq = square_avg * c.alpha + c.one_minus_alpha * g * g;
  square_avg = sq;
  T avg;
  if constexpr (V::kCentered) {
    const T ga = lerp(grad_avg, g, c.one_minus_alpha);
    grad_avg = ga;
    avg = optmath::sqrt(sq + -ga * ga);
  } else {
    avg = optmath::sqrt(sq);
  }
  avg = avg + c.eps;
  if constexpr (V::kMomentum) {
    const T b = buf * c.momentum + g / avg;
    buf = b;
    p = p + -c.lr * b;
  } else {
    p = p + -c.lr * g / avg;
  }
}

/// Calls f(RmspropVariant<...>{}) for the run-time flags (8 variants).
template <typename F>
void dispatch_rmsprop_variant(bool weight_decay, bool centered, bool momentum, F&& f) {
  auto with_wd = [&](auto wd) {
    constexpr bool kWd = decltype(wd)::value;
    if (centered) {
      if (momentum) return f(RmspropVariant<kWd, true, true>{});
      return f(RmspropVariant<kWd, true, false>{});
    }
    if (momentum) return f(RmspropVariant<kWd, false, true>{});
    return f(RmspropVariant<kWd, false, false>{});
  };
  if (weight_decay) return with_wd(std::integral_constant<bool, true>{});
  return with_wd(std::integral_constant<bool, false>{});
}

}  // namespace minitrain
