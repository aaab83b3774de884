#pragma once
// Check macros for the CUDA runtime, cuBLAS, cuDNN and NCCL. Include only from CUDA-enabled
// sources (.cu files and code under MINITRAIN_WITH_CUDA). Each failure throws with the
// expression, file:line, the library's own words and, where one is known, advice. The vendor
// libraries' checks exist only where the libraries do (MINITRAIN_WITH_CUDA_LIBS: not on the
// emulated GPUs).

#include <cuda_runtime_api.h>

namespace minitrain::detail {
void check_cuda(cudaError_t e, const char* expr, const char* file, int line);
}  // namespace minitrain::detail

#define CHECK_CUDA(e) ::minitrain::detail::check_cuda((e), #e, __FILE__, __LINE__)
#define CHECK_CUDA_LAUNCH() CHECK_CUDA(cudaGetLastError())

#if MINITRAIN_WITH_CUDA_LIBS
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <nccl.h>

namespace minitrain::detail {
void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line);
void check_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line);
void check_nccl(ncclResult_t r, const char* expr, const char* file, int line);
}  // namespace minitrain::detail

#define CHECK_CUBLAS(e) ::minitrain::detail::check_cublas((e), #e, __FILE__, __LINE__)
#define CHECK_CUDNN(e) ::minitrain::detail::check_cudnn((e), #e, __FILE__, __LINE__)
#define CHECK_NCCL(e) ::minitrain::detail::check_nccl((e), #e, __FILE__, __LINE__)
#endif  // MINITRAIN_WITH_CUDA_LIBS
