// GEMM on the GPU through cuBLAS (compiled only in CUDA builds). cuBLAS is column-major and
// minitrain row-major: a row-major [m, n] matrix is the column-major [n, m] matrix C^T, and
// C^T = op(B)^T op(A)^T, so the call passes B first with m and n swapped, and no data moves.

#include <climits>

#include "core/blas_handle.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"
#include "kernels/gemm/gemm.h"

namespace minitrain {

namespace {

int blas_int(int64_t v, const char* what) {
  MT_CHECK_AS(ValueError, v <= INT_MAX, "gemm: ", what, " = ", v,
              " exceeds cuBLAS's 32-bit sizes; split the product into smaller ones");
  return static_cast<int>(v);
}

cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                         int k, const float* alpha, const float* a, int lda, const float* b,
                         int ldb, const float* beta, float* c, int ldc) {
  return cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                         int k, const double* alpha, const double* a, int lda, const double* b,
                         int ldb, const double* beta, double* c, int ldc) {
  return cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t scal_call(cublasHandle_t h, int n, const float* alpha, float* x) {
  return cublasSscal(h, n, alpha, x, 1);
}
cublasStatus_t scal_call(cublasHandle_t h, int n, const double* alpha, double* x) {
  return cublasDscal(h, n, alpha, x, 1);
}

}  // namespace

template <typename T>
void gemm_cublas(Device device, T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m,
                 int64_t n, int64_t k, T alpha, T beta) {
  if (m == 0 || n == 0) return;
  DeviceGuard guard(device);
  cublasHandle_t handle = cublas_handle(device);  // bound to this thread's current stream
  if (k == 0) {
    // An empty product: C = beta * C, done here rather than trusting every cuBLAS version's
    // handling of k == 0 (and of the leading dimensions it then requires).
    const int64_t count = m * n;
    if (beta == T(0))
      CHECK_CUDA(cudaMemsetAsync(c, 0, static_cast<size_t>(count) * sizeof(T),
                                 current_stream(device).native_handle()));
    else if (beta != T(1))
      CHECK_CUBLAS(scal_call(handle, blas_int(count, "m * n"), &beta, c));
    return;
  }
  // Leading dimension = the row length of each matrix as stored (row-major).
  const int lda = blas_int(trans_a ? m : k, "lda");
  const int ldb = blas_int(trans_b ? k : n, "ldb");
  CHECK_CUBLAS(gemm_call(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                         trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, blas_int(n, "n"), blas_int(m, "m"),
                         blas_int(k, "k"), &alpha, b, ldb, a, lda, &beta, c, blas_int(n, "ldc")));
}

template void gemm_cublas<float>(Device, float*, const float*, bool, const float*, bool, int64_t,
                                 int64_t, int64_t, float, float);
template void gemm_cublas<double>(Device, double*, const double*, bool, const double*, bool,
                                  int64_t, int64_t, int64_t, double, double);

}  // namespace minitrain
