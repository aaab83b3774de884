#pragma once
// Per-element update math of torch.optim's optimizers and their rows (Note [one row per
// optimizer]), shared by the CPU loop (optimizer_step.cpp) and the fused CUDA kernels
// (optimizer_step.cu, multi_tensor_optim.cu), so the formulas are written once and tested on
// machines without a GPU.
//
// Note [optimizer arithmetic]: the update is computed in the parameter's type, as torch does;
// the scalar factors (lr / (1 - beta1^t), sqrt(1 - beta2^t), 1 - lr * wd, ...) are computed once
// per tensor in double on the host and rounded to the element type once, as torch's Python
// floats are when they meet a float32 tensor. Each operation below mirrors one of torch's
// in-place ops in the same order (buf.mul_(momentum).add_(g, alpha=1 - dampening), ...).
//
// The variant (weight decay or not, momentum or not, ...) is a compile-time parameter, so the
// inner loops carry no branches and vectorise; each row's dispatch() turns the run-time flags into
// those types once per tensor.

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

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

// Note [one row per optimizer]: MT_OPTIMIZER_STEPS is the one list of the fused optimizer steps;
// adding an optimizer is its math and its row here, its class in optim/
// (docs/optimizers_and_losses.md, "Adding an optimizer"). A row is a struct:
//   kName, kMultiName   the one-tensor and multi-tensor steps' names in messages and profiles
//                       ("rmsprop_step", "rmsprop_step_multi"; static: a profile keeps them)
//   kStates, kStateNames  its state operands beside param and grad ({"square_avg", ...}), in the
//                       order update() takes them (at most kMaxOptimizerStates)
//   Args                the scalars of one step, in double, as the optimizer class fills them
//   Coeffs<T>           those scalars rounded to the element type once per tensor: coeffs<T>(args)
//   dispatch(args, f)   f(V{}) with the compile-time variant V of args' flags
//   uses<V>(k), reads<V>(k)  whether variant V writes (and reads) state k: the others may be null
//   update<V>(p, g, s, c)    one element: p and s[0..kStates) in place, from g and c
//   and what depends on a parameter's count of steps taken, for a step the device may skip (Note
//   [skip on the device], skip_on_device.h), where the count lives on the device:
//   kFactorsOfCount     whether factors depend on it (then a table of bias corrections is needed)
//   counted(args, lr, bias_table, taken)  args for that count (taken < 0: not known on the host)
//   at_count(c, lr, bias_table, taken)    the same on the device, on the rounded factors
//   AtFirstCount<V>     the variant of a parameter's first step taken (V where it makes none)
// From the rows follow the CPU loop and the entry point (optimizer_step.{h,cpp}) and the CUDA
// kernel (optimizer_step.cu, optimizer_kernels.cuh), instantiated once per row; the multi-tensor
// launches share the same device loop.
#define MT_OPTIMIZER_STEPS(X) X(SgdStep) X(AdamStep) X(RmspropStep)

/// The most state operands a row may have (the CPU loop gives each its own restrict pointer).
constexpr int kMaxOptimizerStates = 3;

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

/// SGD's row: state {momentum_buf}, used with momentum, not read at its first step.
struct SgdStep {
  static constexpr const char* kName = "sgd_step";
  static constexpr const char* kMultiName = "sgd_step_multi";
  static constexpr int kStates = 1;
  static constexpr const char* kStateNames[kStates] = {"momentum_buf"};
  using Args = SGDStepArgs;
  template <typename T>
  using Coeffs = SgdCoeffs<T>;
  template <typename T>
  static Coeffs<T> coeffs(const Args& a) {
    return Coeffs<T>{static_cast<T>(a.lr), static_cast<T>(a.weight_decay),
                     static_cast<T>(a.momentum), static_cast<T>(1.0 - a.dampening)};
  }
  template <typename F>
  static void dispatch(const Args& a, F&& f) {
    dispatch_sgd_variant(a.weight_decay != 0.0, a.momentum != 0.0, a.first_step, a.nesterov,
                         std::forward<F>(f));
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool uses(int) {
    return V::kMomentum;
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool reads(int) {
    return V::kMomentum && !V::kFirstStep;
  }
  template <typename V, typename T>
  MT_HOST_DEVICE static void update(T& p, T g, T* s, const Coeffs<T>& c) {
    sgd_update<V>(p, g, s[0], c);
  }
  // The buffer's first step is the count's: buf = g at the first step taken.
  static constexpr bool kFactorsOfCount = false;
  static void counted(Args& a, double, const double*, int64_t taken) { a.first_step = taken == 0; }
  template <typename T>
  MT_HOST_DEVICE static void at_count(Coeffs<T>&, double, const double*, int64_t) {}
  template <typename V>
  using AtFirstCount = SgdVariant<V::kWeightDecay, V::kMomentum, V::kMomentum, V::kNesterov>;
};

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

/// Scalars of one step, in double (rounded to the parameter's type once per tensor). Make them
/// with adam_step_args() (kernels/optim/adam_step.h), which precomputes the step-dependent
/// factors on the host.
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

/// Adam's (and AdamW's) row: state {exp_avg, exp_avg_sq, max_exp_avg_sq}, the last with amsgrad.
struct AdamStep {
  static constexpr const char* kName = "adam_step";
  static constexpr const char* kMultiName = "adam_step_multi";
  static constexpr int kStates = 3;
  static constexpr const char* kStateNames[kStates] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  using Args = AdamStepArgs;
  template <typename T>
  using Coeffs = AdamCoeffs<T>;
  template <typename T>
  static Coeffs<T> coeffs(const Args& a) {
    Coeffs<T> c;
    c.beta1 = static_cast<T>(a.beta1);
    c.one_minus_beta1 = static_cast<T>(1.0 - a.beta1);
    c.beta2 = static_cast<T>(a.beta2);
    c.one_minus_beta2 = static_cast<T>(1.0 - a.beta2);
    c.eps = static_cast<T>(a.eps);
    c.weight_decay = static_cast<T>(a.weight_decay);
    c.decay_factor = static_cast<T>(a.decay_factor);
    c.step_size = static_cast<T>(a.step_size);
    c.bias_correction2_sqrt = static_cast<T>(a.bias_correction2_sqrt);
    return c;
  }
  template <typename F>
  static void dispatch(const Args& a, F&& f) {
    dispatch_adam_variant(a.decay, a.amsgrad, std::forward<F>(f));
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool uses(int k) {
    return k < 2 || V::kAmsgrad;
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool reads(int k) {
    return uses<V>(k);
  }
  template <typename V, typename T>
  MT_HOST_DEVICE static void update(T& p, T g, T* s, const Coeffs<T>& c) {
    adam_update<V>(p, g, s[0], s[1], s[2], c);
  }
  // Step t = taken + 1's bias corrections, from bias_table = {1 - beta1^t, 1 - beta2^t} at
  // 2 (t - 1) (the host's std::pow): step_size = lr / (1 - beta1^t) and sqrt(1 - beta2^t) in
  // double, as adam_step_args computes them, then rounded as coeffs() rounds them.
  static constexpr bool kFactorsOfCount = true;
  static void counted(Args& a, double lr, const double* bias_table, int64_t taken) {
    if (taken < 0) return;
    a.step_size = lr / bias_table[2 * taken];
    a.bias_correction2_sqrt = optmath::sqrt(bias_table[2 * taken + 1]);
  }
  template <typename T>
  MT_HOST_DEVICE static void at_count(Coeffs<T>& c, double lr, const double* bias_table,
                                      int64_t taken) {
    c.step_size = static_cast<T>(lr / bias_table[2 * taken]);
    c.bias_correction2_sqrt = static_cast<T>(optmath::sqrt(bias_table[2 * taken + 1]));
  }
  template <typename V>
  using AtFirstCount = V;
};

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

/// Scalars of one step, in double (rounded to the parameter's type once per tensor).
struct RMSpropStepArgs {
  double lr = 0.01;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;  ///< L2 term added to the gradient; 0 skips it (torch skips it)
  double momentum = 0.0;      ///< 0: no momentum buffer (torch: momentum > 0)
  bool centered = false;      ///< keep grad_avg and divide by sqrt(square_avg - grad_avg^2)
};

/// RMSprop's row: state {square_avg, grad_avg (centered), momentum_buf (momentum > 0)}. Its
/// factors do not depend on a step count.
struct RmspropStep {
  static constexpr const char* kName = "rmsprop_step";
  static constexpr const char* kMultiName = "rmsprop_step_multi";
  static constexpr int kStates = 3;
  static constexpr const char* kStateNames[kStates] = {"square_avg", "grad_avg", "momentum_buf"};
  using Args = RMSpropStepArgs;
  template <typename T>
  using Coeffs = RmspropCoeffs<T>;
  /// 1 - alpha in double first, as torch's Python float is.
  template <typename T>
  static Coeffs<T> coeffs(const Args& a) {
    Coeffs<T> c;
    c.lr = static_cast<T>(a.lr);
    c.alpha = static_cast<T>(a.alpha);
    c.one_minus_alpha = static_cast<T>(1.0 - a.alpha);
    c.eps = static_cast<T>(a.eps);
    c.weight_decay = static_cast<T>(a.weight_decay);
    c.momentum = static_cast<T>(a.momentum);
    return c;
  }
  template <typename F>
  static void dispatch(const Args& a, F&& f) {
    dispatch_rmsprop_variant(a.weight_decay != 0.0, a.centered, a.momentum > 0.0,
                             std::forward<F>(f));
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool uses(int k) {
    return k == 0 || (k == 1 && V::kCentered) || (k == 2 && V::kMomentum);
  }
  template <typename V>
  MT_HOST_DEVICE static constexpr bool reads(int k) {
    return uses<V>(k);
  }
  template <typename V, typename T>
  MT_HOST_DEVICE static void update(T& p, T g, T* s, const Coeffs<T>& c) {
    rmsprop_update<V>(p, g, s[0], s[1], s[2], c);
  }
  static constexpr bool kFactorsOfCount = false;
  static void counted(Args&, double, const double*, int64_t) {}
  template <typename T>
  MT_HOST_DEVICE static void at_count(Coeffs<T>&, double, const double*, int64_t) {}
  template <typename V>
  using AtFirstCount = V;
};

}  // namespace minitrain
