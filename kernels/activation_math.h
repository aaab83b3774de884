#pragma once
// Scalar forward and backward math of the activations, shared by the CPU loops (activation.cpp)
// and the CUDA kernels (activation.cu), so the formulas are written and tested once. They follow
// PyTorch's own kernels term for term (aten/src/ATen/native/cpu/Activation.cpp, UnaryOpsKernel),
// in the element type: float math for float tensors, as torch computes them.
//
// Every backward takes the forward INPUT x and the incoming gradient g and returns g * f'(x);
// tanh and sigmoid also have the form torch itself computes, from the forward OUTPUT y.
//
// 16-bit storage (bfloat16/float16, mixed precision): ActivationOf / ActivationGradOf below widen
// to float32, compute, and round once to the storage type, as torch's CPU and CUDA kernels do.

#include <cmath>
#include <type_traits>

#include "core/half.h"
#include "core/host_device.h"
#include "kernels/convert.h"

namespace minitrain {

namespace actmath {
// float and double overloads of the C math functions; the C names exist on host and device
// alike, where std:: overload sets are not guaranteed in device code.
MT_HOST_DEVICE float exp(float x) { return ::expf(x); }
MT_HOST_DEVICE double exp(double x) { return ::exp(x); }
MT_HOST_DEVICE float erf(float x) { return ::erff(x); }
MT_HOST_DEVICE double erf(double x) { return ::erf(x); }
MT_HOST_DEVICE float tanh(float x) { return ::tanhf(x); }
MT_HOST_DEVICE double tanh(double x) { return ::tanh(x); }

inline constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr double kGeluKappa = 0.044715;
}  // namespace actmath

// ---- ReLU: max(x, 0); NaN passes through, relu'(0) = 0 (torch's threshold_backward) ----
template <typename T>
MT_HOST_DEVICE T relu_forward(T x) {
  return x < T(0) ? T(0) : x;
}
template <typename T>
MT_HOST_DEVICE T relu_backward(T g, T x) {
  return x <= T(0) ? T(0) : g;
}

// ---- GELU, erf form (torch.nn.GELU()): x * Phi(x) ----
template <typename T>
MT_HOST_DEVICE T gelu_forward(T x) {
  return x * T(0.5) * (T(1) + actmath::erf(x * T(actmath::kSqrt1_2)));
}
template <typename T>
MT_HOST_DEVICE T gelu_backward(T g, T x) {
  const T cdf = T(0.5) * (T(1) + actmath::erf(x * T(actmath::kSqrt1_2)));
  const T pdf = T(actmath::kInvSqrt2Pi) * actmath::exp(x * x * T(-0.5));
  return g * (cdf + x * pdf);
}

// ---- GELU, tanh approximation (approximate='tanh'): kBeta = sqrt(2/pi), kKappa = 0.044715 ----
template <typename T>
MT_HOST_DEVICE T gelu_tanh_forward(T x) {
  const T x_cube = x * x * x;
  const T inner = T(actmath::kSqrt2OverPi) * (x + T(actmath::kGeluKappa) * x_cube);
  return T(0.5) * x * (T(1) + actmath::tanh(inner));
}
template <typename T>
MT_HOST_DEVICE T gelu_tanh_backward(T g, T x) {
  const T x_sq = x * x;
  const T x_cube = x_sq * x;
  const T inner = T(actmath::kSqrt2OverPi) * (x + T(actmath::kGeluKappa) * x_cube);
  const T tanh_inner = actmath::tanh(inner);
  const T left = T(0.5) * x;
  const T right = T(1) + tanh_inner;
  const T left_derivative = T(0.5) * right;
  const T tanh_derivative = T(1) - tanh_inner * tanh_inner;
  const T inner_derivative =
      T(actmath::kSqrt2OverPi) * (T(1) + T(3) * T(actmath::kGeluKappa) * x_sq);
  const T right_derivative = left * tanh_derivative * inner_derivative;
  return g * (left_derivative + right_derivative);
}

// ---- tanh: derivative 1 - tanh(x)^2 ----
template <typename T>
MT_HOST_DEVICE T tanh_forward(T x) {
  return actmath::tanh(x);
}
template <typename T>
MT_HOST_DEVICE T tanh_backward_from_output(T g, T y) {
  return g * (T(1) - y * y);  // torch's tanh_backward(grad, output)
}
template <typename T>
MT_HOST_DEVICE T tanh_backward(T g, T x) {
  return tanh_backward_from_output(g, tanh_forward(x));
}

// ---- sigmoid: exp of a non-positive number only, so no overflow for large |x| ----
template <typename T>
MT_HOST_DEVICE T sigmoid_forward(T x) {
  if (x >= T(0)) return T(1) / (T(1) + actmath::exp(-x));
  const T e = actmath::exp(x);
  return e / (T(1) + e);
}
template <typename T>
MT_HOST_DEVICE T sigmoid_backward_from_output(T g, T y) {
  return g * (T(1) - y) * y;  // torch's sigmoid_backward(grad, output) order: grad * (1 - y) * y
}
template <typename T>
MT_HOST_DEVICE T sigmoid_backward(T g, T x) {
  return sigmoid_backward_from_output(g, sigmoid_forward(x));
}

// ---- the same functions as types, so a kernel or loop can be templated on the activation ----
// kSavesOutput: torch keeps the forward's output for backward (tanh, sigmoid) and differentiates
// from it; the others keep the input. The same in float32 (y = f(x) either way), not once y is
// rounded to 16 bits.
struct ReluMath {
  static constexpr bool kSavesOutput = false;
  template <typename T>
  static MT_HOST_DEVICE T forward(T x) {
    return relu_forward(x);
  }
  template <typename T>
  static MT_HOST_DEVICE T backward(T g, T x) {
    return relu_backward(g, x);
  }
};
struct GeluMath {
  static constexpr bool kSavesOutput = false;
  template <typename T>
  static MT_HOST_DEVICE T forward(T x) {
    return gelu_forward(x);
  }
  template <typename T>
  static MT_HOST_DEVICE T backward(T g, T x) {
    return gelu_backward(g, x);
  }
};
struct GeluTanhMath {
  static constexpr bool kSavesOutput = false;
  template <typename T>
  static MT_HOST_DEVICE T forward(T x) {
    return gelu_tanh_forward(x);
  }
  template <typename T>
  static MT_HOST_DEVICE T backward(T g, T x) {
    return gelu_tanh_backward(g, x);
  }
};
struct TanhMath {
  static constexpr bool kSavesOutput = true;
  template <typename T>
  static MT_HOST_DEVICE T backward_from_output(T g, T y) {
    return tanh_backward_from_output(g, y);
  }
  template <typename T>
  static MT_HOST_DEVICE T forward(T x) {
    return tanh_forward(x);
  }
  template <typename T>
  static MT_HOST_DEVICE T backward(T g, T x) {
    return tanh_backward(g, x);
  }
};
struct SigmoidMath {
  static constexpr bool kSavesOutput = true;
  template <typename T>
  static MT_HOST_DEVICE T backward_from_output(T g, T y) {
    return sigmoid_backward_from_output(g, y);
  }
  template <typename T>
  static MT_HOST_DEVICE T forward(T x) {
    return sigmoid_forward(x);
  }
  template <typename T>
  static MT_HOST_DEVICE T backward(T g, T x) {
    return sigmoid_backward(g, x);
  }
};

// ---- element functors for every storage type, shared by the CPU loops and the CUDA kernels ----
template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

/// y = f(x). A 16-bit x is widened, f computed in float32 and the result rounded once.
template <typename M>
struct ActivationOf {
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    if constexpr (kIsHalf<T>)
      return narrow<T>(M::forward(widen(x)));
    else
      return M::forward(x);
  }
};

/// grad_x = g * f'(x), x the forward input. For 16-bit tensors in float32 and rounded once; tanh
/// and sigmoid differentiate from the 16-bit output y = ActivationOf(x), the value torch saved.
template <typename M>
struct ActivationGradOf {
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    if constexpr (!kIsHalf<T>) {
      return M::backward(g, x);
    } else if constexpr (M::kSavesOutput) {
      return narrow<T>(M::backward_from_output(widen(g), widen(ActivationOf<M>{}(x))));
    } else {
      return narrow<T>(M::backward(widen(g), widen(x)));
    }
  }
};

}  // namespace minitrain
