// Linear forward by backend name: cuBLASLt's fused bias epilogue where it applies (a CUDA float32
// layer with a bias), else the backend's GEMM followed by a bias-add pass.

#include "kernels/linear_forward.h"

#include "kernels/bias_add.h"
#include "kernels/dispatch.h"
#include "kernels/gemm/gemm_registry.h"

#if MINITRAIN_WITH_CUDA_LIBS
#include "kernels/gemm/gemm_cublaslt.h"
#endif

namespace minitrain {

void linear_forward_with(const std::string& backend, Tensor& y, const Tensor& x, const Tensor& w,
                         const Tensor& b) {
  if (backend == "cublaslt" && b.defined() && y.defined() && y.device().is_cuda() &&
      y.dtype() == DType::Float32) {
#if MINITRAIN_WITH_CUDA_LIBS
    linear_forward_cublaslt(y, x, w, b);
    return;
#endif
  }
  // Anything else, including "cublaslt" with the wrong device or dtype: gemm_with names the error.
  gemm_with(backend, y, x, /*trans_a=*/false, w, /*trans_b=*/true);
  if (b.defined()) bias_add(y, y, b);
}

}  // namespace minitrain
