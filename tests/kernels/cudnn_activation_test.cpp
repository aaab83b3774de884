// cuDNN's activation forward/backward (the vendor baseline) against minitrain's kernels on the
// GPU, on odd sizes and both dtypes; and the GELU modes it lacks. Built in CUDA builds only.

#include "kernels/cudnn_activation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::random_tensor;

TEST(CudnnActivation, HasNoGeluMode) {
  EXPECT_TRUE(cudnn_has_activation(Activation::ReLU));
  EXPECT_TRUE(cudnn_has_activation(Activation::Tanh));
  EXPECT_TRUE(cudnn_has_activation(Activation::Sigmoid));
  EXPECT_FALSE(cudnn_has_activation(Activation::GELU));
  EXPECT_FALSE(cudnn_has_activation(Activation::GELUTanh));
}

TEST(CudnnActivationCuda, MatchesMinitrainKernelsOnOddSizes) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Device gpu = Device::cuda(0);
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Activation a : {Activation::ReLU, Activation::Tanh, Activation::Sigmoid})
      for (int64_t n : {1, 3, 17, 1023, 4099, 1 << 20}) {
        SCOPED_TRACE(std::string(activation_name(a)) + ", n = " + std::to_string(n));
        const Tensor x = random_tensor({n}, 5, gpu, dtype, -4.0, 4.0);
        const Tensor gy = random_tensor({n}, 6, gpu, dtype);
        Tensor y = Tensor::empty({n}, dtype, gpu), gx = Tensor::empty({n}, dtype, gpu);
        cudnn_activation_forward(y, x, a);
        cudnn_activation_backward(gx, gy, y, x, a);
        if (n >= 17) {
          ASSERT_GT(host_max_abs(y), 0.0);
        }
        // cuDNN's tanh/sigmoid differ from the CUDA math library's by a few ulp, and its
        // backward derives from the rounded y: 1e-6 absolute for values of order one.
        const double tol = dtype == DType::Float32 ? 1e-6 : 1e-14;
        EXPECT_ALLCLOSE(y, activation_forward(x, a), tol, tol);
        EXPECT_ALLCLOSE(gx, activation_backward(gy, x, a), tol, tol);
      }
}

TEST(CudnnActivationCuda, RejectsGeluWithAdvice) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Tensor x = Tensor::zeros({4}, DType::Float32, Device::cuda(0));
  Tensor y = x.clone();
  EXPECT_THAT(error_message([&] { cudnn_activation_forward(y, x, Activation::GELU); }),
              HasSubstr("cuDNN has no 'gelu' mode"));
}

}  // namespace
}  // namespace minitrain
