#pragma once
// cuDNN's activation forward and backward (the legacy cudnnActivationForward/Backward API), the
// vendor baseline that minitrain's activation kernels are tested and benchmarked against. cuDNN
// has ReLU, tanh and sigmoid modes (plus clipped ReLU, ELU, swish); it has no GELU mode in this
// API (GELU exists only as a pointwise op of the cuDNN graph API), so GELU and GELU-tanh have no
// baseline here. Float32 and float64 tensors on a GPU. The definitions exist in CUDA builds only
// (kernels/cudnn_activation.cpp is a CUDA source); CPU-only code may call cudnn_has_activation.

#include "core/tensor.h"
#include "kernels/activation.h"

namespace minitrain {

/// True for the activations cuDNN's legacy API implements (ReLU, tanh, sigmoid).
inline bool cudnn_has_activation(Activation a) {
  return a == Activation::ReLU || a == Activation::Tanh || a == Activation::Sigmoid;
}

/// y = f(x) through cudnnActivationForward on x's device and current stream. Throws ValueError
/// for GELU / GELU-tanh (no cuDNN mode), DeviceError for CPU tensors, and the kernels/check.h
/// errors for mismatched operands.
void cudnn_activation_forward(Tensor& y, const Tensor& x, Activation a);
/// grad_x = grad_y * f'(x) through cudnnActivationBackward, which takes the forward output y as
/// well as x (cuDNN computes the derivative from y for tanh and sigmoid).
void cudnn_activation_backward(Tensor& grad_x, const Tensor& grad_y, const Tensor& y,
                               const Tensor& x, Activation a);

}  // namespace minitrain
