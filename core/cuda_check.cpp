#include "core/cuda_check.h"

#include "core/error.h"

namespace minitrain::detail {

namespace {
std::string where(const char* expr, const char* file, int line) {
  return concat(expr, " at ", file, ":", line);
}
}  // namespace

void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear non-sticky errors so the next call starts clean
  const std::string msg = concat("CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                                 ") in ", where(expr, file, line));
  if (e == cudaErrorMemoryAllocation)
    throw OutOfMemory(msg + "; reduce the batch size or the model, or free cached memory");
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
    throw DeviceError(msg + "; run on the CPU with --device cpu");
  if (e == cudaErrorInvalidDevice)
    throw DeviceError(msg + "; `minitrain info` lists the devices that exist");
  throw DeviceError(msg);
}

#if MINITRAIN_WITH_CUDA_LIBS
void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = concat("cuBLAS error ", cublasGetStatusName(s), " (",
                                 cublasGetStatusString(s), ") in ", where(expr, file, line));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemory(msg + "; reduce the batch size");
  throw DeviceError(msg);
}

void check_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  throw DeviceError(
      concat("cuDNN error ", cudnnGetErrorString(s), " in ", where(expr, file, line)));
}

void check_nccl(ncclResult_t r, const char* expr, const char* file, int line) {
  if (r == ncclSuccess) return;
  std::string msg = concat("NCCL error ", ncclGetErrorString(r), " in ", where(expr, file, line));
  if (const char* last = ncclGetLastError(nullptr); last && *last) msg += concat(": ", last);
  if (r == ncclSystemError || r == ncclRemoteError)
    msg += "; a peer may have died: check the other ranks' logs (NCCL_DEBUG=INFO says more)";
  throw CommError(msg);
}
#endif  // MINITRAIN_WITH_CUDA_LIBS

}  // namespace minitrain::detail
