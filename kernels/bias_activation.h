#pragma once
// Bias + activation in one pass, a Linear layer's epilogue: y = act(x + bias) for x [rows, cols]
// and bias [cols], keeping the pre-activation x + bias when the backward needs it; and the
// backward in one pass: grad_pre = act'(pre) * grad_y and grad_bias = sum over rows of grad_pre.
// Memory-bound: unfused, bias_add and the activation each read and write the whole matrix
// (4 passes); fused, x is read once and y (and pre) written once. The results equal the unfused
// composition (bias_add then activation_forward; activation_backward then sum_rows) bit for bit:
// the per-element math is the same (kernels/activation_math.h) and so is the summation order.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/activation.h"

struct CUstream_st;

namespace minitrain {

/// y = act(x + bias); `pre`, when defined, receives x + bias (the backward's input). y and pre
/// have x's shape; either may be x (in place). Throws ShapeError / DeviceError / DTypeError.
void bias_activation_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& bias,
                             Activation a);
/// The same into new tensors; *pre_out (when given) receives the pre-activation.
Tensor bias_activation_forward(const Tensor& x, const Tensor& bias, Activation a,
                               Tensor* pre_out = nullptr);

/// grad_pre = grad_y * act'(pre) ([rows, cols]; the gradient with respect to x and to pre) and
/// grad_bias[c] = sum_r grad_pre[r, c] ([cols], accumulated in double). grad_pre may be grad_y.
void bias_activation_backward(Tensor& grad_pre, Tensor& grad_bias, const Tensor& grad_y,
                              const Tensor& pre, Activation a);

// ---- implementations (float and double are instantiated); pre may be null ----
template <typename T>
void bias_activation_forward_cpu(Activation a, T* y, T* pre, const T* x, const T* bias,
                                 int64_t rows, int64_t cols);
template <typename T>
void bias_activation_backward_cpu(Activation a, T* grad_pre, T* grad_bias, const T* grad_y,
                                  const T* pre, int64_t rows, int64_t cols);
template <typename T>
void bias_activation_forward_cuda(Activation a, T* y, T* pre, const T* x, const T* bias,
                                  int64_t rows, int64_t cols, CUstream_st* stream);
template <typename T>
void bias_activation_backward_cuda(Activation a, T* grad_pre, T* grad_bias, const T* grad_y,
                                   const T* pre, int64_t rows, int64_t cols, CUstream_st* stream);

}  // namespace minitrain
