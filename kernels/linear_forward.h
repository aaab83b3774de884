#pragma once
// A Linear layer's forward, y = x W^T + b, through a named GEMM backend
// (kernels/gemm/gemm_registry.h). One entry point so that nn/ picks a backend by name without
// knowing which of them can fuse: "cublaslt" runs the product and the bias add as one
// cublasLtMatmul (its BIAS epilogue); every other backend runs its GEMM, then kernels/bias_add.h's
// pass over y.

#include <string>

#include "core/tensor.h"

namespace minitrain {

/// y [batch, out] = x [batch, in] w[out, in]^T (+ b [out] when b is defined) through `backend`
/// ("auto" too). Errors as gemm_with and bias_add.
void linear_forward_with(const std::string& backend, Tensor& y, const Tensor& x, const Tensor& w,
                         const Tensor& b);

}  // namespace minitrain
