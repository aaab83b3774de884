// The CUDA, cuBLAS, cuDNN and NCCL check macros turn a failure code into a typed exception that
// names the expression, file:line, the library's words and advice. Turning a code into an error
// needs no GPU, so these run in every CUDA build (this file is compiled only there).

#include <gtest/gtest.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(LibraryErrorChecks, SuccessIsSilent) {
  EXPECT_NO_THROW(CHECK_CUDA(cudaSuccess));
  EXPECT_NO_THROW(CHECK_CUBLAS(CUBLAS_STATUS_SUCCESS));
  EXPECT_NO_THROW(CHECK_CUDNN(CUDNN_STATUS_SUCCESS));
  EXPECT_NO_THROW(CHECK_NCCL(ncclSuccess));
}

TEST(LibraryErrorChecks, RuntimeOutOfMemoryIsOutOfMemoryWithAdvice) {
  EXPECT_THROW(CHECK_CUDA(cudaErrorMemoryAllocation), OutOfMemory);
  const std::string msg = error_message([] { CHECK_CUDA(cudaErrorMemoryAllocation); });
  EXPECT_TRUE(contains(msg, "cudaErrorMemoryAllocation")) << msg;
  EXPECT_TRUE(contains(msg, "library_error_checks_test.cpp:")) << msg;  // file:line
  EXPECT_TRUE(contains(msg, "reduce the batch size")) << msg;
}

TEST(LibraryErrorChecks, MissingDriverIsDeviceErrorSuggestingTheCpu) {
  EXPECT_THROW(CHECK_CUDA(cudaErrorInsufficientDriver), DeviceError);
  const std::string msg = error_message([] { CHECK_CUDA(cudaErrorNoDevice); });
  EXPECT_TRUE(contains(msg, "CHECK_CUDA(cudaErrorNoDevice)") || contains(msg, "cudaErrorNoDevice"))
      << msg;
  EXPECT_TRUE(contains(msg, "--device cpu")) << msg;
}

TEST(LibraryErrorChecks, CublasFailuresAreTyped) {
  EXPECT_THROW(CHECK_CUBLAS(CUBLAS_STATUS_ALLOC_FAILED), OutOfMemory);
  EXPECT_THROW(CHECK_CUBLAS(CUBLAS_STATUS_INVALID_VALUE), DeviceError);
  const std::string msg = error_message([] { CHECK_CUBLAS(CUBLAS_STATUS_INVALID_VALUE); });
  EXPECT_TRUE(contains(msg, "CUBLAS_STATUS_INVALID_VALUE")) << msg;
}

TEST(LibraryErrorChecks, CudnnFailuresAreDeviceErrors) {
  EXPECT_THROW(CHECK_CUDNN(CUDNN_STATUS_BAD_PARAM), DeviceError);
  const std::string msg = error_message([] { CHECK_CUDNN(CUDNN_STATUS_BAD_PARAM); });
  EXPECT_TRUE(contains(msg, "cuDNN error")) << msg;
  EXPECT_TRUE(contains(msg, "CUDNN_STATUS_BAD_PARAM")) << msg;  // the expression
}

TEST(LibraryErrorChecks, NcclFailuresAreCommErrorsPointingAtPeers) {
  EXPECT_THROW(CHECK_NCCL(ncclInvalidArgument), CommError);
  const std::string msg = error_message([] { CHECK_NCCL(ncclRemoteError); });
  EXPECT_TRUE(contains(msg, "NCCL error")) << msg;
  EXPECT_TRUE(contains(msg, "peer")) << msg;
}

}  // namespace
}  // namespace minitrain
