#pragma once
// The GEMM backends minitrain ships, each defined beside its implementation and added to the
// registry by kernels/gemm/gemm_registry.cpp on first use (explicit calls: a static initialiser in
// a static library's object would be dropped by the linker when nothing else references it).

#include "kernels/gemm/gemm_registry.h"

namespace minitrain {

// ---- CPU (every build) ----
GemmBackend openblas_gemm_backend();  ///< gemm_cpu (kernels/gemm/gemm.cpp): OpenBLAS tiles on
                                      ///< OpenMP; defined in gemm_registry.cpp
GemmBackend eigen_gemm_backend();  ///< kernels/gemm_eigen.cpp: Eigen 3 products on row-major maps
GemmBackend reference_gemm_backend();  ///< kernels/gemm/gemm_reference.cpp: in-order sums, as the
                                       ///< CUDA ladder's naive rung

// ---- CUDA (CUDA builds only) ----
GemmBackend
cublas_gemm_backend();  ///< kernels/gemm_cublas_backends.cpp: cublasSgemm/Dgemm, full FP32
GemmBackend
cublas_tf32_gemm_backend();  ///< kernels/gemm_cublas_backends.cpp: cublasGemmEx, TF32 tensor cores
GemmBackend
cublas_bf16_gemm_backend();  ///< kernels/gemm_cublas_backends.cpp: cublasGemmEx, BF16 tensor cores
GemmBackend cublaslt_gemm_backend();  ///< kernels/gemm/gemm_cublaslt.cpp: cublasLtMatmul, float32

}  // namespace minitrain
