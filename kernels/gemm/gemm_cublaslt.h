#pragma once
// GEMM through cuBLASLt (CUDA builds only; defined in gemm_cublaslt.cpp). cublasLtMatmul takes
// an epilogue that runs on the product while it is still in registers, so a Linear layer's
// y = act(x W^T + b) is one kernel instead of a GEMM, a bias-add pass and an activation pass
// (each of those a full read and write of y: memory-bound work saved).
//
// Note [cuBLASLt plans]: a matmul descriptor, the three matrix layouts and the algorithm the
// heuristic picked are cached per (host thread, device, shape, transposes, epilogue, pointer
// alignment), like core/blas_handle.h's handles: the heuristic costs tens of microseconds, more
// than a small GEMM. The workspace is core/blas_handle.h's per-stream cublaslt_workspace.

#include <library_types.h>

#include <cstdint>
#include <optional>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/activation.h"

namespace minitrain {

/// C = alpha * op(A) op(B) + beta * C on raw row-major float32 pointers (kernels/gemm/gemm.h's
/// contract), full FP32 (CUBLAS_COMPUTE_32F), on the calling thread's current stream.
void gemm_cublaslt(Device device, float* c, const float* a, bool trans_a, const float* b,
                   bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta);

/// y = act(x W^T + b) in one cublasLtMatmul: x [batch, in], w [out, in], b [out], y [batch, out],
/// float32 on one CUDA device. act: none (CUBLASLT_EPILOGUE_BIAS), ReLU (RELU_BIAS) or GELUTanh
/// (GELU_BIAS: cuBLASLt's GELU is the tanh approximation, torch.nn.GELU(approximate='tanh'),
/// within float32 rounding of its tanh). Other activations: ValueError (apply them separately).
/// Shape, device and dtype errors as gemm().
void linear_forward_cublaslt(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                             std::optional<Activation> act = std::nullopt);

/// Mixed precision's GEMM (gemm_registry.h's GemmMixedCall) as one cublasLtMatmul: A and B of
/// one 16-bit type, C of that type or float32, CUBLAS_COMPUTE_32F, and a float32 bias through
/// the BIAS epilogue (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = CUDA_R_32F) when set.
struct GemmMixedCall;
void gemm_cublaslt_mixed(Device device, const GemmMixedCall& call);

/// cuBLAS's data type of a dtype (CUDA_R_32F, _64F, _16BF, _16F); defined in
/// gemm_cublas_backends.cpp.
cudaDataType_t cuda_data_type(DType t);

}  // namespace minitrain
