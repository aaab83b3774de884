#pragma once
// A Linear layer's GEMMs with the work around them, through a named GEMM backend
// (kernels/gemm/gemm_registry.h), so that nn/ picks a backend by name without knowing which of
// them can fuse. "cublaslt" runs the forward's product and bias add as one cublasLtMatmul (its
// BIAS epilogue). The CPU's OpenBLAS path ("auto" or "openblas" on a CPU tensor) does the
// element-wise work on each tile of the product right after it, while the tile is in cache and in
// the GEMM's own parallel region (kernels/gemm/gemm.h's GemmCpuExtras): the bias add, the next
// activation, the previous activation's backward; and the bias gradient's column sums as tasks
// beside dW's tiles. Every other backend runs its GEMM, then the separate passes. Each entry point
// gives the same bits as its unfused composition (the same per-element math, shared through
// kernels/bias_add.h, kernels/activation.h and kernels/reduce.h): tests/kernels/
// linear_kernels_test.cpp compares them.

#include <string>

#include "core/tensor.h"
#include "kernels/activation.h"

namespace minitrain {

/// y [batch, out] = x [batch, in] w[out, in]^T (+ b [out] when b is defined) through `backend`
/// ("auto" too). Errors as gemm_with and bias_add.
void linear_forward_with(const std::string& backend, Tensor& y, const Tensor& x, const Tensor& w,
                         const Tensor& b);

/// linear_forward_with into `y`, then out = act(y) (y is the activation's input, which its
/// backward reads). Errors as linear_forward_with and activation_forward.
void linear_activation_forward_with(const std::string& backend, Tensor& out, Tensor& y,
                                    const Tensor& x, const Tensor& w, const Tensor& b,
                                    Activation act);

/// A Linear's weight and bias gradients from one output gradient: dw = dy^T x + beta dw (beta 1
/// accumulates; beta 0 ignores dw's old contents) and bias_sum = the column sums of dy
/// (kernels/reduce.h's sum_rows; the caller adds it to the bias gradient, or passes the bias
/// gradient itself when that is to be overwritten). Errors as gemm_with and sum_rows.
void linear_weight_grad_with(const std::string& backend, Tensor& dw, double beta, Tensor& bias_sum,
                             const Tensor& dy, const Tensor& x);

/// grad_pre = (dy w) * act'(pre): a Linear's input gradient dy w [batch, in], carried on through
/// the activation before the layer, whose input was `pre`. Errors as gemm_with and
/// activation_backward.
void linear_input_grad_activation_with(const std::string& backend, Tensor& grad_pre,
                                       const Tensor& dy, const Tensor& w, const Tensor& pre,
                                       Activation act);

/// Whether a Linear + activation on `c`'s device with `backend` runs its bias add and activation
/// as one GPU pass (kernels/bias_activation.h) after the GEMM, and its backward's activation
/// gradient and bias column sums as one pass before dW's GEMM: a CUDA tensor, float32 or
/// float64, any backend but "cublaslt" (whose forward folds the bias into the GEMM).
bool is_gpu_bias_activation_fusable(const std::string& backend, const Tensor& c);

/// The backward of a Linear followed by an activation, from the gradient of the activation's
/// output: grad_pre = grad_out * act'(pre) and bias_sum = its column sums in one pass
/// (bias_activation_backward), then dw = grad_pre^T x + beta dw. The same bits as
/// activation_backward, sum_rows and gemm_with one after the other. Errors as those.
void linear_bias_activation_grad_with(const std::string& backend, Tensor& dw, double beta,
                                      Tensor& bias_sum, Tensor& grad_pre, const Tensor& grad_out,
                                      const Tensor& pre, const Tensor& x, Activation act);

/// Whether `backend` on `c`'s device is the CPU's OpenBLAS path (gemm_cpu, float32 or float64),
/// where the entry points above fuse.
bool is_cpu_openblas_gemm(const std::string& backend, const Tensor& c);

}  // namespace minitrain
