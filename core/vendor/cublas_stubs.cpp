// cuBLAS functions minitrain calls, forwarded to libcublas opened on first use (Note [vendor
// stubs] in core/vendor/vendor_library.h). Names are the exported ones: cublas_v2.h maps
// cublasSgemm to cublasSgemm_v2, and so on.

#include <cublas_v2.h>

#include "core/vendor/forward.h"

MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasSetStream_v2,
                  (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasGetStream_v2,
                  (cublasHandle_t handle, cudaStream_t* stream), (handle, stream))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasSetMathMode,
                  (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasGetProperty, (libraryPropertyType type, int* value),
                  (type, value))
MT_VENDOR_FORWARD(cublas, const char*, cublasGetStatusName, (cublasStatus_t status), (status))
MT_VENDOR_FORWARD(cublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))

MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasSgemm_v2,
                  (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                   int n, int k, const float* alpha, const float* A, int lda, const float* B,
                   int ldb, const float* beta, float* C, int ldc),
                  (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasDgemm_v2,
                  (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                   int n, int k, const double* alpha, const double* A, int lda, const double* B,
                   int ldb, const double* beta, double* C, int ldc),
                  (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasGemmEx,
                  (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                   int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                   const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                   cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                   cublasGemmAlgo_t algo),
                  (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                   Ctype, ldc, computeType, algo))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasSscal_v2,
                  (cublasHandle_t handle, int n, const float* alpha, float* x, int incx),
                  (handle, n, alpha, x, incx))
MT_VENDOR_FORWARD(cublas, cublasStatus_t, cublasDscal_v2,
                  (cublasHandle_t handle, int n, const double* alpha, double* x, int incx),
                  (handle, n, alpha, x, incx))
