// cuBLAS as three registry entries (CUDA builds only): "cublas", cublasSgemm/Dgemm in full FP32
// (kernels/gemm_cublas.cpp), the reference every FP32 kernel is measured against; "cublas_tf32",
// cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32: float32 in and out, the inputs rounded to TF32
// (10-bit mantissa) for the tensor cores, float32 accumulate; and "cublas_bf16", the same with
// CUBLAS_COMPUTE_32F_FAST_16BF: the inputs rounded to bfloat16 (8-bit mantissa). Those two are the
// references of the ladder's tensor-core rungs tc_tf32 and tc_bf16, which take float32 pointers and
// round the same way. All compute-bound at large sizes.

#include <climits>

#include "core/blas_handle.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_builtin.h"
#include "kernels/gemm/gemm_cublaslt.h"

namespace minitrain {

namespace {

int backend_blas_int(int64_t v, const char* what) {
  MT_CHECK_AS(ValueError, v <= INT_MAX, "gemm (cublasGemmEx): ", what, " = ", v,
              " exceeds cuBLAS's 32-bit sizes; split the product into smaller ones");
  return static_cast<int>(v);
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B goes first, m and n swap
// (the same mapping as gemm_cublas.cpp).
// float32 in and out; `compute` says how cuBLAS may round the inputs for the tensor cores.
void gemm_cublas_fast(cublasComputeType_t compute, Device device, float* c, const float* a,
                      bool trans_a, const float* b, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, float beta) {
  if (m == 0 || n == 0) return;
  // An empty product is beta * C: gemm_cublas already does that without trusting cuBLAS with k = 0.
  if (k == 0) return gemm_cublas<float>(device, c, a, trans_a, b, trans_b, m, n, k, alpha, beta);
  DeviceGuard guard(device);
  cublasHandle_t handle = cublas_handle(device);  // bound to this thread's current stream
  const int lda = backend_blas_int(trans_a ? m : k, "lda"),
            ldb = backend_blas_int(trans_b ? k : n, "ldb");
  // The compute type asks for TF32 or BF16 for this call alone; the handle stays in full FP32
  // (Note [cuBLAS math mode] in core/blas_handle.h).
  CHECK_CUBLAS(cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, backend_blas_int(n, "n"),
                            backend_blas_int(m, "m"), backend_blas_int(k, "k"), &alpha, b,
                            CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, c, CUDA_R_32F,
                            backend_blas_int(n, "ldc"), compute, CUBLAS_GEMM_DEFAULT));
}

// Mixed precision's GEMM (issue 35) as one cublasGemmEx: A and B of one 16-bit type, C of that
// type or float32, CUBLAS_COMPUTE_32F (float32 accumulate, C rounded once by cuBLAS). The
// registry admits only those combinations (GemmBackend::mixed_equal_inputs) and no bias:
// cublasGemmEx has no epilogue, and a bias added after it would round C twice. (cuBLASLt's BIAS
// epilogue, which "cublaslt" uses, would take it in one launch, but with a float32 bias and a
// 16-bit D, a combination not yet run on a GPU: the default backend keeps the cast path for a
// Linear's forward with a bias until the GPU kit has run GemmMixedCuda.)
void gemm_cublas_mixed(Device device, const GemmMixedCall& g) {
  if (g.m == 0 || g.n == 0) return;
  MT_CHECK_AS(ValueError, g.bias == nullptr,
              "gemm backend 'cublas': cublasGemmEx has no bias epilogue; use 'cublaslt'");
  DeviceGuard guard(device);
  cublasHandle_t handle = cublas_handle(device);  // bound to this thread's current stream
  const int lda = backend_blas_int(g.trans_a ? g.m : g.k, "lda"),
            ldb = backend_blas_int(g.trans_b ? g.k : g.n, "ldb");
  CHECK_CUBLAS(cublasGemmEx(handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                            g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, backend_blas_int(g.n, "n"),
                            backend_blas_int(g.m, "m"), backend_blas_int(g.k, "k"), &g.alpha, g.b,
                            cuda_data_type(g.b_dtype), ldb, g.a, cuda_data_type(g.a_dtype), lda,
                            &g.beta, g.c, cuda_data_type(g.c_dtype), backend_blas_int(g.n, "ldc"),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::BFloat16:
      return CUDA_R_16BF;
    case DType::Float16:
      return CUDA_R_16F;
    case DType::Float64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

GemmBackend cublas_gemm_backend() {
  GemmBackend g;
  g.name = "cublas";
  g.device = DeviceType::CUDA;
  g.technique = "cuBLAS cublasSgemm/Dgemm, full FP32 on the CUDA cores (the FP32 reference)";
  g.float32 = [](Device d, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha,
                 float beta) { gemm_cublas<float>(d, c, a, ta, b, tb, m, n, k, alpha, beta); };
  g.float64 = [](Device d, double* c, const double* a, bool ta, const double* b, bool tb, int64_t m,
                 int64_t n, int64_t k, double alpha,
                 double beta) { gemm_cublas<double>(d, c, a, ta, b, tb, m, n, k, alpha, beta); };
  g.mixed = gemm_cublas_mixed;
  g.mixed_equal_inputs = true;
  return g;
}

GemmBackend cublas_tf32_gemm_backend() {
  GemmBackend g;
  g.name = "cublas_tf32";
  g.device = DeviceType::CUDA;
  g.technique =
      "cuBLAS cublasGemmEx, TF32 tensor cores with float32 accumulate (the TF32 reference)";
  g.reduced_precision_inputs = true;
  g.float32 = [](Device d, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha, float beta) {
    gemm_cublas_fast(CUBLAS_COMPUTE_32F_FAST_TF32, d, c, a, ta, b, tb, m, n, k, alpha, beta);
  };
  return g;
}

GemmBackend cublas_bf16_gemm_backend() {
  GemmBackend g;
  g.name = "cublas_bf16";
  g.device = DeviceType::CUDA;
  g.technique =
      "cuBLAS cublasGemmEx, BF16 tensor cores with float32 accumulate (the BF16 reference)";
  g.reduced_precision_inputs = true;
  // Rounds its inputs to bfloat16, as tc_bf16 does: exact for bf16 runs, not for float16 ones.
  g.precisions = {DType::Float32, DType::BFloat16};
  g.float32 = [](Device d, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha, float beta) {
    gemm_cublas_fast(CUBLAS_COMPUTE_32F_FAST_16BF, d, c, a, ta, b, tb, m, n, k, alpha, beta);
  };
  return g;
}

}  // namespace minitrain
